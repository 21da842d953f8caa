"""ONNX MaxPool / AveragePool / GlobalAveragePool (2-D, NCHW)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np


def _out_len(size: int, k: int, s: int, pad_begin: int, pad_end: int, ceil_mode: bool) -> int:
    """ONNX pooled length; with ceil_mode a last window that would start in the end padding is dropped."""
    span = size + pad_begin + pad_end - k
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + pad_begin:
        out -= 1
    return out


def _windows(xp: np.ndarray, kernel: Sequence[int], strides: Sequence[int], oh: int, ow: int
             ) -> Iterator[np.ndarray]:
    """Yield the (…, oh, ow) strided view of ``xp`` for each kernel tap."""
    (kh, kw), (sh, sw) = kernel, strides
    for p in range(kh):
        for q in range(kw):
            yield xp[..., p : p + sh * (oh - 1) + 1 : sh, q : q + sw * (ow - 1) + 1 : sw]


def _geometry(x: np.ndarray, kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int],
              ceil_mode: bool) -> tuple[int, int, tuple[tuple[int, int], ...]]:
    """Output size and the np.pad widths that make every window in-bounds (ceil_mode may need extra)."""
    h, w = x.shape[-2:]
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = kernel, strides, pads
    oh, ow = _out_len(h, kh, sh, pt, pb, ceil_mode), _out_len(w, kw, sw, pl, pr, ceil_mode)
    eb = max(pb, (oh - 1) * sh + kh - h - pt)
    er = max(pr, (ow - 1) * sw + kw - w - pl)
    return oh, ow, ((0, 0),) * (x.ndim - 2) + ((pt, eb), (pl, er))


def max_pool2d(x: np.ndarray, *, kernel: Sequence[int], strides: Sequence[int],
               pads: Sequence[int] = (0, 0, 0, 0), ceil_mode: bool = False) -> np.ndarray:
    """ONNX MaxPool: max over each kh x kw window; padded positions never win (padded with -inf)."""
    oh, ow, pw = _geometry(x, kernel, strides, pads, ceil_mode)
    xp = np.pad(x, pw, constant_values=-np.inf)
    it = _windows(xp, kernel, strides, oh, ow)
    y = next(it).copy()
    for v in it:
        np.maximum(y, v, out=y)
    return y


def average_pool2d(x: np.ndarray, *, kernel: Sequence[int], strides: Sequence[int],
                   pads: Sequence[int] = (0, 0, 0, 0), ceil_mode: bool = False,
                   count_include_pad: bool = False) -> np.ndarray:
    """ONNX AveragePool: window sum / divisor.

    Divisor = number of real input elements in the window, or with ``count_include_pad`` the number of
    elements inside the explicitly padded extent (positions added only by ceil_mode never count).
    """
    h, w = x.shape[-2:]
    pt, pl, pb, pr = pads
    oh, ow, pw = _geometry(x, kernel, strides, pads, ceil_mode)
    xp = np.pad(x, pw)
    y = np.zeros((*x.shape[:-2], oh, ow), dtype=x.dtype)
    for v in _windows(xp, kernel, strides, oh, ow):
        y += v
    fill = 1 if count_include_pad else 0
    mask = np.pad(np.ones((h, w), dtype=x.dtype), ((pt, pb), (pl, pr)), constant_values=fill)
    mask = np.pad(mask, ((0, pw[-2][1] - pb), (0, pw[-1][1] - pr)))
    count = np.zeros((oh, ow), dtype=x.dtype)
    for v in _windows(mask, kernel, strides, oh, ow):
        count += v
    return y / count


def global_average_pool(x: np.ndarray) -> np.ndarray:
    """ONNX GlobalAveragePool: mean over all spatial axes (2..), keeping them as size 1."""
    return np.mean(  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
        x, axis=tuple(range(2, x.ndim)), keepdims=True, dtype=x.dtype)
