"""Convolution and pooling ops (Conv, ConvTranspose, BatchNormalization, MaxPool, AveragePool,
GlobalAveragePool, and Excite: an SE block's two 1×1 convolutions and its product, fused): their shapes, their
NumPy execution, and the attribute helpers (pads with auto_pad resolved, strides, dilations, the fused
post-affine) that the Vulkan lowering (vk/graph/lower_windows.py) reads too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vkocr.engine import ops
from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.opset_registry import Shape, op, same_shape
from vkocr.engine.kernels.conv import conv_output_shape
from vkocr.engine.kernels.conv_transpose import conv_transpose_output_shape
from vkocr.engine.kernels.pool import pool_output_shape


def same_pads(auto_pad: str, size: Sequence[int], kernel: Sequence[int], strides: Sequence[int]
              ) -> tuple[int, int, int, int]:
    """ONNX auto_pad SAME_UPPER / SAME_LOWER on (H, W) for windows of `kernel`: enough padding for
    ceil(size / stride) outputs, the odd one at the end (UPPER) or the start (LOWER); (top, left, bottom, right)."""
    begin, end = [], []
    for n, k, s in zip(size, kernel, strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        small = total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else total - small)
        end.append(total - begin[-1])
    return begin[0], begin[1], end[0], end[1]


def window_pads(node: Node, in_shape: Sequence[int] | None, kernel: Sequence[int],
                dilations: Sequence[int] = (1, 1)) -> tuple[int, int, int, int]:
    """A conv's or pool's pads (top, left, bottom, right) with auto_pad resolved for an input of `in_shape`
    (N, C, H, W); None: SAME is refused (ConvTranspose, whose SAME means another thing), as is SAME with
    dilations."""
    a = node.attrs
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        p = list(a.get("pads", [0, 0, 0, 0]))
        return p[0], p[1], p[2], p[3]
    if auto_pad == "VALID":
        return 0, 0, 0, 0
    # SAME with dilations: onnxruntime refuses it too, so nothing would say what it should give
    if auto_pad in ("SAME_UPPER", "SAME_LOWER") and in_shape is not None and len(in_shape) == 4 \
            and all(d == 1 for d in dilations):
        return same_pads(auto_pad, in_shape[2:], kernel, tuple(a.get("strides", (1, 1))))
    raise ValueError(f"{node.name}: auto_pad={auto_pad} is not supported here (dilations {tuple(dilations)})")


def conv_attrs(node: Node, in_shape: Sequence[int] | None, kernel: Sequence[int]) -> dict[str, Any]:
    """strides, pads (ONNX order: top, left, bottom, right; auto_pad resolved), dilations and group of a conv
    over an input of `in_shape` with a kernel of `kernel` (H, W)."""
    a = node.attrs
    dilations = tuple(a.get("dilations", (1, 1)))
    return {
        "strides": tuple(a.get("strides", (1, 1))),
        "pads": window_pads(node, in_shape, kernel, dilations),
        "dilations": dilations,
        "group": int(a.get("group", 1)),
    }


def post_affine(node: Node) -> tuple[float, float] | None:
    """The (scale, shift) that passes.fuse_post_affine folded after this node's activation, or None."""
    a = node.attrs
    if "post_scale" not in a and "post_shift" not in a:
        return None
    return float(a.get("post_scale", 1.0)), float(a.get("post_shift", 0.0))


def _infer_conv(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    return [conv_output_shape(shapes[0], shapes[1], **conv_attrs(node, shapes[0], shapes[1][2:]))]


@op("Conv", infer=_infer_conv)
def _run_conv(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    a = node.attrs
    bias = x[2] if len(x) > 2 else None
    y = ops.conv2d(x[0], x[1], bias, **conv_attrs(node, x[0].shape, x[1].shape[2:]),
                   activation=a.get("activation", "none"), alpha=a.get("act_alpha", 0.0), beta=a.get("act_beta", 0.0))
    post = post_affine(node)
    if post is not None:  # the Mul and Add that passes.fuse_post_affine replaced, rounded as they were
        y = y * y.dtype.type(post[0]) + y.dtype.type(post[1])
    return [y + x[3] if len(x) > 3 else y]  # the Add that passes.fuse_residual folded in


def excite_convs(node: Node) -> tuple[Node, Node]:
    """The two 1×1 convolutions an Excite node took over (shape_fusion.fuse_excite), as Conv nodes with their
    attributes: the first over the squeezed map, the second over its output."""
    return (Node("Conv", f"{node.name}.first", [], [], dict(node.attrs["first"])),
            Node("Conv", f"{node.name}.second", [], [], dict(node.attrs["second"])))


@op("Excite", infer=same_shape)
def _run_excite(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    """x · g, or x + x · g (`gated_add`), g = second(first(s)): the Conv, Conv and Mul (or GatedAdd) it replaces;
    with an `upsample` factor, plus the seventh input upsampled by it (each element repeated on both axes): the
    nearest Resize and its Add that map_fusion.fuse_excite_upsample_add folded in."""
    data, s, w1, b1, w2, b2 = x[:6]
    first, second = excite_convs(node)
    h = _run_conv(first, [s, w1] if b1 is None else [s, w1, b1])[0]
    g = _run_conv(second, [h, w2] if b2 is None else [h, w2, b2])[0]
    y = ops.binary("gated_add" if node.attrs["gated_add"] else "mul", data, g)
    up = int(node.attrs.get("upsample", 1))
    return [x[6].repeat(up, axis=2).repeat(up, axis=3) + y if up > 1 else y]


def conv_transpose_attrs(node: Node) -> dict[str, Any]:
    return {**conv_attrs(node, None, ()), "output_padding": tuple(node.attrs.get("output_padding", (0, 0)))}


def _infer_conv_transpose(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    if "output_shape" in node.attrs:
        raise ValueError(f"{node.name}: ConvTranspose output_shape is not supported")
    return [conv_transpose_output_shape(shapes[0], shapes[1], **conv_transpose_attrs(node))]


@op("ConvTranspose", infer=_infer_conv_transpose)
def _run_conv_transpose(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    a = node.attrs
    y = ops.conv_transpose2d(x[0], x[1], x[2] if len(x) > 2 else None, **conv_transpose_attrs(node))
    return [ops.apply_activation(y, a.get("activation", "none"), a.get("act_alpha", 0.0), a.get("act_beta", 0.0))]


def _infer_conv_transpose_pair(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    n, _, h, w = shapes[0]
    (_, _, k1h, k1w), (_, c2, k2h, k2w) = shapes[1], shapes[3]
    return [(n, c2, h * k1h * k2h, w * k1w * k2w)]


@op("ConvTransposePair", infer=_infer_conv_transpose_pair)
def _run_conv_transpose_pair(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    """The two ConvTransposes map_fusion.fuse_conv_transpose_pair joined (kernels equal to strides), the
    middle map in the input's dtype, as the first stored it."""
    data, w1, b1, w2, b2 = x
    first = Node("ConvTranspose", f"{node.name}.first", [], [], {**node.attrs["first"], "strides": w1.shape[2:]})
    second = Node("ConvTranspose", f"{node.name}.second", [], [], {**node.attrs["second"], "strides": w2.shape[2:]})
    mid = _run_conv_transpose(first, [data, w1] if b1 is None else [data, w1, b1])[0].astype(data.dtype)
    return _run_conv_transpose(second, [mid, w2] if b2 is None else [mid, w2, b2])


# What map_fusion.fuse_stem_concat fuses: both convolutions 2×2 at stride 1, padded below and to the right
STEM_CONV = {"kernel_shape": [2, 2], "strides": [1, 1], "pads": [0, 0, 1, 1], "dilations": [1, 1], "group": 1}


def _infer_stem_concat(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    n, c0, h, w = shapes[0]
    return [(n, c0 + shapes[3][0], h, w)]


@op("StemConcat", infer=_infer_stem_concat)
def _run_stem_concat(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    """The pooled Concat and two 2×2 convolutions map_fusion.fuse_stem_concat joined: Concat(MaxPool(a),
    Conv(Conv(a))), the middle map in the input's dtype, as the first convolution stored it."""
    data, w1, b1, w2, b2 = x
    first = Node("Conv", f"{node.name}.first", [], [], {**STEM_CONV, **node.attrs["first"]})
    second = Node("Conv", f"{node.name}.second", [], [], {**STEM_CONV, **node.attrs["second"]})
    mid = _run_conv(first, [data, w1] if b1 is None else [data, w1, b1])[0].astype(data.dtype)
    conv = _run_conv(second, [mid, w2] if b2 is None else [mid, w2, b2])[0].astype(data.dtype)
    pooled = ops.max_pool2d(data, kernel=(2, 2), strides=(1, 1), pads=(0, 0, 1, 1))
    return [np.concatenate([pooled, conv], axis=1)]


@op("BatchNormalization", infer=same_shape)
def _run_batchnorm(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    data, scale, bias, mean, var = x[:5]
    eps = node.attrs.get("epsilon", 1e-5)
    shape = (1, -1) + (1,) * (data.ndim - 2)
    k = (scale / np.sqrt(var + eps)).reshape(shape)
    return [((data - mean.reshape(shape)) * k + bias.reshape(shape)).astype(data.dtype)]


def pool_attrs(node: Node, in_shape: Sequence[int]) -> dict[str, Any]:
    """kernel, strides, pads (auto_pad resolved for this input's H × W) and ceil_mode of a MaxPool/AveragePool."""
    a = node.attrs
    kernel = tuple(a["kernel_shape"])
    return {"kernel": kernel, "strides": tuple(a.get("strides", (1, 1))), "pads": window_pads(node, in_shape, kernel),
            "ceil_mode": bool(a.get("ceil_mode", 0))}


def _infer_pool(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    return [pool_output_shape(shapes[0], **pool_attrs(node, shapes[0]))]


@op("MaxPool", infer=_infer_pool)
def _run_max_pool(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [ops.max_pool2d(x[0], **pool_attrs(node, x[0].shape))]


@op("AveragePool", infer=_infer_pool)
def _run_average_pool(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [ops.average_pool2d(x[0], **pool_attrs(node, x[0].shape),
                               count_include_pad=bool(node.attrs.get("count_include_pad", 0)))]


@op("GlobalAveragePool", infer=lambda node, shapes, consts: [(*shapes[0][:2], 1, 1)])
def _run_global_average_pool(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [ops.global_average_pool(x[0])]
