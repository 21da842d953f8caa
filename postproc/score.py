"""Box scores of DB postprocessing: the mean probability inside a polygon, as RapidOCR's ``box_score_fast``
and ``box_score_slow`` compute them (``cv2.fillPoly`` of the polygon into its bounding rectangle,
``cv2.mean``)."""

from __future__ import annotations

import cv2
import numpy as np


def box_scores_fast(prob: np.ndarray, boxes: np.ndarray) -> list[float]:
    """Mean of ``prob`` over each (4, 2) float32 box of (N, 4, 2), as ``box_score_fast`` takes it: corners
    shifted into the box's bounding rectangle (floor and ceil of the float corners, clipped to the map), then
    truncated to int32. The bounds of all boxes come from one set of NumPy calls (float32 as RapidOCR's, exact
    on integral values); per box only the mask and the two OpenCV calls remain, on the host path of every
    detected line."""
    if not len(boxes):
        return []
    h, w = prob.shape[:2]
    boxes = np.asarray(boxes, np.float32)
    limit = np.array([w - 1, h - 1], np.float32)
    low = np.minimum(np.maximum(np.floor(boxes.min(axis=1)), np.float32(0)), limit)
    high = np.minimum(np.maximum(np.ceil(boxes.max(axis=1)), np.float32(0)), limit)
    corners = (boxes - low[:, None, :]).astype(np.int32)  # float32, as RapidOCR's column-wise subtraction rounds it
    scores = []
    for (x0, y0), (x1, y1), quad in zip(low.astype(np.int32).tolist(), high.astype(np.int32).tolist(), corners,
                                        strict=True):
        mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), dtype=np.uint8)
        cv2.fillPoly(mask, [quad], 1)  # one polygon, as RapidOCR's (1, 4, 2) array gives
        scores.append(float(cv2.mean(prob[y0 : y1 + 1, x0 : x1 + 1], mask)[0]))
    return scores


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
