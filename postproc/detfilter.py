"""RapidOCR's ``TextDetector.filter_tag_det_res`` over (N, 4, 2) quads at once: order each quad's corners, clip
to the image, drop slivers."""

from __future__ import annotations

import numpy as np


def _sorted_by(pts: np.ndarray, axis: int) -> np.ndarray:
    """Each quad's points ordered by one coordinate with NumPy's default ``argsort`` (row by row, the same
    sort RapidOCR calls on one quad, so ties resolve identically)."""
    return np.take_along_axis(pts, np.argsort(pts[..., axis], axis=-1)[..., None], axis=1)


def order_points_clockwise(pts: np.ndarray) -> np.ndarray:
    """(top-left, top-right, bottom-right, bottom-left) of every quad from its two leftmost and two rightmost
    corners, float32 (N, 4, 2)."""
    by_x = _sorted_by(np.asarray(pts).reshape(-1, 4, 2), 0)
    left, right = _sorted_by(by_x[:, :2], 1), _sorted_by(by_x[:, 2:], 1)
    return np.stack([left[:, 0], right[:, 0], right[:, 1], left[:, 1]], axis=1).astype(np.float32)


def clip_quads(points: np.ndarray, img_height: int, img_width: int) -> np.ndarray:
    """Every corner clipped into [0, w-1] × [0, h-1] and truncated to an integer (float32 (N, 4, 2))."""
    limit = np.array([img_width - 1, img_height - 1], np.float32)
    return np.trunc(  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
        np.minimum(np.maximum(points, np.float32(0)), limit)).astype(np.float32)


def keep_boxes(boxes: np.ndarray) -> np.ndarray:
    """Which clipped quads are wider and taller than 3 pixels (side lengths as float32 ``np.linalg.norm``,
    truncated to integers)."""
    def side(a: int, b: int) -> np.ndarray:
        d = boxes[:, a] - boxes[:, b]
        return np.sqrt(np.sum(d * d, axis=-1)).astype(np.int64)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands

    return (side(0, 1) > 3) & (side(0, 3) > 3)
