"""Elementwise ops (the binary arithmetic, the unary activations, Clip, Identity, Cast): their shapes, their
NumPy execution, and the parameter helpers (`unary_params`, `clip_bounds`) that the passes and the Vulkan
lowering read too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vkocr.engine import ops
from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.opset_registry import Shape, op, same_shape
from vkocr.engine.kernels.launch import broadcast_shape
from vkocr.engine.symbolic import dim


def _infer_broadcast(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    return [broadcast_shape(shapes[0], shapes[1])]


@op("Add", "Sub", "Mul", "Div", "Pow", "GatedAdd", infer=_infer_broadcast)
def _run_binary(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    a, b = x
    if a.dtype.kind != "f" or b.dtype.kind != "f":  # shape arithmetic stays integer
        fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.floor_divide, "Pow": np.power}
        return [fn[node.op](a, b)]
    name = "gated_add" if node.op == "GatedAdd" else node.op.lower()  # x + x·s (passes.fuse_gate)
    return [ops.binary(name, a, b.astype(a.dtype, copy=False))]


def clip_bounds(node: Node, consts: Sequence[np.ndarray | None]) -> tuple[float, float]:
    """Clip's min/max: attributes before opset 11, optional constant inputs after."""
    lo = node.attrs.get("min", -np.inf)
    hi = node.attrs.get("max", np.inf)
    if len(consts) > 1 and consts[1] is not None:
        lo = float(consts[1])
    if len(consts) > 2 and consts[2] is not None:
        hi = float(consts[2])
    return float(lo), float(hi)


UNARY_ATTRS = {"HardSigmoid": (0.2, 0.5), "HardSwish": (1 / 6, 0.5), "LeakyRelu": (0.01, 0.0)}


def unary_params(node: Node, consts: Sequence[np.ndarray | None]) -> tuple[str, float, float]:
    """(vkocr.engine.ops.unary op name, alpha, beta) of an elementwise unary node."""
    if node.op == "Clip":
        return ("clip", *clip_bounds(node, consts))
    if node.op == "Gelu" and node.attrs.get("approximate", "none") != "none":
        raise ValueError(f"{node.name}: Gelu approximate={node.attrs['approximate']!r} is not supported")
    alpha, beta = UNARY_ATTRS.get(node.op, (0.0, 0.0))
    return (node.op.lower(), float(node.attrs.get("alpha", alpha)), float(node.attrs.get("beta", beta)))


UNARY_OP_TYPES = ("Relu", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "Clip", "Sqrt", "Exp", "Tanh", "Neg",
                  "Abs", "Reciprocal", "Erf", "Gelu", "Silu")  # Silu: ours, decomposed.fuse_silu


def _infer_unary(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    if node.op == "Gelu":
        unary_params(node, consts)  # refuses the tanh approximation
    return [shapes[0]]


@op(*UNARY_OP_TYPES, infer=_infer_unary)
def _run_unary(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    name, alpha, beta = unary_params(node, x)
    return [ops.unary(name, x[0], alpha, beta)]


@op("Identity", infer=same_shape)
def _run_identity(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [x[0]]


ONNX_DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64}


@op("Cast", infer=same_shape)
def _run_cast(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    dtype = np.dtype(ONNX_DTYPES[int(node.attrs["to"])])
    if x[0].dtype == object and dtype.kind in "iu":  # a folded shape with symbolic dimensions: they stay symbolic
        return [np.array([dim(d) for d in x[0].flat], dtype=object).reshape(x[0].shape)]
    return [x[0].astype(dtype)]
