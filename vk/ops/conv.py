"""ONNX Conv / ConvTranspose (2-D, NCHW) via im2col + batched matmul."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .activation import apply_activation


def _out_len(size: int, k: int, stride: int, dilation: int, pad: int) -> int:
    return (size + pad - ((k - 1) * dilation + 1)) // stride + 1


def conv2d(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    group: int = 1,
    activation: str = "none",
    alpha: float = 0.0,
    beta: float = 0.0,
) -> np.ndarray:
    """ONNX Conv: x (N, Cin, H, W), w (Cout, Cin/group, kh, kw), b (Cout,), pads (top, left, bottom, right).

    y[n, g*Cog + o, i, j] = b[g*Cog + o]
        + sum_{c,p,q} w[g*Cog + o, c, p, q] * xpad[n, g*Cig + c, i*sh + p*dh, j*sw + q*dw],
    then ``apply_activation(y, activation, alpha, beta)``.
    """
    n, cin, h, wd = x.shape
    cout, cig, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilations, pads
    if cin != cig * group or cout % group:
        raise ValueError(f"conv2d: x {x.shape} / w {w.shape} inconsistent with group={group}")
    oh, ow = _out_len(h, kh, sh, dh, pt + pb), _out_len(wd, kw, sw, dw, pl + pr)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    cols = np.empty((n, cin, kh, kw, oh, ow), dtype=x.dtype)
    for p in range(kh):
        for q in range(kw):
            cols[:, :, p, q] = xp[:, :, p * dh : p * dh + sh * (oh - 1) + 1 : sh,
                                  q * dw : q * dw + sw * (ow - 1) + 1 : sw]
    cols = cols.reshape(n, group, cig * kh * kw, oh * ow)
    wm = w.reshape(group, cout // group, cig * kh * kw).astype(x.dtype, copy=False)
    y = np.matmul(wm, cols).reshape(n, cout, oh, ow)
    if b is not None:
        y += b.astype(x.dtype, copy=False).reshape(1, cout, 1, 1)
    return apply_activation(y, activation, alpha, beta)


def conv_transpose2d(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    group: int = 1,
    output_padding: Sequence[int] = (0, 0),
) -> np.ndarray:
    """ONNX ConvTranspose: x (N, Cin, H, W), w (Cin, Cout/group, kh, kw), pads (top, left, bottom, right).

    Scatters x[n, c, i, j] * w[c, o, p, q] to full[n, o, i*sh + p*dh, j*sw + q*dw] (col2im), where the
    full canvas has sh*(H-1) + oph + (kh-1)*dh + 1 rows (extra output_padding rows at the end);
    the result is full[..., top : rows - bottom, left : cols - right] + b.
    """
    n, cin, h, wd = x.shape
    cin_w, cog, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr), (oph, opw) = strides, dilations, pads, output_padding
    if cin != cin_w or cin % group:
        raise ValueError(f"conv_transpose2d: x {x.shape} / w {w.shape} inconsistent with group={group}")
    cig, cout = cin // group, cog * group
    wm = w.reshape(group, cig, cog * kh * kw).transpose(0, 2, 1).astype(x.dtype, copy=False)
    cols = np.matmul(wm, x.reshape(n, group, cig, h * wd)).reshape(n, cout, kh, kw, h, wd)
    fh, fw = sh * (h - 1) + oph + (kh - 1) * dh + 1, sw * (wd - 1) + opw + (kw - 1) * dw + 1
    full = np.zeros((n, cout, fh, fw), dtype=x.dtype)
    for p in range(kh):
        for q in range(kw):
            full[:, :, p * dh : p * dh + sh * (h - 1) + 1 : sh,
                 q * dw : q * dw + sw * (wd - 1) + 1 : sw] += cols[:, :, p, q]
    y = full[:, :, pt : fh - pb, pl : fw - pr]
    if b is not None:
        y = y + b.astype(x.dtype, copy=False).reshape(1, cout, 1, 1)
    return np.ascontiguousarray(y)
