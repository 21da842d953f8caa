"""ONNX Resize (opset 11-13) for 4-D NCHW, nearest / linear over H and W.

Follows ``onnx/reference/ops/op_resize.py`` exactly: separable per axis, coordinates and linear weights
in float64, output cast back to the input dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

COORDINATE_MODES: tuple[str, ...] = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")
NEAREST_MODES: tuple[str, ...] = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source_coords(out_len: int, in_len: int, scale: float, ctm: str) -> np.ndarray:
    """x_original for every output index. ``scale`` is the ONNX scale (out/in when sizes were given);
    like the ONNX reference, align_corners / pytorch_half_pixel use the float length scale * in_len."""
    y = np.arange(out_len, dtype=np.float64)
    length = scale * in_len
    if ctm == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if ctm == "asymmetric":
        return y / scale
    if ctm == "pytorch_half_pixel":
        return np.full(out_len, -0.5) if length == 1 else (y + 0.5) / scale - 0.5
    if ctm == "align_corners":
        return np.zeros(out_len) if length == 1 else y * (in_len - 1) / (length - 1)
    raise ValueError(f"unsupported coordinate_transformation_mode {ctm!r}; expected {COORDINATE_MODES}")


def resize(
    x: np.ndarray,
    *,
    sizes: Sequence[int] | None = None,
    scales: Sequence[float] | None = None,
    mode: str = "nearest",
    coordinate_transformation_mode: str = "half_pixel",
    nearest_mode: str = "round_prefer_floor",
) -> np.ndarray:
    """Resize x (N, C, H, W) to ``sizes`` (4 ints) or by ``scales`` (4 floats, N/C scale must be 1).

    With scales, out = floor(in * scale) and the float32-rounded scale drives the coordinate transform;
    with sizes, scale = out / in. Source coords are clamped to [0, in-1] (edge padding). Nearest picks
    round/floor/ceil of x_original per ``nearest_mode``; linear blends floor/ceil neighbours.
    """
    if x.ndim != 4:
        raise ValueError(f"resize expects NCHW, got shape {x.shape}")
    if (sizes is None) == (scales is None):
        raise ValueError("resize: give exactly one of sizes / scales")
    if mode not in ("nearest", "linear"):
        raise ValueError(f"unsupported resize mode {mode!r}")
    if nearest_mode not in NEAREST_MODES:
        raise ValueError(f"unsupported nearest_mode {nearest_mode!r}; expected one of {NEAREST_MODES}")
    shape = np.array(x.shape)
    if scales is not None:
        sc = np.asarray(scales, dtype=np.float32).astype(np.float64)  # ONNX scales tensor is float32
        out = (sc * shape).astype(np.int64)
    else:
        out = np.asarray(sizes, dtype=np.int64)
        sc = out / shape
    if sc.shape != (4,) or tuple(out[:2]) != x.shape[:2]:
        raise ValueError(f"resize only scales H and W: input {x.shape}, sizes {sizes}, scales {scales}")
    y = x if mode == "nearest" else x.astype(np.float64)
    for axis in (2, 3):
        n_in, n_out, s = x.shape[axis], int(out[axis]), float(sc[axis])
        if math.isclose(s, 1.0) and n_out == n_in:
            continue
        xo = _source_coords(n_out, n_in, s, coordinate_transformation_mode)
        fl = np.floor(xo)
        exact = xo == fl
        # as the ONNX reference: an integral x has neighbours (x-1, x) with ratio 1
        lo = np.where(exact, fl - 1, fl).astype(np.int64)
        ratio = np.where(exact, 1.0, xo - fl)
        if mode == "nearest":
            take_hi = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                       "floor": exact, "ceil": np.ones_like(exact)}[nearest_mode]
            y = np.take(y, np.clip(lo + take_hi, 0, n_in - 1), axis=axis)
        else:
            bshape = (-1, 1) if axis == 2 else (-1,)
            y_lo = np.take(y, np.clip(lo, 0, n_in - 1), axis=axis)
            y_hi = np.take(y, np.clip(lo + 1, 0, n_in - 1), axis=axis)
            y = y_lo * (1 - ratio).reshape(bshape) + y_hi * ratio.reshape(bshape)
    return y.astype(x.dtype, copy=False)
