"""DB's bitmap on the GPU: shaders/ocr/db_bitmap.comp, recorded after the detector in its plan.

RapidOCR thresholds the probability map on the host (``prob > thresh``) and dilates it with ``cv2.dilate`` and
a 2×2 all-ones kernel before ``cv2.findContours``; here the shader does both and the host reads an H×W uint8
bitmap (a quarter of the map's bytes) instead of thresholding and dilating megapixels itself. The threshold and
whether to dilate change per request, so the shader reads them from a params buffer (DB_BITMAP_PARAMS_WORDS
uint32 words: 0 thresh as float32 bits, 1 dilate 0/1); the comparison is float32 against float32(thresh), as
NumPy compares a float32 map with a Python float.
"""

from __future__ import annotations

import numpy as np

from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import flat_groups, pack, require_float32
from vkocr.engine.memory import BufferView
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.symbolic import dim
from vkocr.engine.tensor import Tensor

DB_BITMAP = KernelDef("ocr/db_bitmap", ("r", "r", "w"), 8)
DB_BITMAP_PARAMS_WORDS = 2
DB_BITMAP_LOCAL = 256
DEFAULT_BITMAP_PIXELS = 8 << 20  # the agent's default max_det_pixels: larger maps are thresholded on the host


def db_bitmap_params(thresh: float, use_dilation: bool) -> np.ndarray:
    """The params words of one request."""
    return np.array([int(np.float32(thresh).view(np.uint32)), int(bool(use_dilation))], np.uint32)


def map_size(prob: Tensor) -> tuple[int, int]:
    """(H, W) of a (1, …, 1, H, W) probability map."""
    shape = tuple(prob.shape)
    if len(shape) < 2 or any(d != 1 for d in shape[:-2]):
        raise KernelArgumentError(f"db_bitmap needs a (1, ..., H, W) map, got {shape}")
    return dim(shape[-2]), dim(shape[-1])


def record_db_bitmap(rec: Recorder, prob: Tensor, params: Tensor, bitmap: BufferView) -> None:
    """bitmap (H·W bytes, packed four to a uint32) = dilate(prob > thresh) as RapidOCR's DB makes it; W must be
    a multiple of 4 (the detector's maps are multiples of 32)."""
    require_float32(prob)
    h, w = map_size(prob)
    if w % 4 != 0:
        raise KernelArgumentError(f"db_bitmap writes four pixels a word: map width {w} is not a multiple of 4")
    if bitmap.size < h * w:
        raise KernelArgumentError(f"db_bitmap: {bitmap.size} bytes for a {h}x{w} map")
    if params.nbytes < 4 * DB_BITMAP_PARAMS_WORDS:
        raise KernelArgumentError(f"db_bitmap params: {params.nbytes} bytes, need {4 * DB_BITMAP_PARAMS_WORDS}")
    words = h * w // 4
    pipeline = rec.device.pipeline(DB_BITMAP, (DB_BITMAP_LOCAL, 1, 1))
    rec.dispatch(pipeline, [prob.view, params.view, BufferView(bitmap.buffer, bitmap.offset, 4 * words)],
                 pack("II", h, w), flat_groups(words, DB_BITMAP_LOCAL), label="db_bitmap")


class BitmapReadback:
    """The det plan's epilogue: the bitmap into a device buffer, then into host-visible memory. One buffer of
    `capacity` pixels serves every plan (submissions never overlap); a larger map, or one whose width is not a
    multiple of 4, records nothing and is thresholded on the host (`fits`)."""

    def __init__(self, device: Device, capacity: int = DEFAULT_BITMAP_PIXELS) -> None:
        self.device, self.capacity = device, capacity
        self.on_device = device.pool.alloc(capacity, "device")
        self.back = device.pool.alloc(capacity, "readback")

    def fits(self, h: int, w: int) -> bool:
        return h * w <= self.capacity and w % 4 == 0

    def record(self, rec: Recorder, prob: Tensor, params: Tensor) -> None:
        h, w = map_size(prob)
        if not self.fits(h, w):
            return
        record_db_bitmap(rec, prob, params, self.on_device.view)
        rec.copy(BufferView(self.on_device.view.buffer, self.on_device.offset, h * w),
                 BufferView(self.back.view.buffer, self.back.offset, h * w))

    def read(self, h: int, w: int) -> np.ndarray:
        """The last bitmap: a read-only H×W uint8 view of the mapping, valid until the next detection."""
        self.back.invalidate()
        view = self.back.array(np.uint8)[: h * w].reshape(h, w)
        view.flags.writeable = False
        return view

    def close(self) -> None:
        for a in (self.on_device, self.back):
            self.device.pool.free(a)
