"""Minimum-area boxes of point sets, as RapidOCR's ``DBPostProcess.get_mini_boxes`` takes them:
``cv2.minAreaRect``, ``cv2.boxPoints``, then its corner order."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
from cv2.typing import RotatedRect


def order_mini_boxes(points: np.ndarray) -> np.ndarray:
    """get_mini_boxes' corner order of N ``cv2.boxPoints`` results (N, 4, 2): sorted by x with a stable sort
    (as Python's ``sorted``); of the two leftmost the one with the larger y last, of the two rightmost the one
    with the larger y third (ties: the later one of the pair first). Plain indexing, not take_along_axis: a
    request has a few boxes, and the calls' overhead is the cost."""
    rows = np.arange(len(points))[:, None]
    p = points[rows, np.argsort(points[..., 0], axis=1, kind="stable")]
    left_down = p[:, 1, 1] > p[:, 0, 1]  # RapidOCR: index_1, index_4 = (0, 1) if so, else (1, 0)
    right_down = p[:, 3, 1] > p[:, 2, 1]  # index_2, index_3 = (2, 3) if so, else (3, 2)
    order = np.empty((len(points), 4), np.intp)
    order[:, 0], order[:, 3] = ~left_down, left_down
    order[:, 1], order[:, 2] = 3 - right_down, 2 + right_down
    return p[rows, order]


EMPTY_RECT: RotatedRect = ((0.0, 0.0), (0.0, 0.0), -90.0)  # cv2.minAreaRect of no points


def min_area_rects(point_sets: Sequence[np.ndarray]) -> tuple[list[RotatedRect], list[float]]:
    """``cv2.minAreaRect`` of every point set, and each one's shorter side (get_mini_boxes' ``sside``)."""
    # an empty set (a box with no area unclips to nothing) is a 0×0 rectangle, which the size checks drop;
    # cv2 refuses it (float64 when empty)
    rects = [cv2.minAreaRect(p) if len(p) else EMPTY_RECT for p in point_sets]
    return rects, [min(r[1]) for r in rects]


def rect_boxes(rects: Sequence[RotatedRect]) -> np.ndarray:
    """get_mini_boxes' (N, 4, 2) float32 boxes of the rectangles: ``cv2.boxPoints``, ordered."""
    if not rects:
        return np.zeros((0, 4, 2), np.float32)
    return order_mini_boxes(np.stack([cv2.boxPoints(r) for r in rects]))


def mini_boxes(point_sets: Sequence[np.ndarray]) -> tuple[np.ndarray, list[float]]:
    """``get_mini_boxes`` of every point set: (N, 4, 2) float32 boxes and their shorter sides."""
    rects, ssides = min_area_rects(point_sets)
    return rect_boxes(rects), ssides
