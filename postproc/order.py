"""Reading order of detected boxes: RapidOCR 1.4.4's ``sorted_boxes`` (``sort_boxes``) and RapidOCR 3.10's
(``sort_boxes_in_lines``), which differ where a run of boxes creeps down less than 10 px at a time."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def sort_boxes(boxes: Iterable[Any]) -> list[Any]:
    """Boxes (each 4×2, first corner top-left) top to bottom by their first corner, then left to right.

    Exactly RapidOCR's rule: a stable sort by (y, x) of the first corner, then one insertion pass that moves
    a box in front of its predecessors while their first corners are less than 10 pixels apart vertically and
    it lies further left. Boxes come back as given (not copied), in the new order.
    """
    items = list(boxes)
    ordered = sorted(items, key=lambda b: (b[0][1], b[0][0]))
    for i in range(len(ordered) - 1):
        for j in range(i, -1, -1):
            upper, lower = ordered[j], ordered[j + 1]
            if abs(lower[0][1] - upper[0][1]) < 10 and lower[0][0] < upper[0][0]:
                ordered[j], ordered[j + 1] = lower, upper
            else:
                break
    return ordered


LINE_GAP = 10  # pixels between first corners that start a new line (both releases' threshold)


def sort_boxes_in_lines(boxes: Iterable[Any]) -> list[Any]:
    """Boxes in RapidOCR 3.10's order: a stable sort by the first corner's y; a new line wherever two successive
    y differ by ``LINE_GAP`` or more; each line sorted (stably) by the first corner's x. Boxes come back as
    given, in the new order."""
    items = list(boxes)
    if not items:
        return items
    corners = np.array([[b[0][0], b[0][1]] for b in items], dtype=np.float64)
    by_y = np.argsort(corners[:, 1], kind="stable")
    line_ids = np.concatenate([[0], np.cumsum(np.diff(corners[by_y, 1]) >= LINE_GAP)])
    order = by_y[np.lexsort((corners[by_y, 0], line_ids))]
    return [items[i] for i in order.tolist()]


def sort_box_indices(boxes: np.ndarray) -> list[int]:
    """The permutation ``sort_boxes`` applies: indices into ``boxes`` in reading order."""
    keyed = sort_boxes(_Keyed(i, np.asarray(b)) for i, b in enumerate(boxes))
    return [k.index for k in keyed]


class _Keyed:
    """A box that remembers its input position, indexable like the box itself."""

    def __init__(self, index: int, box: np.ndarray) -> None:
        self.index = index
        self.box = box

    def __getitem__(self, i: int) -> Any:
        return self.box[i]
