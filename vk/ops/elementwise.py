"""ONNX elementwise ops: binary ops with multidirectional broadcasting, and unary ops."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .activation import apply_activation
from .erf import erf

BINARY_OPS: tuple[str, ...] = ("add", "sub", "mul", "div", "pow")  # ONNX's; binary() also does our "gated_add"
UNARY_OPS: tuple[str, ...] = ("sqrt", "sigmoid", "hardsigmoid", "relu", "clip", "exp", "tanh", "neg", "abs",
                              "reciprocal", "leakyrelu", "hardswish", "erf", "gelu", "silu")
# ONNX attribute defaults callers should pass as (alpha, beta); clip's are (min, max).
ONNX_UNARY_DEFAULTS: dict[str, tuple[float, float]] = {
    "hardsigmoid": (0.2, 0.5), "hardswish": (1 / 6, 0.5), "leakyrelu": (0.01, 0.0), "clip": (-np.inf, np.inf),
}
_ACT_UNARY = ("sigmoid", "hardsigmoid", "relu", "clip", "leakyrelu", "hardswish", "gelu", "silu")


def broadcast_shape(a_shape: Sequence[int], b_shape: Sequence[int]) -> tuple[int, ...]:
    """Numpy / ONNX multidirectional broadcast of two shapes (right-aligned; dims equal or 1)."""
    n = max(len(a_shape), len(b_shape))
    a = (1,) * (n - len(a_shape)) + tuple(a_shape)
    b = (1,) * (n - len(b_shape)) + tuple(b_shape)
    if any(x != y and x != 1 and y != 1 for x, y in zip(a, b, strict=True)):
        raise ValueError(f"shapes {tuple(a_shape)} and {tuple(b_shape)} are not broadcast-compatible")
    return tuple(y if x == 1 else x for x, y in zip(a, b, strict=True))


def binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX Add / Sub / Mul / Div / Pow with broadcasting; result has a's dtype (integer Div truncates)."""
    a, b = np.asarray(a), np.asarray(b)
    broadcast_shape(a.shape, b.shape)
    if op == "add":
        return np.add(a, b)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
    if op == "sub":
        return np.subtract(a, b)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
    if op == "mul":
        return np.multiply(a, b)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
    if op == "div":
        if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
            q = np.floor_divide(a, b)  # then C-style truncation toward zero:
            return q + ((q * b != a) & ((a < 0) != (b < 0)))  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
        return np.divide(a, b)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
    if op == "pow":
        return np.power(a, b).astype(a.dtype, copy=False)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
    if op == "gated_add":  # a + a·b, rounded after the product as the Mul and Add it replaces (passes.fuse_gate)
        return np.add(a, np.multiply(a, b))  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
    raise ValueError(f"unknown binary op {op!r}; expected one of {BINARY_OPS} or gated_add")


def unary(op: str, x: np.ndarray, alpha: float = 0.0, beta: float = 0.0) -> np.ndarray:
    """ONNX unary op; alpha/beta are the op's attributes (see ONNX_UNARY_DEFAULTS; clip: min, max).

    sqrt, exp, tanh, neg (-x), abs, reciprocal (1/x), erf; activations as in ``apply_activation``.
    """
    x = np.asarray(x)
    if op in _ACT_UNARY:
        return apply_activation(x, op, alpha, beta)
    fns: dict[str, Callable[[np.ndarray], np.ndarray]] = {"sqrt": np.sqrt, "exp": np.exp, "tanh": np.tanh,
                                                          "neg": np.negative, "abs": np.abs,
                                                          "reciprocal": np.reciprocal, "erf": erf}
    if op not in fns:
        raise ValueError(f"unknown unary op {op!r}; expected one of {UNARY_OPS}")
    return fns[op](x)
