"""Box scores of DB postprocessing: the mean probability inside a polygon, as RapidOCR's ``box_score_fast``
and ``box_score_slow`` compute them (``cv2.fillPoly`` of the polygon into its bounding rectangle,
``cv2.mean``)."""

from __future__ import annotations

import math

import cv2
import numpy as np


def box_score_fast(prob: np.ndarray, box: np.ndarray) -> float:
    """Mean of ``prob`` over the (4, 2) float32 box: corners shifted into the box's bounding rectangle (floor
    and ceil of the float corners, clipped to the map), then truncated to int32. The bounds are RapidOCR's
    NumPy expressions evaluated on Python floats (exact for float32 corners): a few NumPy calls per box fewer,
    on the host path of every detected line."""
    h, w = prob.shape[:2]
    box = np.array(box, dtype=np.float32)  # a copy: the corners are shifted in place
    xs, ys = box[:, 0].tolist(), box[:, 1].tolist()
    xmin = min(max(math.floor(min(xs)), 0), w - 1)
    xmax = min(max(math.ceil(max(xs)), 0), w - 1)
    ymin = min(max(math.floor(min(ys)), 0), h - 1)
    ymax = min(max(math.ceil(max(ys)), 0), h - 1)
    mask = np.zeros((ymax - ymin + 1, xmax - xmin + 1), dtype=np.uint8)
    box -= (xmin, ymin)  # float32, as RapidOCR's column-wise subtraction rounds it
    cv2.fillPoly(mask, [box.astype(np.int32)], 1)  # one polygon, as RapidOCR's (1, 4, 2) array gives
    return float(cv2.mean(prob[ymin : ymax + 1, xmin : xmax + 1], mask)[0])


def box_score_slow(prob: np.ndarray, contour: np.ndarray) -> float:
    """Mean of ``prob`` over the filled contour polygon (a findContours contour, (n, 1, 2) int32)."""
    h, w = prob.shape[:2]
    contour = np.reshape(contour, (-1, 2)).copy()
    xmin = np.clip(np.min(contour[:, 0]), 0, w - 1)
    xmax = np.clip(np.max(contour[:, 0]), 0, w - 1)
    ymin = np.clip(np.min(contour[:, 1]), 0, h - 1)
    ymax = np.clip(np.max(contour[:, 1]), 0, h - 1)
    mask = np.zeros((ymax - ymin + 1, xmax - xmin + 1), dtype=np.uint8)
    contour[:, 0] = contour[:, 0] - xmin
    contour[:, 1] = contour[:, 1] - ymin
    cv2.fillPoly(mask, [contour.astype(np.int32)], 1)
    return float(cv2.mean(prob[ymin : ymax + 1, xmin : xmax + 1], mask)[0])
