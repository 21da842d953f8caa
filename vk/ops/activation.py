"""Pointwise activations that the Vulkan kernels can fuse after Conv / Gemm.

All functions compute in the input dtype (float32 in practice); ``alpha`` / ``beta``
are cast to that dtype first, exactly as ONNX float attributes are.
"""

from __future__ import annotations

import numpy as np

from .erf import erf

ACTIVATIONS: tuple[str, ...] = ("none", "relu", "clip", "hardsigmoid", "hardswish", "sigmoid", "leakyrelu", "gelu",
                               "silu")
SQRT2 = float(np.float32(np.sqrt(2.0)))  # the divisor Paddle2ONNX writes into its GELU (1.4142135 in float32)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Overflow-free logistic function 1 / (1 + exp(-x))."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands


def hardsigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """ONNX HardSigmoid: max(0, min(1, alpha * x + beta))."""
    dt = x.dtype.type
    return np.clip(dt(alpha) * x + dt(beta), dt(0), dt(1))  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU, exact form: x · 0.5 · (1 + erf(x / √2)), rounded in the input dtype step by step as the ONNX
    nodes Paddle2ONNX exports (Div, Erf, Add, Mul, Mul) compute it; the factor 0.5 is exact in any order."""
    dt = x.dtype.type
    return (x * (dt(1) + erf(x / dt(SQRT2)))) * dt(0.5)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands


def apply_activation(x: np.ndarray, kind: str, alpha: float = 0.0, beta: float = 0.0) -> np.ndarray:
    """Apply activation ``kind`` to ``x``.

    none: x.  relu: max(x, 0).  clip: min(max(x, alpha), beta) (ReLU6 = clip 0, 6).
    hardsigmoid: max(0, min(1, alpha*x + beta)) (ONNX defaults 0.2, 0.5).
    hardswish: x * hardsigmoid(x; alpha, beta) (ONNX HardSwish is alpha=1/6, beta=0.5).
    sigmoid: 1 / (1 + exp(-x)).  leakyrelu: x if x >= 0 else alpha * x.
    gelu: x * 0.5 * (1 + erf(x / sqrt(2))) (ONNX Gelu, approximate="none").
    silu: x * sigmoid(x), the sigmoid rounded in x's dtype first (a Sigmoid node, then a Mul).
    """
    x = np.asarray(x)
    dt = x.dtype.type
    if kind == "none":
        return x
    if kind == "relu":
        return np.maximum(x, dt(0))  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
    if kind == "clip":
        return np.minimum(np.maximum(x, dt(alpha)), dt(beta))  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
    if kind == "hardsigmoid":
        return hardsigmoid(x, alpha, beta)
    if kind == "hardswish":
        return x * hardsigmoid(x, alpha, beta)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
    if kind == "sigmoid":
        return sigmoid(x)
    if kind == "leakyrelu":
        return np.where(x >= 0, x, dt(alpha) * x)
    if kind == "gelu":
        return gelu(x)
    if kind == "silu":
        return x * sigmoid(x)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
    raise ValueError(f"unknown activation {kind!r}; expected one of {ACTIVATIONS}")
