"""Every parameter of the OCR pipeline, with RapidOCR 1.4.4's defaults (its config.yaml), overridable per
deployment and per request."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from vkocr.agent.errors import OptionsError

MAX_REC_WIDTH_BUCKET = 256  # pixels: 8 lines of 48 px tall text at most in the padding


@dataclass(frozen=True)
class OcrOptions:
    use_det: bool = True
    use_cls: bool = True
    use_rec: bool = True
    return_word_box: bool = False  # per-character boxes
    text_score: float = 0.5  # lines scoring below are dropped
    # input
    max_side_len: int = 2000
    min_side_len: int = 30
    min_height: int = 30  # images this short, or wider than width_height_ratio, get a letterbox
    width_height_ratio: float = 8.0
    max_pixels: int = 40_000_000  # decoded-size limit, checked before decoding
    apply_exif: bool = True  # RapidOCR ignores EXIF orientation; DESIGN.md applies it
    # det
    limit_side_len: int = 736
    limit_type: str = "min"
    thresh: float = 0.3
    box_thresh: float = 0.5
    max_candidates: int = 1000
    unclip_ratio: float = 1.6
    use_dilation: bool = True
    score_mode: str = "fast"
    # cls
    cls_height: int = 48
    cls_width: int = 192
    cls_batch: int = 6
    cls_thresh: float = 0.9
    # rec
    rec_height: int = 48
    rec_width: int = 320
    rec_batch: int = 6
    # rec batches run at RapidOCR's width rounded up to a multiple of this: fewer distinct shapes, fewer plans to
    # record, but the padding changes 0.25% of lines at 32 (BENCHMARKS.md, "Rec width buckets"); 1: RapidOCR's
    rec_width_bucket: int = 1
    # postprocessing plugins, in order: names, and options per name
    plugins: tuple[str, ...] = ()
    plugin_options: dict[str, Any] = field(default_factory=dict)

    def replace(self, **overrides: Any) -> OcrOptions:
        """These options with some changed; an unknown name or a value of the wrong type is an OptionsError."""
        known = {f.name: f for f in dataclasses.fields(self)}
        for name, value in overrides.items():
            if name not in known:
                raise OptionsError(f"unknown option {name!r}; known: {', '.join(sorted(known))}")
            expected = type(getattr(self, name))
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
                overrides[name] = value
            if expected is tuple and isinstance(value, list):
                overrides[name] = value = tuple(value)
            if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
                raise OptionsError(f"option {name} must be {expected.__name__}, got {value!r}")
        updated = dataclasses.replace(self, **overrides)
        updated.validate()
        return updated

    def validate(self) -> None:
        if not 0.0 <= self.text_score <= 1.0:
            raise OptionsError(f"text_score must be within [0, 1], got {self.text_score}")
        for name in ("thresh", "box_thresh", "cls_thresh"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise OptionsError(f"{name} must be within [0, 1], got {getattr(self, name)}")
        if self.limit_type not in ("min", "max"):
            raise OptionsError(f"limit_type must be 'min' or 'max', got {self.limit_type!r}")
        if self.score_mode not in ("fast", "slow"):
            raise OptionsError(f"score_mode must be 'fast' or 'slow', got {self.score_mode!r}")
        for name in ("max_side_len", "min_side_len", "limit_side_len", "cls_batch", "rec_batch", "max_pixels",
                     "max_candidates"):
            if getattr(self, name) < 1:
                raise OptionsError(f"{name} must be positive, got {getattr(self, name)}")
        if not 1 <= self.rec_width_bucket <= MAX_REC_WIDTH_BUCKET:
            raise OptionsError(f"rec_width_bucket must be within [1, {MAX_REC_WIDTH_BUCKET}], "
                               f"got {self.rec_width_bucket}")
        if self.unclip_ratio <= 0:
            raise OptionsError(f"unclip_ratio must be positive, got {self.unclip_ratio}")
