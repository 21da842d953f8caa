"""ONNX MatMul and Gemm."""

from __future__ import annotations

import numpy as np

from .activation import apply_activation


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX MatMul = numpy.matmul: batch dims broadcast, 1-D operands are promoted then squeezed."""
    return np.matmul(a, b)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands


def gemm(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: bool = False,
    trans_b: bool = False,
    activation: str = "none",
    act_alpha: float = 0.0,
    act_beta: float = 0.0,
) -> np.ndarray:
    """ONNX Gemm: Y = alpha * A' @ B' + beta * C, A' = A.T if trans_a (2-D), C unidirectionally broadcast
    to (M, N); then ``apply_activation(Y, activation, act_alpha, act_beta)``."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"gemm needs 2-D operands, got {a.shape} and {b.shape}")
    a2, b2 = (a.T if trans_a else a), (b.T if trans_b else b)
    if a2.shape[1] != b2.shape[0]:
        raise ValueError(f"gemm: inner dims differ: A' {a2.shape}, B' {b2.shape}")
    dt = np.result_type(a, b).type
    y = np.matmul(a2, b2)
    if alpha != 1.0:
        y *= dt(alpha)
    if c is not None:
        cb = np.broadcast_to(np.asarray(c), y.shape)  # raises ValueError if not unidirectional
        y += cb if beta == 1.0 else dt(beta) * cb
    return apply_activation(y, activation, act_alpha, act_beta)
