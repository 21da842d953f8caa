"""RapidOCR's ``TextDetector.filter_tag_det_res``: order each quad's corners, clip to the image, drop slivers."""

from __future__ import annotations

import numpy as np


def order_points_clockwise(pts: np.ndarray) -> np.ndarray:
    """(top-left, top-right, bottom-right, bottom-left) from the two leftmost and two rightmost corners.

    Uses NumPy's default ``argsort``, as RapidOCR does, so ties between equal x (or y) resolve identically.
    """
    x_sorted = pts[np.argsort(pts[:, 0]), :]
    left, right = x_sorted[:2, :], x_sorted[2:, :]
    tl, bl = left[np.argsort(left[:, 1]), :]
    tr, br = right[np.argsort(right[:, 1]), :]
    return np.array([tl, tr, br, bl], dtype="float32")


def clip_quad(points: np.ndarray, img_height: int, img_width: int) -> np.ndarray:
    """Clip every corner into [0, w-1] × [0, h-1], truncating to integers (in place, as RapidOCR)."""
    for pno in range(points.shape[0]):
        points[pno, 0] = int(min(max(points[pno, 0], 0), img_width - 1))
        points[pno, 1] = int(min(max(points[pno, 1], 0), img_height - 1))
    return points


def keep_box(box: np.ndarray) -> bool:
    """Whether a clipped quad is wider and taller than 3 pixels (its side lengths truncated to integers)."""
    rect_width = int(np.linalg.norm(box[0] - box[1]))
    rect_height = int(np.linalg.norm(box[0] - box[3]))
    return rect_width > 3 and rect_height > 3
