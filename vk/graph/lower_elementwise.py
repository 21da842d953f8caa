"""Lowering rules of the elementwise ops (the binary arithmetic, Pow, the unary activations and Clip): one
dispatch each.
"""

from __future__ import annotations

from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.lower_registry import NodeConstants, Values, lowers, operand, scalar
from vkocr.engine.graph.opset_elementwise import UNARY_OP_TYPES, unary_params
from vkocr.engine.kernels.elementwise import record_binary, record_unary
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor


@lowers("Add", "Sub", "Mul", "Div", "GatedAdd")
def _binary(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    op = "gated_add" if node.op == "GatedAdd" else node.op.lower()  # x + x·s, one pass (passes.fuse_gate)
    record_binary(rec, op, operand(node, ins, 0), operand(node, ins, 1), outs[0])


def _squaring(node: Node, values: Values) -> frozenset[int]:
    """Pow by a constant 2 is x * x: GLSL pow() is undefined for negative bases, and variance needs them."""
    return frozenset({1}) if len(values) > 1 and scalar(values[1]) == 2.0 else frozenset()


@lowers("Pow", host_inputs=_squaring)
def _pow(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    if scalar(consts.values[1]) == 2.0 and tuple(outs[0].shape) == tuple(x.shape):
        record_binary(rec, "mul", x, x, outs[0])
    else:  # positive bases only (GLSL pow)
        record_binary(rec, "pow", x, operand(node, ins, 1), outs[0])


def _clip_limits(node: Node, values: Values) -> frozenset[int]:
    return frozenset({1, 2}) if node.op == "Clip" else frozenset()


@lowers(*UNARY_OP_TYPES, host_inputs=_clip_limits)
def _unary(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    name, alpha, beta = unary_params(node, consts.values)
    record_unary(rec, name, operand(node, ins, 0), outs[0], alpha, beta)
