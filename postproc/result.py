"""What the pipeline returns per image: recognised lines, plugin fields, plugin errors, stage timings.

``OcrResult.to_dict`` / ``to_json`` give DESIGN.md's contract: ``{"lines": [{"text", "score", "box",
"angle"}], "timings_ms": {...}}``, plus ``"fields"`` and ``"errors"`` when plugins produced any, and
``"page_angle"`` when the page orientation stage ran; callers add ``"image"`` and ``"device"``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Quad = list[list[float]]


@dataclass(frozen=True)
class CharBox:
    """One of a line's word results (``return_word_box``): a character (rapidocr-1.4.4, and rapidocr-3.10 on
    lines with Chinese) or a word (rapidocr-3.10 on lines without), its box and its score as RapidOCR gives them."""

    text: str
    box: Quad
    score: float


@dataclass(frozen=True)
class OcrLine:
    """One recognised line. ``box``: 4×2 image pixels, clockwise from the top-left corner."""

    text: str
    score: float
    box: Quad
    angle: int = 0  # 0, or 180 when the classifier turned the crop
    chars: tuple[CharBox, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "score": float(self.score),
            "box": [[float(x), float(y)] for x, y in self.box],
            "angle": int(self.angle),
        }
        if self.chars is not None:
            out["chars"] = [jsonable(c) for c in self.chars]
        return out


@dataclass
class OcrResult:
    """The result for one image. Plugins add ``fields``; a failing plugin adds an entry to ``errors``."""

    lines: list[OcrLine] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    # the part of each stage's time spent waiting for the GPU (not in the JSON contract; benchmarks subtract it
    # to tell the Python time per stage)
    gpu_wait_ms: dict[str, float] = field(default_factory=dict)
    # how far the page was turned back before detection (0, 90, 180, 270: the page orientation classifier's
    # verdict); None when that stage did not run. Boxes are in the input image's frame either way.
    page_angle: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"lines": [line.to_dict() for line in self.lines]}
        if self.page_angle is not None:
            out["page_angle"] = int(self.page_angle)
        if self.fields:
            out["fields"] = jsonable(self.fields)
        if self.errors:
            out["errors"] = [dict(e) for e in self.errors]
        # to 10 µs: the clock's noise is larger than that, and the JSON stays readable
        out["timings_ms"] = {k: round(float(v), 2) for k, v in self.timings_ms.items()}
        return out

    def to_json(self, **extra: Any) -> str:
        """One JSON object (one line): ``extra`` keys (e.g. ``image``, ``device``) followed by ``to_dict()``."""
        body = self.to_dict()
        clash = set(extra) & set(body)
        if clash:
            raise ValueError(f"extra keys {sorted(clash)} would overwrite the result's own")
        return json.dumps({**jsonable(extra), **body}, ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """``value`` with dates, dataclasses, tuples, sets and NumPy values turned into JSON types."""
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value
