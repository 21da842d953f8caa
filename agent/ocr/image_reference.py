"""RapidOCR 1.4.4's image preprocessing in NumPy, bit-exact with the OpenCV it calls: the reference of
shaders/ocr/image_preprocess.comp, shaders/ocr/crop_warp.comp and shaders/ocr/image_resize.comp, and their CPU fallback.

What RapidOCR does (its images are BGR; ours are RGB, and every function here takes and returns RGB pixels,
except the network inputs, whose channel planes are in the order RapidOCR feeds them: **B, G, R**):

- detection (``DetPreProcess``): ``cv2.resize`` (INTER_LINEAR) to ``det_input_size``, then
  ``(float32(v) * float32(1/255) - mean) / std`` in float64, cast to float32, HWC → CHW;
- crops (``get_rotate_crop_image``): ``cv2.getPerspectiveTransform`` of the quad onto a w×h rectangle,
  ``cv2.warpPerspective(INTER_CUBIC, BORDER_REPLICATE)``, ``np.rot90`` when h/w ≥ 1.5; the classifier's 180°
  verdict is ``cv2.rotate(crop, ROTATE_180)``;
- cls / rec (``resize_norm_img``): ``cv2.resize`` to (H, resized_w), ``(float32(v) / 255 - 0.5) / 0.5`` in
  float32, zero padding to the model width.

The OpenCV arithmetic reproduced here (opencv-python 5.0, checked against it in tests/agent/ocr/test_image.py):

- ``resize`` INTER_LINEAR on uint8: per output column ``fx = float32((dx + 0.5) * scale - 0.5)`` (double
  arithmetic, ``scale = 1 / (dst / src)``), ``sx = floor(fx)``, 11-bit weights ``rint((1 - frac) * 2048)``,
  ``rint(frac * 2048)`` in float32 (columns left of 0 or right of the last pixel clamp to it with weight
  2048); the horizontal pass sums in int32; the vertical pass is OpenCV's SIMD one,
  ``(((h0 >> 4) * b0 >> 16) + ((h1 >> 4) * b1 >> 16) + 2) >> 2``, which is what cv2 produces for every pixel
  (the scalar ``(b0 h0 + b1 h1 + 2^21) >> 22`` differs by one level in ~12 % of them). Exact halvings
  (INTER_AREA in cv2) give the same bytes.
- ``warpPerspective`` INTER_CUBIC on uint8, no longer OpenCV 4's 1/32-pixel fixed-point tables: the
  source→crop matrix is inverted (``cv::invert``, DECOMP_LU closed form, float64) and cast to float32; per
  output pixel ``mX = y * m1 + m2`` (float32), ``xs = float32((mX + m0 x) * (1 / (mZ + m6 x)))`` (each of
  those operations in double; checked bit for bit on float32 images too, where every coordinate shows),
  clamped to [-max(w, 16), 2 max(w, 16)]; the fractional part gives float32 cubic weights
  (A = -0.75, one weight by fused multiply-adds), rows are summed with fused multiply-adds in float32, the
  result rounded half to even and saturated. BORDER_REPLICATE clamps every tap.

The crop matrices themselves come from OpenCV (``cv2.getPerspectiveTransform`` and ``cv2.invert``, the calls
RapidOCR and warpPerspective make).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np
import numpy.typing as npt

from vkocr.agent.ocr.prep import ResizeU8

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]

ROTATE90_RATIO = 1.5  # get_rotate_crop_image turns crops with height / width >= 1.5
CUBIC_A = np.float32(-0.75)
_ONE = np.float32(1.0)


# -- sizes -------------------------------------------------------------------------------------------------------

def det_input_size(h: int, w: int, limit_side_len: int = 736, limit_type: str = "min") -> tuple[int, int]:
    """(out_h, out_w) of RapidOCR's DetPreProcess.resize: scale so that the shortest side ("min") reaches
    limit_side_len (or the longest ("max") stays within it), then round each side to a multiple of 32
    (Python's round: halves to even). A side of 0 means RapidOCR detects nothing in that image.

    RapidOCR's TextDetector passes limit_side_len from its config for "min"; for "max" it picks 960, 1500
    or 2000 by the image's longest side.
    """
    if limit_type == "max":
        if max(h, w) > limit_side_len:
            ratio = float(limit_side_len) / h if h > w else float(limit_side_len) / w
        else:
            ratio = 1.0
    elif limit_type != "min":
        raise ValueError(f"limit_type must be 'min' or 'max', not {limit_type!r}")
    elif min(h, w) < limit_side_len:
        ratio = float(limit_side_len) / h if h < w else float(limit_side_len) / w
    else:
        ratio = 1.0
    resize_h, resize_w = int(h * ratio), int(w * ratio)
    return int(round(resize_h / 32) * 32), int(round(resize_w / 32) * 32)


def resized_width(w: int, h: int, out_h: int, max_w: int) -> int:
    """resize_norm_img's width for a w×h crop going into an out_h-high, max_w-wide slot."""
    ratio = w / float(h)
    return min(math.ceil(out_h * ratio), max_w)


# -- cv2.resize INTER_LINEAR ------------------------------------------------------------------------------------

def linear_coefficients(src: int, dst: int, clamp: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(i0, i1, w0, w1) per output index: the two source indices and their 11-bit weights, as cv2 computes them
    (``clamp``: the horizontal rule, a coordinate outside [0, src - 1] takes the edge pixel with weight 2048)."""
    d = np.arange(dst, dtype=np.float64)
    f = ((d + 0.5) * (1.0 / (dst / src)) - 0.5).astype(np.float32)
    s = np.floor(f)
    frac = (f - s).astype(np.float32)
    i = s.astype(np.int64)
    if clamp:
        low, high = i < 0, i >= src - 1
        i = np.where(low, 0, np.where(high, src - 1, i))
        frac = np.where(low | high, np.float32(0), frac).astype(np.float32)
    w0 = np.rint((_ONE - frac) * np.float32(2048)).astype(np.int64)
    w1 = np.rint(frac * np.float32(2048)).astype(np.int64)
    return np.clip(i, 0, src - 1), np.clip(i + 1, 0, src - 1), w0, w1


RESIZE_BLOCK = 64  # output rows per block: the block's int32 rows stay in cache between the two passes


def resize_linear_u8(img: U8, out_h: int, out_w: int) -> U8:
    """cv2.resize(img, (out_w, out_h)) for uint8 H×W or H×W×C, bit-exact. int32 arithmetic (the horizontal sums
    are at most 255 · 2048), channels interleaved in one row axis, in blocks of output rows."""
    img = np.asarray(img)
    if img.dtype != np.uint8 or img.ndim not in (2, 3) or min(img.shape[:2]) < 1 or min(out_h, out_w) < 1:
        raise ValueError(f"resize_linear_u8 takes a non-empty uint8 H×W(×C) image and sizes ≥ 1, got "
                         f"{img.dtype} {img.shape} → {out_h}×{out_w}")
    h, w = img.shape[:2]
    c = img.shape[2] if img.ndim == 3 else 1
    src = img.reshape(h, w * c)
    x0, x1, a0, a1 = linear_coefficients(w, out_w, clamp=True)
    y0, y1, b0, b1 = linear_coefficients(h, out_h, clamp=False)
    channel = np.arange(c)
    cols0, cols1 = (x0[:, None] * c + channel).reshape(-1), (x1[:, None] * c + channel).reshape(-1)
    wa0, wa1 = np.repeat(a0, c).astype(np.int32), np.repeat(a1, c).astype(np.int32)
    wb0, wb1 = b0.astype(np.int32)[:, None], b1.astype(np.int32)[:, None]
    out = np.empty((out_h, out_w * c), np.uint8)
    for s in range(0, out_h, RESIZE_BLOCK):
        e = min(s + RESIZE_BLOCK, out_h)
        lo, hi = int(min(y0[s:e].min(), y1[s:e].min())), int(max(y0[s:e].max(), y1[s:e].max())) + 1
        band = src[lo:hi]
        rows = np.multiply(band[:, cols0], wa0, dtype=np.int32)  # the horizontal pass
        rows += np.multiply(band[:, cols1], wa1, dtype=np.int32)
        rows >>= 4
        top = rows[y0[s:e] - lo]
        top *= wb0[s:e]
        top >>= 16
        bottom = rows[y1[s:e] - lo]
        bottom *= wb1[s:e]
        bottom >>= 16
        top += bottom
        top += 2
        top >>= 2  # at most 255: b0 + b1 = 2048
        out[s:e] = top
    return out.reshape((out_h, out_w, *img.shape[2:]))


def resize_letterboxed_u8(img: U8, out_h: int, out_w: int, pad_top: int) -> U8:
    """resize_linear_u8 to out_h × out_w with pad_top black rows above and below (RapidOCR's letterbox after
    its resize): (out_h + 2 · pad_top) × out_w (× C). The reference of shaders/ocr/image_resize.comp."""
    if pad_top < 0:
        raise ValueError(f"negative letterbox padding {pad_top}")
    resized = resize_linear_u8(img, out_h, out_w)
    return np.pad(resized, [(pad_top, pad_top)] + [(0, 0)] * (resized.ndim - 1))


# -- normalisation ------------------------------------------------------------------------------------------------

def _check_rgb(rgb: np.ndarray) -> U8:
    rgb = np.asarray(rgb)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3 or min(rgb.shape[:2]) < 1:
        raise ValueError(f"expected a non-empty H×W×3 uint8 RGB image, got {rgb.dtype} {rgb.shape}")
    return rgb


def preprocess_image(rgb: U8, out_h: int, out_w: int, mean: Sequence[float] = (0.5, 0.5, 0.5),
                     std: Sequence[float] = (0.5, 0.5, 0.5), *, resize: ResizeU8 | None = None) -> F32:
    """The detector input (1, 3, out_h, out_w), planes B, G, R: DetPreProcess on the BGR image. ``mean``/``std``
    are per model channel, B first, as RapidOCR's config lists them. ``resize``: resize_linear_u8, or a
    function that gives the same bytes (opencv_kernels.resize_linear_u8)."""
    resized = (resize or resize_linear_u8)(_check_rgb(rgb), out_h, out_w)[..., ::-1]  # BGR, as RapidOCR holds it
    scaled = resized.astype(np.float32) * np.float32(1 / 255.0)
    normed = (scaled - np.asarray(mean, np.float64)) / np.asarray(std, np.float64)
    return np.ascontiguousarray(normed.transpose(2, 0, 1)[None]).astype(np.float32)


def resize_normalize_pad(crop: U8, out_h: int, out_w: int, resized_w: int | None = None, *,
                         resize: ResizeU8 | None = None) -> F32:
    """resize_norm_img of the cls / rec models: (3, out_h, out_w), planes B, G, R, the crop resized to
    (out_h, resized_w) (default: as the classifier computes it), ``(v / 255 - 0.5) / 0.5``, zeros after.
    ``resize``: as preprocess_image's."""
    crop = _check_rgb(crop)
    if resized_w is None:
        resized_w = resized_width(crop.shape[1], crop.shape[0], out_h, out_w)
    if not 1 <= resized_w <= out_w:
        raise ValueError(f"resized width {resized_w} outside 1..{out_w}")
    resized = (resize or resize_linear_u8)(crop, out_h, resized_w)[..., ::-1].astype(np.float32)
    image = resized.transpose(2, 0, 1) / np.float32(255)
    image -= np.float32(0.5)
    image /= np.float32(0.5)
    out = np.zeros((3, out_h, out_w), np.float32)
    out[:, :, :resized_w] = image
    return out


# -- crop geometry (cv2.getPerspectiveTransform, cv2.invert) ----------------------------------------------------

def crop_sizes(quads: np.ndarray) -> list[tuple[int, int]]:
    """get_rotate_crop_image's (w, h) of N float32 quads (N, 4, 2): the longer of each pair of opposite sides,
    truncated; each side's length as RapidOCR's np.linalg.norm takes it (sqrt of the float32 dot product).
    ValueError for a quad that gives an empty crop."""
    pts = np.asarray(quads, np.float32).reshape(-1, 4, 2)
    sides = (pts[:, [0, 2, 0, 1]] - pts[:, [1, 3, 3, 2]]).reshape(-1, 2)
    norms = np.sqrt(np.array([v.dot(v) for v in sides], np.float32)).reshape(-1, 2, 2)
    sizes = [(w, h) for w, h in norms.max(axis=2).astype(np.int64).tolist()]  # truncation of positive values
    for q, (w, h) in zip(pts, sizes, strict=True):
        if w < 1 or h < 1:
            raise ValueError(f"quad {q.tolist()} gives an empty {w}×{h} crop")
    return sizes


def crop_size(pts: np.ndarray) -> tuple[int, int]:
    """crop_sizes of one 4×2 quad."""
    return crop_sizes(pts)[0]


def crop_geometries(quads: np.ndarray) -> list[tuple[int, int, F64]]:
    """crop_geometry of N quads (N, 4, 2)."""
    pts = np.asarray(quads, np.float32).reshape(-1, 4, 2)
    if len(pts) == 0:
        return []
    geometries = []
    for quad, (w, h) in zip(pts, crop_sizes(pts), strict=True):
        rect = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)
        # warpPerspective inverts M itself with cv::invert's default (DECOMP_LU): the same call, the same bits
        ok, inverse = cv2.invert(cv2.getPerspectiveTransform(quad, rect))
        if not ok:
            raise ValueError(f"quad {quad.tolist()}: its perspective transform is singular")
        geometries.append((w, h, np.asarray(inverse, np.float64)))  # cv2 types it MatLike; it is float64
    return geometries


def crop_geometry(quad: np.ndarray) -> tuple[int, int, F64]:
    """(w, h, homography) of get_rotate_crop_image for a 4×2 quad (RapidOCR's order: top-left, top-right,
    bottom-right, bottom-left): the crop's size before any rotation, and the 3×3 float64 matrix mapping a crop
    pixel (x, y, 1) to source pixel coordinates (the inverse warpPerspective applies). ValueError for a
    quad with a zero-length side or a singular transform."""
    return crop_geometries(quad)[0]


# -- cv2.warpPerspective INTER_CUBIC BORDER_REPLICATE ---------------------------------------------------------

def fmaf(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike) -> F32:
    """Correctly rounded float32 fused multiply-add (a·b is exact in float64; a float64 sum landing exactly
    on a float32 midpoint is decided by the sign of its exact remainder)."""
    a64, b64, c64 = (np.asarray(v, np.float32).astype(np.float64) for v in (a, b, c))
    p = a64 * b64
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)  # p + c == s + err exactly
    r = s.astype(np.float32)
    r64 = r.astype(np.float64)
    toward = np.where(s > r64, np.float32(np.inf), np.float32(-np.inf))
    other = np.nextafter(r, toward).astype(np.float64)
    tie = (s != r64) & (np.abs(s - r64) == np.abs(other - s)) & (err != 0)
    if tie.any():
        pick = np.where(err > 0, np.maximum(r64, other), np.minimum(r64, other)).astype(np.float32)
        r = np.where(tie, pick, r)
    return np.asarray(r, np.float32)


def cubic_weights(t: np.ndarray) -> list[F32]:
    """OpenCV 5's float32 bicubic weights (A = -0.75) of the taps at -1, 0, 1, 2 for fractions t."""
    t = np.asarray(t, np.float32)
    t2 = t * t
    u = _ONE - t
    w0 = CUBIC_A * (t * (u * u))
    w3 = CUBIC_A * (t2 * u)
    w1 = fmaf(t2, fmaf(np.float32(CUBIC_A + 2), t, np.float32(-(CUBIC_A + 3))), _ONE)
    w2 = ((_ONE - w0) - w1) - w3
    return [w0, w1, w2, w3]


def warp_perspective_cubic(img: U8, inverse: np.ndarray, w: int, h: int) -> U8:
    """cv2.warpPerspective(img, M, (w, h), flags=INTER_CUBIC, borderMode=BORDER_REPLICATE) on H×W×C uint8,
    given ``inverse`` = cv::invert(M) (crop pixel → source pixel), bit-exact."""
    src = np.asarray(img)
    if src.ndim == 2:
        src = src[:, :, None]
    m = np.asarray(inverse, np.float64).astype(np.float32).reshape(9)
    sh, sw = src.shape[:2]
    y = np.arange(h, dtype=np.float32)[:, None]
    x = np.arange(w, dtype=np.float64)[None, :]
    mx, my, mz = (y * m[1]) + m[2], (y * m[4]) + m[5], (y * m[7]) + m[8]  # float32 row terms
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_z = 1.0 / (mz.astype(np.float64) + np.float64(m[6]) * x)
        xs = ((mx.astype(np.float64) + np.float64(m[0]) * x) * inv_z).astype(np.float32)
        ys = ((my.astype(np.float64) + np.float64(m[3]) * x) * inv_z).astype(np.float32)
    big_w, big_h = np.float32(max(sw, 16)), np.float32(max(sh, 16))
    vx = np.clip(np.where(np.isnan(xs), -big_w, xs), -big_w, big_w * 2)
    vy = np.clip(np.where(np.isnan(ys), -big_h, ys), -big_h, big_h * 2)
    fx, fy = np.floor(vx), np.floor(vy)
    wx, wy = cubic_weights(vx - fx), cubic_weights(vy - fy)
    ix, iy = fx.astype(np.int64), fy.astype(np.int64)
    cols = [np.clip(ix - 1 + j, 0, sw - 1) for j in range(4)]
    values = src.astype(np.float32)
    acc: F32 | None = None
    for i in range(4):
        r = np.clip(iy - 1 + i, 0, sh - 1)
        row = (values[r, cols[0]] * wx[0][..., None]).astype(np.float32)
        for j in (1, 2, 3):
            row = fmaf(values[r, cols[j]], wx[j][..., None], row)
        acc = (row * wy[0][..., None]).astype(np.float32) if acc is None else fmaf(row, wy[i][..., None], acc)
    assert acc is not None
    out = np.clip(np.rint(acc), 0, 255).astype(np.uint8)
    return out if np.asarray(img).ndim == 3 else out[:, :, 0]


def rotate_crop(crop: U8, rotate90: bool, rotate180: bool) -> U8:
    """np.rot90 (counter-clockwise) and then cv2.rotate(ROTATE_180), as the pipeline applies them."""
    if rotate90:
        crop = np.rot90(crop)
    if rotate180:
        crop = crop[::-1, ::-1]
    return np.ascontiguousarray(crop)


def warp_crop(rgb: U8, quad: np.ndarray, *, rotate180: bool = False) -> U8:
    """get_rotate_crop_image: the quad's crop, turned 90° when h/w ≥ 1.5, then by 180° if asked (the
    classifier's verdict), H×W×3 uint8 RGB."""
    w, h, inverse = crop_geometry(quad)
    crop = warp_perspective_cubic(_check_rgb(rgb), inverse, w, h)
    return rotate_crop(crop, h * 1.0 / w >= ROTATE90_RATIO, rotate180)
