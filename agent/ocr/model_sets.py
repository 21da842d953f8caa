"""Which models the pipeline runs: a model set by name (MODEL_SETS: `ppocrv6-small`, the default, and `ppocrv4`),
or a folder.

`--models NAME|DIR` (`vkocr ocr`, `vkocr bundle create`), `[models] set` and `dir` (`vkocr serve`) and
`vkocr.OCR(models=…)` all come here. A folder says what it holds in a `modelset.toml`:

    name = "labels-v6"              # optional; default: the folder's name
    procedure = "rapidocr-3.10"     # whose steps between the networks (agent/ocr/procedures.py)
    [files]                         # paths inside the folder
    det = "det.onnx"
    cls = "cls.onnx"
    rec = "rec.onnx"
    ori = "orientation.onnx"        # optional: the page orientation model (agent/ocr/orientation.py)
    [options]                       # optional: OcrOptions the set needs (e.g. rec_height = 32)

A folder without one is read as the first known set (in MODEL_SETS order) whose three file names it holds, with
that set's procedure; the files are used as they are (`vkocr models list` says which match the set's sha256).
A known set takes the page orientation model (`ori`) from the same folder when its file is there.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vkocr.agent.errors import ModelSetError, OptionsError
from vkocr.agent.ocr.model_files import DEFAULT_SET, MODEL_SETS, ModelSet, models_dir
from vkocr.agent.ocr.options import CHOICES, OcrOptions

MODELSET_FILE = "modelset.toml"
ROLES = ("det", "cls", "rec")
OPTIONAL_ROLES = ("ori",)  # the page orientation model: run when use_doc_orientation asks, if present
MODELSET_KEYS = frozenset({"name", "procedure", "files", "options"})


@dataclass(frozen=True)
class ChosenModels:
    """The three model files to run, the set they come from and the OcrOptions that set asks for."""

    name: str  # the set's name, or the folder's
    paths: dict[str, Path]  # role → file: det, cls, rec, and ori (the page orientation model) when it is there
    options: dict[str, Any] = field(default_factory=dict)  # OcrOptions fields, `procedure` always among them
    known: ModelSet | None = None  # the MODEL_SETS entry, when the files are one's (by name)

    @property
    def procedure(self) -> str:
        return str(self.options["procedure"])

    def with_files(self, files: dict[str, Path]) -> ChosenModels:
        """These models with some files replaced (--det-model and the like): the set's procedure stays."""
        return dataclasses.replace(self, paths=self.paths | files)

    def ocr_options(self, overrides: dict[str, Any] | None = None) -> OcrOptions:
        """OcrOptions: the set's, then `overrides` (a deployment's, a command line's) over them."""
        return OcrOptions().replace(**(self.options | (overrides or {})))

    def required_paths(self) -> dict[str, Path]:
        """The det, cls and rec files alone (what a bundle carries), without the optional orientation model."""
        return {role: path for role, path in self.paths.items() if role in ROLES}

    def missing(self) -> list[Path]:
        return [p for p in self.paths.values() if not p.is_file()]


def known_set(model_set: ModelSet, directory: Path | None = None) -> ChosenModels:
    root = directory or models_dir()
    paths = {m.role: root / m.filename for m in model_set.files}
    paths |= {m.role: root / m.filename for m in model_set.optional if (root / m.filename).is_file()}
    return ChosenModels(model_set.name, paths, {"procedure": model_set.procedure}, model_set)


def choose_models(spec: str | None = None, directory: Path | None = None) -> ChosenModels:
    """The models `spec` names: a MODEL_SETS name (its files in `directory`, else models_dir()), or a folder.
    Without `spec`: `directory` read as a folder when given, else the default set. ModelSetError when `spec` is
    neither a known name nor a folder, or the folder says nothing usable."""
    if spec:
        if spec in MODEL_SETS:
            return known_set(MODEL_SETS[spec], directory)
        folder = Path(spec)
        if not folder.is_dir():
            raise ModelSetError(f"--models {spec}: neither a model set ({', '.join(MODEL_SETS)}) nor a folder")
        return read_folder(folder)
    if directory is not None:
        return read_folder(directory)
    return known_set(DEFAULT_SET)


def read_folder(folder: Path) -> ChosenModels:
    """The models a folder holds: as its modelset.toml says, else a known set's file names."""
    described = folder / MODELSET_FILE
    if described.is_file():
        return _read_modelset_toml(described)
    for model_set in MODEL_SETS.values():
        if all((folder / m.filename).is_file() for m in model_set.files):
            return known_set(model_set, folder)
    expected = "; ".join(f"{s.name}: {', '.join(m.filename for m in s.files)}" for s in MODEL_SETS.values())
    raise ModelSetError(f"{folder}: no {MODELSET_FILE} and no known set's files in it (expected {expected})")


def _read_modelset_toml(path: Path) -> ChosenModels:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ModelSetError(f"{path}: cannot read it: {exc}") from None
    unknown = sorted(set(doc) - MODELSET_KEYS)
    if unknown:
        raise ModelSetError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(MODELSET_KEYS))}")
    procedure = doc.get("procedure")
    if procedure not in CHOICES["procedure"]:
        raise ModelSetError(f"{path}: procedure must be one of {', '.join(CHOICES['procedure'])}, got {procedure!r}")
    files = doc.get("files")
    if (not isinstance(files, dict) or not set(ROLES) <= set(files) <= set(ROLES + OPTIONAL_ROLES)
            or not all(isinstance(v, str) for v in files.values())):
        raise ModelSetError(f"{path}: [files] must name det, cls and rec (and optionally ori), each a path inside "
                            "the folder")
    folder = path.parent
    paths = {role: folder / files[role] for role in files}
    for role, file in paths.items():
        if not file.resolve().is_relative_to(folder.resolve()):
            raise ModelSetError(f"{path}: files.{role} = {files[role]!r} lies outside the folder")
    options = doc.get("options", {})
    if not isinstance(options, dict) or "procedure" in options:
        raise ModelSetError(f"{path}: [options] must be a table of OcrOptions (procedure is its own key)")
    try:
        OcrOptions().replace(**options, procedure=procedure)
    except OptionsError as exc:
        raise ModelSetError(f"{path}: [options]: {exc}") from None
    name = doc.get("name", folder.resolve().name)
    if not isinstance(name, str) or not name:
        raise ModelSetError(f"{path}: name must be a non-empty string")
    return ChosenModels(name, paths, {**options, "procedure": procedure})
