"""RapidOCR 1.4.4's image preparation before detection, and the way back to original coordinates.

RapidOCR resizes an image whose longest side exceeds max_side_len (reduce_max_side), then one whose shortest
side is under min_side_len (increase_min_side), each to sides that are multiples of 32; then, for detection,
it pads very short or very wide images with a black letterbox above and below. Detection and the crops both
work on that prepared image; boxes are mapped back by the recorded ratio and padding. Doing the same is what
makes our lines match RapidOCR's. ``preparation`` says what to do; the GPU stages do it in a shader
(image_resize), ``prepared_image`` on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vkocr.agent.errors import ImageError

ResizeU8 = Callable[[np.ndarray, int, int], np.ndarray]  # (H×W×3 uint8, out_h, out_w) → uint8, cv2 INTER_LINEAR


@dataclass(frozen=True)
class Prepared:
    """How an image of raw_h × raw_w pixels is prepared before detection, and the way back."""

    raw_h: int
    raw_w: int
    sizes: tuple[tuple[int, int], ...]  # the resizes (out_h, out_w) in order: none, one or both
    ratio_h: float  # original pixels per prepared pixel
    ratio_w: float
    pad_top: int  # black rows above the (resized) image, and as many below

    @property
    def shape(self) -> tuple[int, int]:
        """(height, width) of the prepared image: sides multiples of 32 after a resize, plus any letterbox."""
        h, w = self.sizes[-1] if self.sizes else (self.raw_h, self.raw_w)
        return h + 2 * self.pad_top, w


def unchanged(h: int, w: int) -> Prepared:
    """The preparation of an image that is used as it is."""
    return Prepared(h, w, (), 1.0, 1.0, 0)


def _rounded_size(h: int, w: int, ratio: float) -> tuple[int, int]:
    resize_h, resize_w = int(h * ratio), int(w * ratio)
    return int(round(resize_h / 32) * 32), int(round(resize_w / 32) * 32)


def prepared_sizes(h: int, w: int, max_side_len: int, min_side_len: int) -> list[tuple[int, int]]:
    """The sizes RapidOCR resizes to, in order (none, one or both of reduce_max_side, increase_min_side)."""
    sizes = []
    if max(h, w) > max_side_len:
        h, w = _rounded_size(h, w, max_side_len / h if h > w else max_side_len / w)
        sizes.append((h, w))
        if h <= 0 or w <= 0:  # a side rounded to 0: RapidOCR refuses the resize (and so does preparation)
            return sizes
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


def preparation(h: int, w: int, *, max_side_len: int, min_side_len: int, min_height: int,
                width_height_ratio: float, letterbox: bool = True) -> Prepared:
    """RapidOCR's preparation of an h × w image (ImageError when a resize would leave a side of 0)."""
    sizes = prepared_sizes(h, w, max_side_len, min_side_len)
    ratio_h, ratio_w, last = 1.0, 1.0, (h, w)
    for out_h, out_w in sizes:
        if out_h <= 0 or out_w <= 0:
            raise ImageError("unsupported", f"an image of {w}×{h} pixels cannot be resized to multiples of 32 "
                             "(a side would be 0), as RapidOCR resizes an image over max_side_len")
        # RapidOCR keeps the ratio of the last resize only (both apply only to extreme shapes)
        ratio_h, ratio_w, last = last[0] / out_h, last[1] / out_w, (out_h, out_w)
    pad = letterbox_padding(*last, min_height, width_height_ratio) if letterbox else 0
    return Prepared(h, w, tuple(sizes), ratio_h, ratio_w, pad)


def prepared_image(image: np.ndarray, prep: Prepared, resize_u8: ResizeU8) -> np.ndarray:
    """The prepared image itself (H×W×3 uint8), computed on the host."""
    img = image
    for out_h, out_w in prep.sizes:
        img = resize_u8(img, out_h, out_w)
    if prep.pad_top:
        img = np.pad(img, ((prep.pad_top, prep.pad_top), (0, 0), (0, 0)))
    return np.ascontiguousarray(img)
