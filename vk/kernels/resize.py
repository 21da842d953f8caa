"""ONNX Resize (nearest / bilinear over H and W of NCHW float32 or float16): shaders/resize.comp.

The coordinate transformation mode and the scale are resolved here into an exact affine map per axis,
x_original = (y * A + B) / D with integers A, B, D, which the shader evaluates in exact integer arithmetic.
Float32 arithmetic in the shader would decide ties (x.5 under round_prefer_*, integers under floor/ceil)
differently from the ONNX reference for scales such as 4/6 or float32(1.7), whose inverse float32 rounds.
Only 32-bit integer operations are used, so no device feature (shaderInt64, shaderFloat64) is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

import numpy as np

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import FLAT_LOCAL, flat_groups, pack, require_shape, storage
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.symbolic import is_symbolic
from vkocr.engine.tensor import Tensor

RESIZE = KernelDef("resize", ("r", "w", "r"), 84)  # x, out, addend (read only when one is given)
MODE_IDS = {"nearest": 0, "linear": 1}
NEAREST_IDS = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}
COORDINATE_MODES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def source_map(in_len: int, out_len: int, scale: Fraction, mode: str) -> tuple[Fraction, Fraction]:
    """(alpha, beta) with x_original = alpha * y + beta for output index y, as ONNX defines it.

    `scale` is the ONNX scale (out/in when only sizes are known); align_corners and pytorch_half_pixel
    use the length scale * in, which differs from out_len when scales were given. Only those two read the
    length: a symbolic one (vk/symbolic.py) is pinned there, as exact fractions need its value.
    """
    if mode == "half_pixel":
        return 1 / scale, 1 / (2 * scale) - Fraction(1, 2)
    if mode == "asymmetric":
        return 1 / scale, Fraction(0)
    if mode not in COORDINATE_MODES:
        known = ", ".join(COORDINATE_MODES)
        raise KernelArgumentError(f"unknown coordinate_transformation_mode {mode!r}; known: {known}")
    n = int(in_len)
    length = scale * n
    if mode == "pytorch_half_pixel":
        if length != 1:
            return 1 / scale, 1 / (2 * scale) - Fraction(1, 2)
        return Fraction(0), Fraction(-1, 2)
    alpha = Fraction(0) if length == 1 else Fraction(n - 1) / (length - 1)  # align_corners
    return alpha, Fraction(0)


def integer_upsampling(scale: float, ctm: str, nearest_mode: str) -> int | None:
    """The factor f where a nearest Resize by `scale` reads source position floor(y / f) for every output
    position y (an integer scale whose coordinate mode and rounding land each run of f outputs on one source);
    None where it reads anything else. Then it is a plain gather that another kernel can do on the way
    (layout.record_concat's `upsample`). Not for align_corners or pytorch_half_pixel, which read the length."""
    s = exact_scale(scale, 1, 1)
    if s.denominator != 1 or s < 1 or ctm not in ("half_pixel", "asymmetric") or nearest_mode not in NEAREST_IDS:
        return None
    f = int(s)
    _, beta = source_map(1, f, s, ctm)
    for j in range(f):  # output f·i + j reads i + j/f + beta: rounded, it must give i
        v = Fraction(j, f) + beta
        low = math.floor(v)
        frac = v - low
        if nearest_mode == "floor" or frac == 0:
            pick = low
        elif nearest_mode == "ceil":
            pick = low + 1
        elif nearest_mode == "round_prefer_floor":
            pick = low if frac <= Fraction(1, 2) else low + 1
        else:  # round_prefer_ceil
            pick = low if frac < Fraction(1, 2) else low + 1
        if pick != 0:
            return None
    return f


def axis_words(alpha: Fraction, beta: Fraction, out_len: int) -> list[int]:
    """Push-constant words of one axis: qa, qb, ra, rb, D (the last three as low/high 32-bit pairs)."""
    d = math.lcm(alpha.denominator, beta.denominator)
    qa, ra = divmod(int(alpha * d), d)
    qb, rb = divmod(int(beta * d), d)
    # the shader's 64-bit remainders stay below D * out: d.bit_length() + out_len.bit_length() <= 63
    if d.bit_length() > 63 or out_len >= 1 << (63 - d.bit_length()):
        raise KernelArgumentError(f"resize: scale too fine for exact coordinates (denominator {d})")
    bound = (abs(qa) + 1) * out_len + abs(qb)  # bounds base = y*qa + qb + quotient (<= y)
    if not INT32_MIN <= bound <= INT32_MAX:
        raise KernelArgumentError(f"resize: source coordinates leave int32 (alpha {alpha}, beta {beta})")
    words = [qa, qb]
    for v in (ra, rb, d):
        words += [v & 0xFFFFFFFF, v >> 32]
    return words


def exact_scale(scale: float | None, in_len: int, out_len: int) -> Fraction:
    """The scale ONNX uses: the given one rounded to float32 (its tensor type), else out / in (symbolic lengths
    pinned: exact fractions need their values)."""
    if scale is None:
        return Fraction(int(out_len), int(in_len))
    s = float(np.float32(scale))
    if not math.isfinite(s) or s <= 0:
        raise KernelArgumentError(f"resize: scales must be finite and positive, got {scale}")
    return Fraction(s)


def axis_push(n_in: int, n_out: int, scale: float | None, ctm: str) -> tuple[int, ...]:
    """axis_words of one axis."""
    return tuple(axis_words(*source_map(n_in, n_out, exact_scale(scale, n_in, n_out), ctm), n_out))


# Exact fractions cost ~50 µs an axis, and the plans of one model at different shapes mostly repeat an axis (det's
# fixed side): computed once per (lengths, scale, mode). Not for symbolic lengths: a cache would keep a trace's Syms.
_cached_axis_push = lru_cache(maxsize=1024)(axis_push)


def check_resize_args(x: Tensor, out: Tensor, mode: str, ctm: str, nearest_mode: str,
                      scales: Sequence[float] | None) -> None:
    """Raise KernelArgumentError before anything is recorded."""
    if mode not in MODE_IDS:
        raise KernelArgumentError(f"unknown resize mode {mode!r}; known: {', '.join(MODE_IDS)}")
    source_map(1, 1, Fraction(1), ctm)  # raises on an unknown coordinate_transformation_mode
    if nearest_mode not in NEAREST_IDS:
        raise KernelArgumentError(f"unknown nearest_mode {nearest_mode!r}; known: {', '.join(NEAREST_IDS)}")
    storage(RESIZE, x, out)
    if len(x.shape) != 4 or len(out.shape) != 4 or x.shape[:2] != out.shape[:2]:
        raise KernelArgumentError(f"resize scales H and W of NCHW: input {x.shape}, output {out.shape}")
    if 0 in x.shape and out.numel != 0:
        raise KernelArgumentError(f"resize of an empty input {x.shape} into {out.shape}")
    if scales is not None and len(scales) != 2:
        raise KernelArgumentError(f"resize: scales are (h, w), got {scales}")
    if out.numel >= 2**32:
        raise KernelArgumentError(f"resize: output of {out.numel} elements exceeds 32-bit indexing")


def record_resize(
    rec: Recorder,
    x: Tensor,
    out: Tensor,
    *,
    mode: str,
    coordinate_transformation_mode: str,
    nearest_mode: str = "round_prefer_floor",
    scales: Sequence[float] | None = None,
    addend: Tensor | None = None,
) -> None:
    """out = Resize(x) to out.shape's H and W; `scales` (h, w), when given, drive the coordinate transform.
    With `addend` (out's shape and storage; nearest only): out = Resize(x) + addend in the same pass, bit for bit
    the answer of a Resize followed by an Add."""
    ctm = coordinate_transformation_mode
    check_resize_args(x, out, mode, ctm, nearest_mode, scales)
    if addend is not None:
        if mode != "nearest":
            raise KernelArgumentError(f"resize with an addend: nearest only, not {mode!r}")
        storage(RESIZE, x, out, addend)
        require_shape(addend, tuple(out.shape), "resize addend")
    if out.numel == 0:
        return
    words: list[int] = []
    for axis in (2, 3):
        push_words = axis_push if is_symbolic((x.shape[axis], out.shape[axis])) else _cached_axis_push
        words += push_words(x.shape[axis], out.shape[axis], None if scales is None else float(scales[axis - 2]),
                            ctm)
    n, c, in_h, in_w = x.shape
    push = pack("ii6Iii6I5I", *words, n * c, in_h, in_w, out.shape[2], out.shape[3])
    rounding = NEAREST_IDS[nearest_mode] if mode == "nearest" else 0  # linear: one pipeline, any nearest_mode
    constants = (FLAT_LOCAL, 1, 1, MODE_IDS[mode], rounding, int(addend is not None))
    pipeline = rec.device.pipeline(storage(RESIZE, x, out), constants)
    views = [x.view, out.view, (addend if addend is not None else x).view]
    rec.dispatch(pipeline, views, push, flat_groups(out.numel), label=f"resize_{mode}")
