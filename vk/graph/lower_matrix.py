"""Lowering rules of matrix products and normalisation (MatMul, Softmax, ReduceMean, LayerNorm, Attention).
"""

from __future__ import annotations

import math

from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.lower_registry import (
    NodeConstants,
    Values,
    activation,
    fail,
    lowers,
    operand,
    optional,
    reshaped,
    scalar,
)
from vkocr.engine.graph.opset_matrix import reduce_axes, softmax_axis
from vkocr.engine.kernels.attention import record_attention
from vkocr.engine.kernels.elementwise import record_binary, record_unary
from vkocr.engine.kernels.matmul import record_gemm, record_matmul
from vkocr.engine.kernels.reduce import record_layer_norm, record_reduce_mean, record_softmax
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor


@lowers("MatMul")
def _matmul(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    """A 2-D right operand (weights): one GEMM over all rows of a, bias, activation and a residual (the Add that
    shape_fusion.fuse_residual folded in as a fourth input) in its epilogue. Otherwise a batched matmul, then the
    bias add and the activation as their own passes."""
    a, b, bias, out = operand(node, ins, 0), operand(node, ins, 1), optional(ins, 2), outs[0]
    residual = optional(ins, 3)
    kind, alpha, beta = activation(node)
    if len(b.shape) == 2 and len(a.shape) >= 2:
        rows = math.prod(a.shape[:-1])
        flat = (rows, b.shape[1])
        record_gemm(rec, reshaped(a, (rows, a.shape[-1])), b, reshaped(out, flat), bias,
                    activation=kind, act_alpha=alpha, act_beta=beta,
                    residual=reshaped(residual, flat) if residual is not None else None)
        return
    if residual is not None:
        raise fail(node, "a residual needs a 2-D right operand (shape_fusion.fuse_residual folds none otherwise)")
    record_matmul(rec, a, b, out)
    if bias is not None:  # in place: each invocation reads and writes the same element
        record_binary(rec, "add", out, bias, out)
    if kind != "none":
        record_unary(rec, kind, out, out, alpha, beta)


@lowers("Softmax")
def _softmax(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    record_softmax(rec, x, outs[0], softmax_axis(node, len(x.shape)))


@lowers("ReduceMean")
def _reduce_mean(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                 consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    record_reduce_mean(rec, x, outs[0], reduce_axes(node, len(x.shape)), bool(node.attrs.get("keepdims", 1)))


@lowers("LayerNorm")
def _layer_norm(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                consts: NodeConstants) -> None:
    record_layer_norm(rec, operand(node, ins, 0), operand(node, ins, 1), outs[0], optional(ins, 2),
                      axis=int(node.attrs.get("axis", -1)), epsilon=float(node.attrs.get("epsilon", 1e-5)))


def _attention_constants(node: Node, values: Values) -> frozenset[int]:
    return frozenset({1, 2})  # q's scale and addend, read on the host


@lowers("Attention", host_inputs=_attention_constants)
def _attention(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
               consts: NodeConstants) -> None:
    """shape_fusion.fuse_attention's node: one dispatch (vk/kernels/attention.py)."""
    scale = scalar(consts.values[1])
    add = scalar(consts.values[2]) if len(consts.values) > 2 and node.inputs[2] else None
    if scale is None:
        raise fail(node, "the scale of q must be a one-element constant")
    record_attention(rec, operand(node, ins, 0), outs[0], scale, add)
