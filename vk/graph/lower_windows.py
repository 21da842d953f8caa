"""Lowering rules of convolution and pooling (Conv, ConvTranspose, ConvTransposePair, StemConcat,
BatchNormalization, MaxPool, AveragePool, GlobalAveragePool, Excite). Conv, the most common node, is prepared once
per node (`_prepare_conv`: its kernel and packed attributes), so a new input shape only records it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.lower_registry import (
    Emit,
    NodeConstants,
    Values,
    activation,
    all_but_first,
    fail,
    lowers,
    operand,
    optional,
    reshaped,
)
from vkocr.engine.graph.opset_windows import conv_attrs, conv_transpose_attrs, excite_convs, pool_attrs, post_affine
from vkocr.engine.kernels.conv import Conv2d
from vkocr.engine.kernels.conv_transpose import record_conv_transpose2d, record_conv_transpose_pair
from vkocr.engine.kernels.depthwise import DepthwiseConv2d, record_conv2d_depthwise
from vkocr.engine.kernels.excite import Excite
from vkocr.engine.kernels.gemv import Epilogue
from vkocr.engine.kernels.pool import record_average_pool2d, record_global_average_pool, record_max_pool2d
from vkocr.engine.kernels.stem_concat import record_stem_concat
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor


def conv_kernel(node: Node, w: Tensor, has_bias: bool, x_shape: Sequence[int] | None) -> Conv2d | DepthwiseConv2d:
    """The kernel of a Conv node with weights `w`: the depthwise one where each channel is its own group. Pads
    come from the attributes (`x_shape` resolves auto_pad SAME; None where it is not SAME)."""
    attrs = conv_attrs(node, x_shape, w.shape[2:])
    kind, alpha, beta = activation(node)
    post = post_affine(node)
    group = attrs["group"]
    if len(w.shape) == 4 and w.shape[1] == 1 and w.shape[0] == group:  # Cin = group · 1 = Cout
        return DepthwiseConv2d(w.shape, has_bias=has_bias, strides=attrs["strides"], pads=attrs["pads"],
                               dilations=attrs["dilations"], activation=kind, alpha=alpha, beta=beta,
                               post_affine=post)
    return Conv2d(w.shape, has_bias=has_bias, **attrs, activation=kind, alpha=alpha, beta=beta, post_affine=post)


def _prepare_conv(node: Node, static: list[Tensor | None], consts: NodeConstants) -> Emit | None:
    w = static[1] if len(static) > 1 else None
    if w is None or node.attrs.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        return None  # weights computed at runtime, or pads that follow the input shape
    kernel = conv_kernel(node, w, optional(static, 2) is not None, None)
    residual = has_residual(node)

    def emit(rec: Recorder, ins: list[Tensor | None], outs: list[Tensor]) -> None:
        r = operand(node, ins, 3) if residual else None
        kernel.record(rec, operand(node, ins, 0), operand(node, ins, 1), outs[0], optional(ins, 2), residual=r)

    return emit


def has_residual(node: Node) -> bool:
    """A Conv that passes.fuse_residual gave a fourth input: added to its output in the epilogue."""
    return len(node.inputs) > 3 and bool(node.inputs[3])


@lowers("Conv", prepare=_prepare_conv)
def _conv(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    x, w, b = operand(node, ins, 0), operand(node, ins, 1), optional(ins, 2)
    r = operand(node, ins, 3) if has_residual(node) else None
    conv_kernel(node, w, b is not None, x.shape).record(rec, x, w, outs[0], b, residual=r)


def excite_kernel(node: Node, w1: Tensor, w2: Tensor) -> Excite:
    """The kernel of an Excite node (shape_fusion.fuse_excite; with an `upsample` factor and a seventh input, the
    upsample-and-add map_fusion.fuse_excite_upsample_add folded in) with weights w1 and w2."""
    epilogues = [Epilogue(*activation(conv)) for conv in excite_convs(node)]
    return Excite.of(tuple(w1.shape), tuple(w2.shape), *epilogues, has_b1=bool(node.inputs[3]),
                     has_b2=bool(node.inputs[5]), gated_add=bool(node.attrs["gated_add"]),
                     upsample=int(node.attrs.get("upsample", 1)))


def _prepare_excite(node: Node, static: list[Tensor | None], consts: NodeConstants) -> Emit | None:
    w1, w2 = static[2], static[4]
    if w1 is None or w2 is None:
        return None
    kernel = excite_kernel(node, w1, w2)

    def emit(rec: Recorder, ins: list[Tensor | None], outs: list[Tensor]) -> None:
        kernel.record(rec, operand(node, ins, 0), operand(node, ins, 1), operand(node, ins, 2), optional(ins, 3),
                      operand(node, ins, 4), optional(ins, 5), outs[0], optional(ins, 6))

    return emit


@lowers("Excite", prepare=_prepare_excite)
def _excite(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    w1, w2 = operand(node, ins, 2), operand(node, ins, 4)
    excite_kernel(node, w1, w2).record(rec, operand(node, ins, 0), operand(node, ins, 1), w1, optional(ins, 3), w2,
                                       optional(ins, 5), outs[0], optional(ins, 6))


@lowers("ConvTranspose")
def _conv_transpose(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                    consts: NodeConstants) -> None:
    if "output_shape" in node.attrs:
        raise fail(node, "ConvTranspose output_shape is not supported")
    kind, alpha, beta = activation(node)
    record_conv_transpose2d(rec, operand(node, ins, 0), operand(node, ins, 1), outs[0], optional(ins, 2),
                            **conv_transpose_attrs(node), activation=kind, alpha=alpha, beta=beta)


@lowers("ConvTransposePair")
def _conv_transpose_pair(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                         consts: NodeConstants) -> None:
    epilogues = [activation(Node("ConvTranspose", node.name, [], [], node.attrs[k])) for k in ("first", "second")]
    record_conv_transpose_pair(rec, operand(node, ins, 0), operand(node, ins, 1), optional(ins, 2),
                               operand(node, ins, 3), optional(ins, 4), outs[0], activations=epilogues)


@lowers("StemConcat")
def _stem_concat(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                 consts: NodeConstants) -> None:
    epilogues = [activation(Node("Conv", node.name, [], [], node.attrs[k])) for k in ("first", "second")]
    record_stem_concat(rec, operand(node, ins, 0), operand(node, ins, 1), optional(ins, 2), operand(node, ins, 3),
                       optional(ins, 4), outs[0], activations=epilogues)


def _batchnorm_affine(node: Node, values: Values) -> dict[str, np.ndarray]:
    """y = x * scale + shift per channel, from (gamma, beta, mean, var), computed in float64."""
    gamma, beta, mean, var = (np.asarray(v, np.float64).reshape(-1) for v in values[1:5])
    scale = gamma / np.sqrt(var + float(node.attrs.get("epsilon", 1e-5)))
    return {"scale": scale.reshape(-1, 1, 1, 1), "shift": beta - mean * scale}


@lowers("BatchNormalization", host_inputs=all_but_first, derive=_batchnorm_affine)
def _batchnorm(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
               consts: NodeConstants) -> None:
    """A BatchNormalization no conv absorbed: a 1×1 depthwise conv (scale as weight, shift as bias), one
    dispatch. Inputs other than NCHW are seen as (N, C, 1, rest), which keeps the long axis on the grid's x."""
    x = operand(node, ins, 0)
    if len(x.shape) < 2:
        raise fail(node, f"input of rank {len(x.shape)}: BatchNormalization needs (N, C, ...)")
    planes = x.shape if len(x.shape) == 4 else (x.shape[0], x.shape[1], 1, math.prod(x.shape[2:]))
    record_conv2d_depthwise(rec, reshaped(x, planes), consts.derived["scale"], reshaped(outs[0], planes),
                            consts.derived["shift"])


@lowers("MaxPool")
def _max_pool(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
              consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    record_max_pool2d(rec, x, outs[0], **pool_attrs(node, x.shape))


@lowers("AveragePool")
def _average_pool(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                  consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    record_average_pool2d(rec, x, outs[0], **pool_attrs(node, x.shape),
                          count_include_pad=bool(node.attrs.get("count_include_pad", 0)))


@lowers("GlobalAveragePool")
def _global_average_pool(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                         consts: NodeConstants) -> None:
    record_global_average_pool(rec, operand(node, ins, 0), outs[0])
