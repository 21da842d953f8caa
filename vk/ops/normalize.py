"""ONNX Softmax (opset 13), LayerNormalization (opset 17), ReduceMean (opset 13)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax-13 along one axis: exp(x - max) / sum(exp(x - max))."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands


def layer_norm(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
) -> np.ndarray:
    """LayerNormalization-17: normalise over axes axis..rank-1,
    y = (x - mean) / sqrt(var + epsilon) * scale + bias (biased variance; scale/bias broadcast)."""
    axes = tuple(range(axis % x.ndim, x.ndim))
    dt = x.dtype.type
    d = x - np.mean(x, axis=axes, keepdims=True)
    var = np.mean(d * d, axis=axes, keepdims=True)
    y = d / np.sqrt(var + dt(epsilon)) * scale
    return y if bias is None else y + bias  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands


def reduce_mean(x: np.ndarray, axes: Sequence[int] | None = None, keepdims: bool = True) -> np.ndarray:
    """ReduceMean-13: arithmetic mean over ``axes`` (None or empty = all axes)."""
    ax = None if not axes else tuple(int(a) for a in axes)
    return np.mean(x, axis=ax, keepdims=keepdims, dtype=x.dtype)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
