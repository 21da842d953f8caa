"""Matrix products and normalisation ops (MatMul, Softmax, ReduceMean, LayerNorm, and Attention: SVTR's
attention nodes, fused): their shapes, their NumPy execution, and the axis helpers that the Vulkan lowering reads
too.
"""

from __future__ import annotations

import numpy as np

from vkocr.engine import ops
from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.opset_registry import Shape, norm_axis, op, same_shape
from vkocr.engine.kernels.launch import broadcast_shape


def _infer_matmul(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    a, b = shapes[:2]  # a fused bias may follow as a third input
    return [(*broadcast_shape(a[:-2], b[:-2]), a[-2], b[-1])]


@op("MatMul", infer=_infer_matmul)
def _run_matmul(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    y = ops.matmul(x[0], x[1])
    if len(x) > 2 and x[2] is not None:  # fused bias (MatMul + Add on the last axis)
        y = y + x[2]
    a = node.attrs
    y = ops.apply_activation(y, a.get("activation", "none"), a.get("act_alpha", 0.0), a.get("act_beta", 0.0))
    if len(x) > 3:  # the Add that shape_fusion.fuse_residual folded in
        y = y + x[3]
    return [y.astype(np.float32, copy=False)]


def softmax_axis(node: Node, rank: int) -> int:
    return norm_axis(int(node.attrs.get("axis", -1)), rank)


@op("Softmax", infer=same_shape)
def _run_softmax(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [ops.softmax(x[0], axis=softmax_axis(node, x[0].ndim))]


def reduce_axes(node: Node, rank: int) -> list[int]:
    return sorted(norm_axis(a, rank) for a in node.attrs.get("axes", range(rank)))


def _infer_reduce_mean(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    axes, keep = reduce_axes(node, len(shapes[0])), node.attrs.get("keepdims", 1)
    return [tuple(1 if i in axes else d for i, d in enumerate(shapes[0]) if keep or i not in axes)]


@op("ReduceMean", infer=_infer_reduce_mean)
def _run_reduce_mean(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [ops.reduce_mean(x[0], reduce_axes(node, x[0].ndim), bool(node.attrs.get("keepdims", 1)))]


@op("LayerNorm", infer=same_shape)
def _run_layer_norm(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    bias = x[2] if len(x) > 2 else None
    return [ops.layer_norm(x[0], x[1], bias, axis=int(node.attrs.get("axis", -1)),
                           epsilon=float(node.attrs.get("epsilon", 1e-5)))]


def _infer_attention(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    n, t, _, heads, d = shapes[0]
    return [(n, t, heads, d)]


@op("Attention", infer=_infer_attention)
def _run_attention(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    """The nodes shape_fusion.fuse_attention replaced, as they ran: q, k and v cut from the (N, T, 3, heads, D)
    tensor, q times the scale (plus the addend), softmax(q · kᵀ) · v, back to (N, T, heads, D)."""
    qkv, scale, add = x
    q, k, v = np.ascontiguousarray(qkv.transpose(2, 0, 3, 1, 4))
    q = ops.binary("mul", q, scale.astype(q.dtype, copy=False))
    if add is not None:
        q = ops.binary("add", q, add.astype(q.dtype, copy=False))
    weights = ops.softmax(ops.matmul(q, np.ascontiguousarray(k.transpose(0, 1, 3, 2))), axis=-1)
    return [np.ascontiguousarray(ops.matmul(weights, v).transpose(0, 2, 1, 3))]
