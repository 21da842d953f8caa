"""RapidOCR 1.4.4's image preparation before detection, and the way back to original coordinates.

RapidOCR resizes an image whose longest side exceeds max_side_len (reduce_max_side), then one whose shortest
side is under min_side_len (increase_min_side), each to sides that are multiples of 32; then, for detection,
it pads very short or very wide images with a black letterbox above and below. Detection and the crops both work on that prepared image; boxes are mapped back by the
recorded ratio and padding. Doing the same is what makes our lines match RapidOCR's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

ResizeU8 = Callable[[np.ndarray, int, int], np.ndarray]  # (H×W×3 uint8, out_h, out_w) → uint8, cv2 INTER_LINEAR


@dataclass(frozen=True)
class Prepared:
    image: np.ndarray  # H×W×3 uint8 RGB, sides multiples of 32 (plus any letterbox)
    raw_h: int
    raw_w: int
    ratio_h: float  # original pixels per prepared pixel
    ratio_w: float
    pad_top: int


def _rounded_size(h: int, w: int, ratio: float) -> tuple[int, int]:
    resize_h, resize_w = int(h * ratio), int(w * ratio)
    return int(round(resize_h / 32) * 32), int(round(resize_w / 32) * 32)


def prepared_sizes(h: int, w: int, max_side_len: int, min_side_len: int) -> list[tuple[int, int]]:
    """The sizes RapidOCR resizes to, in order (none, one or both of reduce_max_side, increase_min_side)."""
    sizes = []
    if max(h, w) > max_side_len:
        h, w = _rounded_size(h, w, max_side_len / h if h > w else max_side_len / w)
        sizes.append((h, w))
    if min(h, w) < min_side_len:
        h, w = _rounded_size(h, w, min_side_len / h if h < w else min_side_len / w)
        sizes.append((h, w))
    return sizes


def letterbox_padding(h: int, w: int, min_height: int, width_height_ratio: float) -> int:
    """Rows of black added above and below (RapidOCR's maybe_add_letterbox); 0 when none."""
    if width_height_ratio != -1 and not (h <= min_height or w / h > width_height_ratio):
        return 0
    new_h = max(int(w / width_height_ratio), min_height) * 2
    return int(abs(new_h - h) / 2)


def prepare(image: np.ndarray, resize_u8: ResizeU8, *, max_side_len: int, min_side_len: int, min_height: int,
            width_height_ratio: float, letterbox: bool = True) -> Prepared:
    raw_h, raw_w = image.shape[:2]
    img, ratio_h, ratio_w = image, 1.0, 1.0
    for out_h, out_w in prepared_sizes(raw_h, raw_w, max_side_len, min_side_len):
        if out_h <= 0 or out_w <= 0:
            raise ValueError(f"an image of {raw_w}×{raw_h} pixels cannot be resized to multiples of 32")
        # RapidOCR keeps the ratio of the last resize only (both apply only to extreme shapes)
        ratio_h, ratio_w = img.shape[0] / out_h, img.shape[1] / out_w
        img = resize_u8(img, out_h, out_w)
    h, w = img.shape[:2]
    pad = letterbox_padding(h, w, min_height, width_height_ratio) if letterbox else 0
    if pad:
        img = np.pad(img, ((pad, pad), (0, 0), (0, 0)))
    return Prepared(np.ascontiguousarray(img), raw_h, raw_w, ratio_h, ratio_w, pad)


def to_original(points: np.ndarray, prep: Prepared) -> np.ndarray:
    """Points (…, 2) in prepared-image pixels → original-image pixels, clipped to the image (RapidOCR's
    _get_origin_points)."""
    pts = np.array(points, dtype=np.float32)
    pts[..., 1] -= prep.pad_top
    pts[..., 0] *= prep.ratio_w
    pts[..., 1] *= prep.ratio_h
    pts = np.where(pts < 0, 0, pts)
    pts[..., 0] = np.minimum(pts[..., 0], prep.raw_w)
    pts[..., 1] = np.minimum(pts[..., 1], prep.raw_h)
    return pts
