"""The sameness gate: do fp16's answers equal fp32's? Lines compared by text, boxes by their four corners, image
by image, every difference listed with how close fp32 itself was to deciding otherwise.

The gate (../shared/DESIGN.md, "Precision"): over the parity and stream sets, fp16's lines equal fp32's on at
least 99.9% of fp32's lines and its boxes on at least 99.5%. A line "equal" is the same text at the same
position in the image's reading order; a box "equal" is the same four corners to a hundredth of a pixel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vkocr.postproc.result import OcrLine, OcrResult

LINES_GATE = 0.999
BOXES_GATE = 0.995
BOX_TOLERANCE_PX = 0.01


@dataclass
class Difference:
    """One line of one image where the two answers part."""

    image: str
    index: int  # position in fp32's reading order
    ref: str | None  # fp32's text (None: fp32 has no line here)
    got: str | None
    ref_score: float | None
    got_score: float | None
    box_shift_px: float | None  # the largest corner distance, where both have the line

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Sameness:
    lines: int = 0  # fp32's lines
    lines_identical: int = 0
    boxes: int = 0
    boxes_identical: int = 0
    images: int = 0
    differences: list[Difference] = field(default_factory=list)

    @property
    def line_share(self) -> float:
        return self.lines_identical / self.lines if self.lines else 1.0

    @property
    def box_share(self) -> float:
        return self.boxes_identical / self.boxes if self.boxes else 1.0

    @property
    def passed(self) -> bool:
        return self.line_share >= LINES_GATE and self.box_share >= BOXES_GATE

    def add(self, image: str, ref: OcrResult, got: OcrResult) -> None:
        self.images += 1
        for i in range(max(len(ref.lines), len(got.lines))):
            a: OcrLine | None = ref.lines[i] if i < len(ref.lines) else None
            b: OcrLine | None = got.lines[i] if i < len(got.lines) else None
            shift = (float(np.max(np.linalg.norm(np.asarray(a.box, np.float64) - np.asarray(b.box, np.float64),
                                                 axis=-1))) if a is not None and b is not None else None)
            if a is not None:
                self.lines += 1
                self.boxes += 1
                same_text = b is not None and a.text == b.text
                same_box = shift is not None and shift <= BOX_TOLERANCE_PX
                self.lines_identical += same_text
                self.boxes_identical += same_box
                if same_text and same_box:
                    continue
            self.differences.append(Difference(image, i, a.text if a else None, b.text if b else None,
                                               a.score if a else None, b.score if b else None, shift))

    def summary(self) -> dict[str, Any]:
        return {"images": self.images, "lines": self.lines, "lines_identical": self.lines_identical,
                "boxes": self.boxes, "boxes_identical": self.boxes_identical, "passed": self.passed,
                "differences": [d.as_dict() for d in self.differences]}

    def report(self, ref: str = "fp32", got: str = "fp16") -> str:
        """The counts against the gate, then every difference; `ref` and `got` name the two runs compared."""
        out = [f"{self.images} images: lines {self.lines_identical}/{self.lines} identical ({self.line_share:.2%}, "
               f"gate {LINES_GATE:.1%}), boxes {self.boxes_identical}/{self.boxes} ({self.box_share:.2%}, gate "
               f"{BOXES_GATE:.1%}): {'PASSED' if self.passed else 'FAILED'}"]
        for d in self.differences:
            out.append(f"  {d.image} line {d.index}: {ref} {d.ref!r} ({d.ref_score}) / {got} {d.got!r} "
                       f"({d.got_score}), box moved {d.box_shift_px} px")
        return "\n".join(out)
