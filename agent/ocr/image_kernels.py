"""RapidOCR's image preprocessing on the GPU: shaders/ocr/image_preprocess.comp, shaders/ocr/crop_warp.comp and
shaders/ocr/image_resize.comp.

The kernels are recorded once and replayed for every request. Everything that changes per request (image
size, row stride, byte offset, output size, letterbox, crop matrices, sizes, flags, widths, how many slots are
valid) is read by the shader from a small *params* buffer (uint32 words) that the host fills with
`image_params` / `crop_params` / `resize_params` and copies to the device with the image; push constants hold
only the recording's fixed shapes (and the detector's mean / std).

The input is packed RGB8 (3 bytes a pixel, rows `row_stride` bytes apart, starting `offset` bytes into the
buffer) in a uint32 tensor; `rgb_words` packs an H×W×3 array. Outputs are float32 NCHW with planes **B, G, R**
— RapidOCR works on OpenCV's BGR images and feeds their channels in that order to all three models.
image_resize writes packed RGB8 again (RapidOCR's cv2.resize of an oversized image, plus its letterbox),
rows 3 · out_w bytes apart from byte 0: the image the other two kernels then read.

Params layouts (uint32 words; floats as their bit patterns):

    image_params (IMAGE_PARAMS_WORDS = 8):
        0 src_w   1 src_h   2 row_stride (bytes)   3 offset (bytes)   4 out_w   5 out_h
        6 tie_x (float)   7 tie_y (float)
    resize_params (RESIZE_PARAMS_WORDS = 12):
        0..7 as image_params (src_w, src_h: the turned image's sides; stride and offset: the stored rows')
        8 pad_top (black rows above the image, and as many below)   9 total rows (out_h + 2 · pad_top)
        10 turn (quarter turns counterclockwise, np.rot90's k, before the resize)   11 0
    crop_params (CROP_HEADER_WORDS + CROP_SLOT_WORDS · batch):
        header: 4 n_valid   0..3, 5..7 0
        slot b, at 8 + 20 b:
            0..8  the 3×3 matrix crop pixel (x, y, 1) → source pixel, row-major, float32 (cv::invert of
                  getPerspectiveTransform, cast to float32 as OpenCV's warp does)
            9 crop_w   10 crop_h   (the warp's size, before rotation)
            11 flags (1: np.rot90, 2: 180°)   12 resized_w
            13 tie_x (float, rotated width → resized_w)   14 tie_y (float, rotated height → out H)
            15 src_w   16 src_h   17 row_stride   18 offset   (the image this crop is cut from)   19 0

`tie_*` is `resize_tie(src, dst)`: the sign and size of the double rounding error in cv2's resize scale,
which decides the rare source coordinates that fall exactly halfway between two float32 values.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from vkocr.agent.ocr.image_reference import (
    ROTATE90_RATIO,
    crop_geometries,
    crop_geometry,
    det_input_size,
    resized_width,
)
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import MAX_GROUPS_X, flat_groups, pack, require_float32
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

__all__ = [
    "CROP_HEADER_WORDS", "CROP_SLOT_WORDS", "IMAGE_PARAMS_WORDS", "MAX_SIDE", "RESIZE_PARAMS_WORDS", "Crop",
    "ImageSource", "crop_geometry", "crop_params", "crop_params_words", "crop_slot", "line_crops", "det_input_size",
    "image_params", "record_crop_warp", "record_image_preprocess", "record_image_resize", "resize_params",
    "resize_tie", "rgb_words",
]

IMAGE_PREPROCESS = KernelDef("ocr/image_preprocess", ("r", "r", "w"), 32)
CROP_WARP = KernelDef("ocr/crop_warp", ("r", "r", "w"), 12)
IMAGE_RESIZE = KernelDef("ocr/image_resize", ("r", "r", "w"), 4)
IMAGE_PARAMS_WORDS = 8
RESIZE_PARAMS_WORDS = 12
CROP_HEADER_WORDS = 8
CROP_SLOT_WORDS = 20
MAX_SIDE = 32768  # any image or output side; the shaders' integer coordinate arithmetic stays in int32
PREPROCESS_LOCAL = (16, 16, 1)
CROP_LOCAL = (64, 1, 1)
# image_resize runs one invocation per output word; images have 10^4..10^7 words, so groups of 256 still fill the
# GPU, and the grid folds into 2-D only past 16.7 M words
RESIZE_LOCAL = 256
RESIZE_MAX_WORDS = 2**30  # resize_params keeps an image under 2^32 bytes: no word from here on is ever written
ROT90, ROT180 = 1, 2


# -- host helpers -------------------------------------------------------------------------------------------------

def rgb_words(rgb: np.ndarray) -> np.ndarray:
    """An H×W×3 uint8 image as packed bytes in uint32 words (little endian, zero-padded to a whole word)."""
    data = np.ascontiguousarray(rgb, dtype=np.uint8).reshape(-1)
    words = np.zeros(-(-data.size // 4), np.uint32)
    words.view(np.uint8)[:data.size] = data
    return words


@functools.lru_cache(maxsize=4096)  # exact rational arithmetic is slow; crops repeat the same few sizes
def resize_tie(src: int, dst: int) -> float:
    """(scale / (src / dst) - 1) · 2^53 as float32, scale = 1 / (dst / src) in double as cv2.resize computes it:
    where the exact source coordinate is halfway between two float32s, this decides which one cv2 gets."""
    scale = 1.0 / (dst / src)
    return float(np.float32(float((Fraction(scale) / Fraction(src, dst) - 1) * 2**53)))


def _f32_bits(v: float) -> int:
    return int(np.float32(v).view(np.uint32))


@functools.lru_cache(maxsize=4096)
def _tie_bits(src: int, dst: int) -> int:
    return _f32_bits(resize_tie(src, dst))


def _check_side(what: str, v: int) -> None:
    if not 1 <= v <= MAX_SIDE:
        raise KernelArgumentError(f"{what} {v} outside 1..{MAX_SIDE}")


def _check_axis(what: str, src: int, dst: int) -> None:
    _check_side(f"{what} source side", src)
    _check_side(f"{what} output side", dst)
    if (2 * dst + 1) * src >= 2**31:
        raise KernelArgumentError(f"{what}: resize {src} → {dst} leaves the shader's int32 coordinates")


def _source_words(src_h: int, src_w: int, row_stride: int | None, offset: int, capacity: int | None) -> list[int]:
    _check_side("image width", src_w)
    _check_side("image height", src_h)
    stride = 3 * src_w if row_stride is None else row_stride
    if stride < 3 * src_w or offset < 0:
        raise KernelArgumentError(f"row stride {stride} < 3 · width {src_w}, or negative offset {offset}")
    end = offset + (src_h - 1) * stride + 3 * src_w
    if end >= 2**32 or (capacity is not None and end > capacity):
        raise KernelArgumentError(f"image of {src_h}×{src_w} (stride {stride}, offset {offset}) ends at byte {end}, "
                                  f"beyond the buffer's {capacity if capacity is not None else 2**32 - 1}")
    return [src_w, src_h, stride, offset]


def image_params(src_h: int, src_w: int, out_h: int, out_w: int, *, row_stride: int | None = None,
                 offset: int = 0, capacity: int | None = None) -> np.ndarray:
    """The params words of record_image_preprocess: resize the src_h × src_w image to out_h × out_w (at most the
    output tensor's H × W; the rest of it is written with 0). `capacity`: the image buffer's size in bytes,
    checked when given."""
    _check_axis("width", src_w, out_w)
    _check_axis("height", src_h, out_h)
    words = _source_words(src_h, src_w, row_stride, offset, capacity)
    words += [out_w, out_h, _tie_bits(src_w, out_w), _tie_bits(src_h, out_h)]
    return np.array(words, np.uint32)


def resize_params(src_h: int, src_w: int, out_h: int, out_w: int, *, pad_top: int = 0,
                  row_stride: int | None = None, offset: int = 0, capacity: int | None = None,
                  out_capacity: int | None = None, turn: int = 0) -> np.ndarray:
    """The params words of record_image_resize: resize the src_h × src_w image to out_h × out_w with pad_top
    black rows above and below it. `turn`: the image is stored turned back, np.rot90(stored, turn) is the
    src_h × src_w one (so the stored rows are src_w long when the turn is odd). `capacity` / `out_capacity`: the
    image / output buffer's size in bytes, checked when given."""
    _check_axis("width", src_w, out_w)
    _check_axis("height", src_h, out_h)
    if turn not in (0, 1, 2, 3):
        raise KernelArgumentError(f"turn {turn} outside 0..3 quarter turns")
    stored_h, stored_w = (src_w, src_h) if turn % 2 else (src_h, src_w)
    words = _source_words(stored_h, stored_w, row_stride, offset, capacity)
    words[:2] = [src_w, src_h]
    if pad_top < 0:
        raise KernelArgumentError(f"negative letterbox padding {pad_top}")
    total_rows = out_h + 2 * pad_top
    total_bytes = total_rows * out_w * 3
    if total_bytes >= 2**32 or (out_capacity is not None and total_bytes > out_capacity):
        raise KernelArgumentError(f"resized image of {total_rows}×{out_w} ({total_bytes} bytes) does not fit the "
                                  f"output's {out_capacity if out_capacity is not None else 2**32 - 1} bytes")
    words += [out_w, out_h, _tie_bits(src_w, out_w), _tie_bits(src_h, out_h), pad_top, total_rows, turn, 0]
    return np.array(words, np.uint32)


@dataclass(frozen=True)
class ImageSource:
    """Where record_crop_warp finds one image in its image buffer: packed RGB rows of 3 · width bytes."""

    height: int
    width: int
    offset: int = 0  # bytes


@dataclass(frozen=True)
class Crop:
    """One crop for record_crop_warp: what get_rotate_crop_image and resize_norm_img derive from a quad."""

    inverse: np.ndarray  # 3×3 float64, crop pixel (x, y, 1) → source pixel
    width: int  # the warp's size, before rotation
    height: int
    rotate90: bool  # np.rot90 (height / width >= 1.5)
    rotate180: bool  # the classifier's 180° verdict
    resized_w: int  # width after resizing to the model's height (before zero padding)
    image: int = 0  # the image slot it is cut from (Stages.load's slot): one batch may hold several images' crops

    @property
    def model_size(self) -> tuple[int, int]:
        """(width, height) of the crop as the model sees it: after the 90° turn."""
        return (self.height, self.width) if self.rotate90 else (self.width, self.height)

    def fitted(self, out_h: int, max_w: int) -> Crop:
        """This slot with resized_w as resize_norm_img computes it for an out_h-high, max_w-wide input."""
        width, height = self.model_size
        return Crop(self.inverse, self.width, self.height, self.rotate90, self.rotate180,
                        resized_width(width, height, out_h, max_w), self.image)  # not dataclasses.replace: 3× faster


def line_crops(quads: np.ndarray, out_h: int, max_w: int, image: int = 0) -> list[Crop]:
    """crop_slot of N quads (N, 4, 2) of image slot `image`, their geometry computed in one batch."""
    return [Crop(inverse, w, h, h * 1.0 / w >= ROTATE90_RATIO, False, 0, image).fitted(out_h, max_w)
            for w, h, inverse in crop_geometries(quads)]


def crop_slot(quad: np.ndarray, out_h: int, max_w: int, *, rotate180: bool = False,
              resized_w: int | None = None) -> Crop:
    """The Crop of a 4×2 quad (RapidOCR's point order) going into an out_h-high, max_w-wide model input:
    resized_w as resize_norm_img computes it (for rec, max_w is RapidOCR's batch width int(out_h ·
    max_wh_ratio), which may be less than the tensor's width: the kernel pads to the tensor)."""
    slot = dataclasses.replace(line_crops(np.asarray(quad)[None], out_h, max_w)[0], rotate180=rotate180)
    return slot if resized_w is None else dataclasses.replace(slot, resized_w=resized_w)


def padded_batch(count: int, limit: int) -> int:
    """The batch `count` crops run in: rounded up to a power of two, at most `limit` and never below `count`
    (the warp zero-fills the spare slots), so that few batch sizes become plan shapes."""
    return max(count, min(limit, 1 << max(0, count - 1).bit_length()))


def crop_params_words(batch: int) -> int:
    return CROP_HEADER_WORDS + CROP_SLOT_WORDS * batch


def crop_params(src_h: int, src_w: int, slots: Sequence[Crop], batch: int, out_h: int, out_w: int, *,
                row_stride: int | None = None, offset: int = 0, capacity: int | None = None,
                sources: Sequence[ImageSource] | None = None) -> np.ndarray:
    """The params words of record_crop_warp for an output tensor (batch, 3, out_h, out_w): slots[b] fills slot
    b, the remaining slots are written with zeros. Every crop is cut from the src_h × src_w image at `offset`,
    or, with `sources`, crop b from sources[b] (crops of several images in one batch)."""
    if len(slots) > batch:
        raise KernelArgumentError(f"{len(slots)} crops for a batch of {batch}")
    if sources is not None and len(sources) != len(slots):
        raise KernelArgumentError(f"{len(sources)} image sources for {len(slots)} crops")
    if sources is None:
        source_words = [_source_words(src_h, src_w, row_stride, offset, capacity)] * len(slots)
    else:
        checked = {src: _source_words(src.height, src.width, None, src.offset, capacity) for src in set(sources)}
        source_words = [checked[src] for src in sources]
    words = np.zeros(crop_params_words(batch), np.uint32)
    words[4] = len(slots)
    if not slots:
        return words
    # the checks in plain Python: a request has a few crops, and NumPy's per-call cost is what they would cost
    limit_w = min(out_w, MAX_SIDE)
    rows = []
    for b, s in enumerate(slots):
        (w, h), r = s.model_size, s.resized_w
        if not (1 <= w <= MAX_SIDE and 1 <= h <= MAX_SIDE and 1 <= r <= limit_w and (2 * r + 1) * w < 2**31
                and (2 * out_h + 1) * h < 2**31 and 1 <= out_h <= MAX_SIDE):
            if not 1 <= r <= out_w:
                raise KernelArgumentError(f"crop {b}: resized width {r} outside 1..{out_w}")
            _check_axis(f"crop {b} width", w, r)
            _check_axis(f"crop {b} height", h, out_h)
        flags = (ROT90 if s.rotate90 else 0) | (ROT180 if s.rotate180 else 0)
        rows.append([s.width, s.height, flags, r, _tie_bits(w, r), _tie_bits(h, out_h)])
    with np.errstate(over="ignore"):  # a matrix too large for float32 is refused just below
        matrices = np.array([s.inverse for s in slots], np.float64).reshape(len(slots), 9).astype(np.float32)
    if not np.isfinite(matrices).all():
        bad = int(np.flatnonzero(~np.isfinite(matrices).all(axis=1))[0])  # the first bad crop, with its own message
        raise KernelArgumentError(f"crop {bad}: matrix {slots[bad].inverse.tolist()} is not finite in float32")
    table = words[CROP_HEADER_WORDS:CROP_HEADER_WORDS + CROP_SLOT_WORDS * len(slots)].reshape(len(slots), -1)
    table[:, :9] = matrices.view(np.uint32)
    table[:, 9:15] = rows
    table[:, 15:19] = source_words
    return words


# -- recording ---------------------------------------------------------------------------------------------------

def _check_buffers(image_u8: Tensor, params: Tensor, words: int, what: str) -> None:
    for t, name in ((image_u8, "image"), (params, "params")):
        if t.dtype != np.dtype(np.uint32) or t.numel == 0:
            raise KernelArgumentError(f"{what}: the {name} buffer must be a non-empty uint32 tensor, "
                                      f"got {t.dtype} {t.shape}")
    if params.numel < words:
        raise KernelArgumentError(f"{what}: params holds {params.numel} words, needs {words}")


def _check_output(out: Tensor, what: str) -> None:
    if out.numel >= 2**32:
        raise KernelArgumentError(f"{what}: output of {out.numel} elements exceeds 32-bit indexing")


def _groups(total: tuple[int, int, int], local: tuple[int, int, int], what: str) -> tuple[int, int, int]:
    groups = (-(-total[0] // local[0]), -(-total[1] // local[1]), -(-total[2] // local[2]))
    # each axis on its own: max() would compare symbolic counts with each other
    if groups[0] > MAX_GROUPS_X or groups[1] > MAX_GROUPS_X or groups[2] > MAX_GROUPS_X:
        raise KernelArgumentError(f"{what}: {groups} workgroups exceed {MAX_GROUPS_X} per axis")
    return groups


def record_image_preprocess(rec: Recorder, image_u8: Tensor, params: Tensor, out: Tensor, *,
                            mean: Sequence[float] = (0.5, 0.5, 0.5), std: Sequence[float] = (0.5, 0.5, 0.5)) -> None:
    """out (1, 3, H, W) = the detector input of the image described by params (image_params): cv2.resize
    INTER_LINEAR to (out_h, out_w) ≤ (H, W), (v / 255 - mean) / std, planes B, G, R; the rest of out is 0.
    mean / std are per output plane (B first), as RapidOCR's config lists them."""
    _check_buffers(image_u8, params, IMAGE_PARAMS_WORDS, "image_preprocess")
    require_float32(out)
    if len(out.shape) != 4 or tuple(out.shape[:2]) != (1, 3):
        raise KernelArgumentError(f"image_preprocess: output must be (1, 3, H, W), got {out.shape}")
    _check_side("output height", out.shape[2])
    _check_side("output width", out.shape[3])
    if len(mean) != 3 or len(std) != 3 or any(s == 0 for s in std):
        raise KernelArgumentError(f"image_preprocess: mean and std need 3 values, std non-zero: {mean}, {std}")
    _check_output(out, "image_preprocess")
    cap_h, cap_w = out.shape[2], out.shape[3]
    inv_std = [float(np.float32(1.0 / s)) for s in std]
    push = pack("II6f", cap_w, cap_h, *(float(m) for m in mean), *inv_std)
    pipeline = rec.device.pipeline(IMAGE_PREPROCESS, PREPROCESS_LOCAL)
    groups = _groups((cap_w, cap_h, 1), PREPROCESS_LOCAL, "image_preprocess")
    rec.dispatch(pipeline, [image_u8.view, params.view, out.view], push, groups, label="image_preprocess")


def record_crop_warp(rec: Recorder, image_u8: Tensor, params: Tensor, out: Tensor) -> None:
    """out (B, 3, Hc, Wc) = the cls / rec input of the crops described by params (crop_params): slot b <
    n_valid is get_rotate_crop_image of its quad (cubic warp, rot90, optional 180°) resized to (Hc,
    resized_w), (v / 255 - 0.5) / 0.5, planes B, G, R, zero-padded to Wc; slots from n_valid on are 0."""
    require_float32(out)
    if len(out.shape) != 4 or out.shape[1] != 3:
        raise KernelArgumentError(f"crop_warp: output must be (B, 3, H, W), got {out.shape}")
    batch, _, cap_h, cap_w = out.shape
    _check_buffers(image_u8, params, crop_params_words(batch), "crop_warp")
    _check_side("crop output height", cap_h)
    _check_side("crop output width", cap_w)
    if not 1 <= batch <= MAX_GROUPS_X:
        raise KernelArgumentError(f"crop_warp: batch {batch} outside 1..{MAX_GROUPS_X}")
    _check_output(out, "crop_warp")
    groups = _groups((cap_w, cap_h, batch), CROP_LOCAL, "crop_warp")
    pipeline = rec.device.pipeline(CROP_WARP, CROP_LOCAL)
    push = pack("III", batch, cap_h, cap_w)
    rec.dispatch(pipeline, [image_u8.view, params.view, out.view], push, groups, label="crop_warp")


def record_image_resize(rec: Recorder, image_u8: Tensor, params: Tensor, out: Tensor, *,
                        words: int | None = None) -> None:
    """out (uint32 words of packed bytes) = the image described by params (resize_params) resized with cv2.resize
    INTER_LINEAR to out_h × out_w, packed RGB8 with pad_top black rows above and below, from byte 0. Only the
    image's words are written, and only among the first `words` (default: all of out)."""
    _check_buffers(image_u8, params, RESIZE_PARAMS_WORDS, "image_resize")
    if out.dtype != np.dtype(np.uint32) or out.numel == 0:
        raise KernelArgumentError(f"image_resize: the output must be a non-empty uint32 tensor, "
                                  f"got {out.dtype} {out.shape}")
    _check_output(out, "image_resize")
    count = out.numel if words is None else words
    if not 1 <= count <= out.numel:
        raise KernelArgumentError(f"image_resize: {count} words outside 1..{out.numel} (the output's size)")
    count = min(count, RESIZE_MAX_WORDS)  # also keeps the shader's flat index and byte offsets in 32 bits
    pipeline = rec.device.pipeline(IMAGE_RESIZE, (RESIZE_LOCAL, 1, 1))
    rec.dispatch(pipeline, [image_u8.view, params.view, out.view], pack("I", count),
                 flat_groups(count, RESIZE_LOCAL), label="image_resize")
