"""What RapidOCR's ``CalRecBoxes`` does with a line's cells once it has them, the same in 1.4.4 and 3.10: the
overlap of neighbouring cells halved (``adjust_box_overlap``), each cell mapped from crop coordinates back
through the inverse of the crop's perspective transform (``reverse_rotate_crop_image``), truncated to ints,
its corners re-ordered (``order_points``). The one difference between the releases is the dtype the points are
multiplied in (``point_dtype``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import cv2
import numpy as np
from numpy.typing import DTypeLike


def separate(boxes: list[list[list[float]]]) -> list[list[list[float]]]:
    """``adjust_box_overlap``: neighbours that overlap each give up half of the overlap (in place)."""
    for cur, nxt in itertools.pairwise(boxes):
        if cur[1][0] > nxt[0][0]:
            d = abs(cur[1][0] - nxt[0][0])
            cur[1][0] -= d / 2
            cur[2][0] -= d / 2
            nxt[0][0] += d - d / 2
            nxt[3][0] += d - d / 2
    return boxes


def order_points(box: list[list[int]]) -> list[list[int]]:
    """RapidOCR's ``order_points`` for a mapped cell (its case analysis kept as is)."""
    pts = np.array(box).reshape((-1, 2))
    cx, cy = np.mean(pts[:, 0]), np.mean(pts[:, 1])
    xs, ys = pts[:, 0], pts[:, 1]
    if np.any(xs == cx) and np.any(ys == cy):  # a diamond
        p1, p2 = pts[np.where(xs == np.min(xs))], pts[np.where(ys == np.min(ys))]
        p3, p4 = pts[np.where(xs == np.max(xs))], pts[np.where(ys == np.max(ys))]
    elif np.all(xs == cx):  # all on one vertical line
        order = np.argsort(ys)
        p1, p2, p3, p4 = (pts[k] for k in order[:4])
    elif np.any(xs == cx) and np.all(ys != cy):  # two share the centre x: top pair, then bottom pair
        top, bottom = pts[np.where(ys < cy)], pts[np.where(ys > cy)]
        p1, p2 = top[np.where(top[:, 0] == np.min(top[:, 0]))], top[np.where(top[:, 0] == np.max(top[:, 0]))]
        p3 = bottom[np.where(bottom[:, 0] == np.max(bottom[:, 0]))]
        p4 = bottom[np.where(bottom[:, 0] == np.min(bottom[:, 0]))]
    else:  # left pair, then right pair
        left, right = pts[np.where(xs < cx)], pts[np.where(xs > cx)]
        p1 = left[np.where(left[:, 1] == np.min(left[:, 1]))]
        p4 = left[np.where(left[:, 1] == np.max(left[:, 1]))]
        p2 = right[np.where(right[:, 1] == np.min(right[:, 1]))]
        p3 = right[np.where(right[:, 1] == np.max(right[:, 1]))]

    def one(p: np.ndarray) -> np.ndarray:
        return p.reshape((1, 2)) if p.shape in ((2,), (1, 2)) else p[:1, :]

    return np.array([one(p1), one(p2), one(p3), one(p4)]).reshape((-1, 2)).tolist()


def to_detection_box(det_box: np.ndarray, boxes: Sequence[Sequence[Sequence[float]]], vertical: bool,
                     point_dtype: DTypeLike) -> list[list[list[int]]]:
    """``reverse_rotate_crop_image``: cells in crop coordinates → the detection box's, truncated to ints.

    ``vertical``: the crop was turned 90° (undone by a -90° turn about the origin and a shift by the box's top
    edge); ``point_dtype``: what each point (x, y, 1) is cast to before the inverse transform multiplies it
    (1.4.4: float32; 3.10: float64)."""
    pts = np.array(det_box, dtype=np.float32)
    left, top = int(np.min(pts[:, 0])), int(np.min(pts[:, 1]))
    pts[:, 0] = pts[:, 0] - left
    pts[:, 1] = pts[:, 1] - top
    crop_w = int(np.linalg.norm(pts[0] - pts[1]))
    crop_h = int(np.linalg.norm(pts[0] - pts[3]))
    std = np.array([[0, 0], [crop_w, 0], [crop_w, crop_h], [0, crop_h]], dtype=np.float32)
    _, inverse = cv2.invert(cv2.getPerspectiveTransform(pts, std))
    out = []
    for box in boxes:
        mapped = []
        for point in box:
            x, y = point
            if vertical:
                a = math.radians(-90)
                x, y = float(x * math.cos(a) + y * math.sin(a) + 0), float(y * math.cos(a) - x * math.sin(a) + 0)
                x = x + crop_w
            px, py, pz = np.dot(inverse, np.array([x, y, 1], dtype=point_dtype))
            mapped.append([int(px / pz + left), int(py / pz + top)])
        out.append(order_points(mapped))
    return out
