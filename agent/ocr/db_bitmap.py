"""DB's bitmap on the GPU: shaders/ocr/db_bitmap.comp, recorded after the detector in its plan.

RapidOCR thresholds the probability map on the host (``prob > thresh``) and dilates it with ``cv2.dilate`` and
a 2×2 all-ones kernel before ``cv2.findContours``; here the shader does both and the host reads an H×W uint8
bitmap (a quarter of the map's bytes) instead of thresholding and dilating megapixels itself. The threshold and
whether to dilate change per request, so the shader reads them from a params buffer (DB_BITMAP_PARAMS_WORDS
uint32 words: 0 thresh as float32 bits, 1 dilate 0/1); the comparison is float32 against float32(thresh), as
NumPy compares a float32 map with a Python float.

shaders/ocr/db_rows.comp then finds, per row, the columns that hold its set pixels, and those row spans come
back with the bitmap: most of a map is empty, and OpenCV's findContours reads only the boxes around the
foreground (postproc/db.py, ``bitmap_contours``).
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
DB_ROWS = KernelDef("ocr/db_rows", ("r", "w"), 8)
DB_ROWS_LOCAL = 64  # invocations per row: a row of 2000 pixels is 500 words
MAX_BITMAP_ROWS = 16384  # rows whose spans the readback holds (8 bytes each); a taller map is thresholded on the host


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


def record_db_rows(rec: Recorder, bitmap: BufferView, h: int, w: int, spans: BufferView) -> None:
    """spans (h × 2 uint32) = per row of the h×w bitmap (db_bitmap's packing) the first and one past the last
    column of the 4-pixel words that hold a set pixel; (w, 0) for an empty row."""
    if w % 4 != 0 or bitmap.size < h * w:
        raise KernelArgumentError(f"db_rows: {bitmap.size} bytes for a {h}x{w} bitmap of 4-pixel words")
    if spans.size < 8 * h:
        raise KernelArgumentError(f"db_rows: {spans.size} bytes for the spans of {h} rows")
    pipeline = rec.device.pipeline(DB_ROWS, (DB_ROWS_LOCAL, 1, 1))
    views = [BufferView(bitmap.buffer, bitmap.offset, h * w), BufferView(spans.buffer, spans.offset, 8 * h)]
    rec.dispatch(pipeline, views, pack("II", h, w), flat_groups(h, 1), label="db_rows")  # a workgroup per row


class BitmapReadback:
    """The det plan's epilogue: the bitmap and its row spans into device buffers, then into host-visible
    memory. One buffer of `capacity` pixels serves every plan (submissions never overlap); a larger map, one
    of more than MAX_BITMAP_ROWS rows, or one whose width is not a multiple of 4, records nothing and is
    thresholded on the host (`fits`)."""

    def __init__(self, device: Device, capacity: int = DEFAULT_BITMAP_PIXELS) -> None:
        self.device, self.capacity = device, capacity
        self.on_device = device.pool.alloc(capacity, "device")
        self.back = device.pool.alloc(capacity, "readback")
        self.spans_on_device = device.pool.alloc(8 * MAX_BITMAP_ROWS, "device")
        self.spans_back = device.pool.alloc(8 * MAX_BITMAP_ROWS, "readback")

    def fits(self, h: int, w: int) -> bool:
        return h * w <= self.capacity and h <= MAX_BITMAP_ROWS and w % 4 == 0

    def record(self, rec: Recorder, prob: Tensor, params: Tensor) -> None:
        h, w = map_size(prob)
        if not self.fits(h, w):
            return
        record_db_bitmap(rec, prob, params, self.on_device.view)
        record_db_rows(rec, self.on_device.view, h, w, self.spans_on_device.view)
        rec.copy(BufferView(self.on_device.view.buffer, self.on_device.offset, h * w),
                 BufferView(self.back.view.buffer, self.back.offset, h * w))
        rec.copy(BufferView(self.spans_on_device.view.buffer, self.spans_on_device.offset, 8 * h),
                 BufferView(self.spans_back.view.buffer, self.spans_back.offset, 8 * h))

    def read(self, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
        """The last bitmap and its row spans: read-only views of the mapping (H×W uint8, H×2 uint32), valid
        until the next detection."""
        self.back.invalidate()
        self.spans_back.invalidate()
        view = self.back.array(np.uint8)[: h * w].reshape(h, w)
        spans = self.spans_back.array(np.uint32)[: 2 * h].reshape(h, 2)
        view.flags.writeable = spans.flags.writeable = False
        return view, spans

    def close(self) -> None:
        for a in (self.on_device, self.back, self.spans_on_device, self.spans_back):
            self.device.pool.free(a)
