"""RapidOCR 3.10.0 (a test-only dependency, import name `rapidocr`) as the `ppocrv6-small` set's reference: its
default pipeline, on onnxruntime, reading the set's files from the models folder. Given every model path it
downloads nothing (its default would fetch them at run time)."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np
import pytest

from vkocr.agent.ocr.model_files import PPOCRV6_SMALL, missing_or_bad, models_dir


def rapidocr_310() -> Any:
    """A RapidOCR 3.10 engine on ppocrv6-small's local files; skips when the package or the files are absent."""
    module = pytest.importorskip("rapidocr")
    version = importlib.metadata.version("rapidocr")
    if version != "3.10.0":
        pytest.skip(f"rapidocr {version} is installed; the reference is 3.10.0")
    if missing_or_bad(models_dir(), PPOCRV6_SMALL.files):
        pytest.skip(f"ppocrv6-small absent from {models_dir()} or damaged: scripts/fetch_models.py")
    paths = {m.role: str(models_dir() / m.filename) for m in PPOCRV6_SMALL.files}
    # every stage's engine_type is onnxruntime in its default config.yaml (it takes that key only as its Enum)
    return module.RapidOCR(params={"Global.log_level": "critical", "Det.model_path": paths["det"],
                                   "Cls.model_path": paths["cls"], "Rec.model_path": paths["rec"]})


def lines_310(engine: Any, source: Any) -> list[tuple[str, list[list[float]]]]:
    """(text, box) of each line RapidOCR 3.10 reads in `source` (a path, or an array as it takes arrays)."""
    out = engine(source)
    if getattr(out, "txts", None) is None or getattr(out, "boxes", None) is None:
        return []
    return [(text, np.asarray(box, np.float64).tolist()) for text, box in zip(out.txts, out.boxes)]
