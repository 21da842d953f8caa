"""The reference a model set's answers are defined by, run beside ours in `vkocr bench stream`: RapidOCR 1.4.4
(`rapidocr-onnxruntime`, its bundled PP-OCRv4 files) for the `rapidocr-1.4.4` procedure, RapidOCR 3.10.0
(`rapidocr`) for `rapidocr-3.10`, both on onnxruntime (CPU). RapidOCR 3.10 is given every model path, the set's
local files, so it downloads nothing (its default fetches them at run time)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

Lines = list[tuple[Any, str]]  # (box, text) of each line, in the reference's order


@dataclass(frozen=True)
class Reference:
    """A reference pipeline, ready to run: `read(bgr)` gives its lines for an H×W×3 BGR uint8 image."""

    label: str  # e.g. "RapidOCR 3.10.0"
    read: Callable[[np.ndarray], Lines]


REFERENCES = {"rapidocr-1.4.4": ("rapidocr-onnxruntime", "1.4.4"), "rapidocr-3.10": ("rapidocr", "3.10.0")}


def reference_for(procedure: str, model_paths: Mapping[str, Path], det_limit_side_len: int | None = None
                  ) -> Reference | None:
    """The reference of `procedure` (agent/ocr/procedures.py), or None when its package is not installed at the
    version the procedure follows. `model_paths` (role → file) are what RapidOCR 3.10 runs; 1.4.4 runs its own
    bundled files, which are ppocrv4's."""
    if procedure not in REFERENCES:
        raise ValueError(f"no reference for procedure {procedure!r}; known: {', '.join(REFERENCES)}")
    package, version = REFERENCES[procedure]
    try:
        installed = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
    if installed != version:
        return None
    if procedure == "rapidocr-1.4.4":
        return _rapidocr_144(det_limit_side_len)
    return _rapidocr_310(model_paths, det_limit_side_len)


def _rapidocr_144(det_limit_side_len: int | None) -> Reference:
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR(**({} if det_limit_side_len is None else {"det_limit_side_len": det_limit_side_len}))

    def read(bgr: np.ndarray) -> Lines:
        found, _ = engine(bgr)
        return [(box, text) for box, text, _score in found or []]

    return Reference("RapidOCR 1.4.4", read)


def _rapidocr_310(model_paths: Mapping[str, Path], det_limit_side_len: int | None) -> Reference:
    from rapidocr import RapidOCR

    # det, cls and rec only: RapidOCR's pipeline has no page orientation stage (our optional "ori" model)
    params: dict[str, Any] = {"Global.log_level": "critical", **{f"{role.capitalize()}.model_path": str(path)
                                                                   for role, path in model_paths.items()
                                                                   if role in ("det", "cls", "rec")}}
    if det_limit_side_len is not None:
        params["Det.limit_side_len"] = det_limit_side_len
    engine = RapidOCR(params=params)

    def read(bgr: np.ndarray) -> Lines:
        out = engine(bgr)
        boxes, texts = getattr(out, "boxes", None), getattr(out, "txts", None)  # None when it found nothing
        if boxes is None or texts is None:
            return []
        return list(zip(boxes, texts, strict=True))

    return Reference("RapidOCR 3.10.0", read)
