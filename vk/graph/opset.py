"""Every op the IR knows: its output shapes for concrete input shapes, and its NumPy execution.

`infer(node, shapes, consts)` gets the input shapes and, for inputs that are constants, their values (None
otherwise): a Reshape needs its target, a Slice its bounds. `run(node, inputs)` computes the outputs with the
references in vk/ops; it serves the NumPy executor and constant folding. The Vulkan side is vk/graph/lower.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from vkocr.engine import ops
from vkocr.engine.graph.ir import Node
from vkocr.engine.kernels.conv import conv_output_shape
from vkocr.engine.kernels.conv_transpose import conv_transpose_output_shape
from vkocr.engine.kernels.launch import broadcast_shape
from vkocr.engine.kernels.layout import slice_output_shape
from vkocr.engine.kernels.pool import pool_output_shape
from vkocr.engine.symbolic import dim

Shape = tuple[int, ...]
Infer = Callable[[Node, list[Shape], list[np.ndarray | None]], list[Shape]]
Run = Callable[[Node, list[np.ndarray]], list[np.ndarray]]


@dataclass(frozen=True)
class OpDef:
    infer: Infer
    run: Run


OPS: dict[str, OpDef] = {}


def op(*names: str, infer: Infer) -> Callable[[Run], Run]:
    """Register `run` (and `infer`) for these op types."""

    def register(run: Run) -> Run:
        for name in names:
            OPS[name] = OpDef(infer, run)
        return run

    return register


def same_shape(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    return [shapes[0]]


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


# -- convolution and pooling -------------------------------------------------------------------------------


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


# -- elementwise ----------------------------------------------------------------------------------------------


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
                  "Abs", "Reciprocal", "Erf", "Gelu")


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


# -- shape and layout -----------------------------------------------------------------------------------------


@op("Shape", infer=lambda node, shapes, consts: [(len(shapes[0]),)])
def _run_shape(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [np.array(x[0].shape, dtype=np.int64)]


def reshape_target(node: Node, in_shape: Shape, target: np.ndarray | None) -> Shape:
    """ONNX Reshape: 0 copies the input dimension (unless allowzero), -1 is inferred."""
    if target is None:
        raise ValueError(f"{node.name}: Reshape target shape is not a constant for this input shape")
    dims = [dim(d) for d in target]
    if not node.attrs.get("allowzero", 0):
        dims = [in_shape[i] if d == 0 else d for i, d in enumerate(dims)]
    if -1 in dims:
        known = math.prod([d for d in dims if d != -1])
        dims[dims.index(-1)] = math.prod(in_shape) // max(known, 1)
    if math.prod(dims) != math.prod(in_shape):
        raise ValueError(f"{node.name}: cannot reshape {in_shape} to {dims}")
    return tuple(dims)


@op("Reshape", infer=lambda node, shapes, consts: [reshape_target(node, shapes[0], consts[1])])
def _run_reshape(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [x[0].reshape(reshape_target(node, x[0].shape, x[1]))]


def squeeze_axes(node: Node, shape: Shape, consts: Sequence[np.ndarray | None]) -> list[int]:
    axes = node.attrs.get("axes")
    if axes is None and len(consts) > 1 and consts[1] is not None:
        axes = [int(a) for a in consts[1]]
    if axes is None:
        return [i for i, d in enumerate(shape) if d == 1]
    return sorted(_norm_axis(a, len(shape)) for a in axes)


def _infer_squeeze(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    axes = squeeze_axes(node, shapes[0], consts)
    return [tuple(d for i, d in enumerate(shapes[0]) if i not in axes)]


@op("Squeeze", infer=_infer_squeeze)
def _run_squeeze(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [x[0].reshape(_infer_squeeze(node, [x[0].shape], list(x))[0])]


def _infer_unsqueeze(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    axes = node.attrs.get("axes")
    if axes is None:
        axes = [int(a) for a in consts[1]]  # type: ignore[union-attr]  # an axes input is a constant (checked on import)
    rank = len(shapes[0]) + len(axes)
    axes = sorted(_norm_axis(a, rank) for a in axes)
    dims = list(shapes[0])
    for a in axes:
        dims.insert(a, 1)
    return [tuple(dims)]


@op("Unsqueeze", infer=_infer_unsqueeze)
def _run_unsqueeze(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [x[0].reshape(_infer_unsqueeze(node, [x[0].shape], list(x))[0])]


def _infer_flatten(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    axis = _norm_axis(int(node.attrs.get("axis", 1)), len(shapes[0]))
    return [(math.prod(shapes[0][:axis]), math.prod(shapes[0][axis:]))]


@op("Flatten", infer=_infer_flatten)
def _run_flatten(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [x[0].reshape(_infer_flatten(node, [x[0].shape], list(x))[0])]


def _infer_concat(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    axis = _norm_axis(int(node.attrs["axis"]), len(shapes[0]))
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


@op("Concat", infer=_infer_concat)
def _run_concat(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [np.concatenate(x, axis=int(node.attrs["axis"]))]


def slice_args(node: Node, consts: Sequence[np.ndarray | None]) -> tuple[list[int], list[int], list[int] | None,
                                                                         list[int] | None]:
    """starts, ends, axes, steps of a Slice: attributes (opset < 10) or constant inputs."""
    if "starts" in node.attrs:
        return list(node.attrs["starts"]), list(node.attrs["ends"]), node.attrs.get("axes"), None

    def ints(i: int) -> list[int] | None:
        if len(consts) <= i or consts[i] is None:
            return None
        return [dim(v) for v in np.asarray(consts[i]).reshape(-1)]

    starts, ends = ints(1), ints(2)
    if starts is None or ends is None:
        raise ValueError(f"{node.name}: Slice bounds are not constants for this input shape")
    return starts, ends, ints(3), ints(4)


@op("Slice", infer=lambda node, shapes, consts: [slice_output_shape(shapes[0], *slice_args(node, consts))])
def _run_slice(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [ops.slice_(x[0], *slice_args(node, list(x)))]


def _infer_gather(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    axis = _norm_axis(int(node.attrs.get("axis", 0)), len(shapes[0]))
    return [shapes[0][:axis] + shapes[1] + shapes[0][axis + 1:]]


@op("Gather", infer=_infer_gather)
def _run_gather(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [np.take(x[0], x[1].astype(np.int64), axis=int(node.attrs.get("axis", 0)))]


def transpose_perm(node: Node, rank: int) -> list[int]:
    return list(node.attrs.get("perm", range(rank - 1, -1, -1)))


@op("Transpose", infer=lambda node, shapes, consts: [tuple(shapes[0][p] for p in transpose_perm(node, len(shapes[0])))])
def _run_transpose(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [np.ascontiguousarray(x[0].transpose(transpose_perm(node, x[0].ndim)))]


def resize_args(node: Node, in_shape: Shape, consts: Sequence[np.ndarray | None]) -> tuple[Shape, list[float] | None]:
    """Output shape and, when given, the scales of a Resize (opset 11+: X, roi, scales, sizes)."""
    scales = consts[2] if len(consts) > 2 and consts[2] is not None and np.size(consts[2]) else None
    sizes = consts[3] if len(consts) > 3 and consts[3] is not None and np.size(consts[3]) else None
    if sizes is not None:
        return tuple(dim(s) for s in sizes), None
    if scales is None:
        raise ValueError(f"{node.name}: Resize needs constant scales or sizes")
    sc = [float(np.float32(s)) for s in scales]
    return tuple(dim(np.floor(d * s)) for d, s in zip(in_shape, sc)), sc


class ResizeModes(TypedDict):
    mode: str
    coordinate_transformation_mode: str
    nearest_mode: str


def resize_modes(node: Node) -> ResizeModes:
    a = node.attrs
    return {"mode": a.get("mode", "nearest"),
            "coordinate_transformation_mode": a.get("coordinate_transformation_mode", "half_pixel"),
            "nearest_mode": a.get("nearest_mode", "round_prefer_floor")}


@op("Resize", infer=lambda node, shapes, consts: [resize_args(node, shapes[0], consts)[0]])
def _run_resize(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    shape, scales = resize_args(node, x[0].shape, list(x))
    if scales is not None:
        return [ops.resize(x[0], scales=scales, **resize_modes(node))]
    return [ops.resize(x[0], sizes=shape, **resize_modes(node))]


# -- matrix products and normalisation ------------------------------------------------------------------------


def _infer_matmul(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    a, b = shapes[:2]  # a fused bias may follow as a third input
    return [(*broadcast_shape(a[:-2], b[:-2]), a[-2], b[-1])]


@op("MatMul", infer=_infer_matmul)
def _run_matmul(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    y = ops.matmul(x[0], x[1])
    if len(x) > 2:  # fused bias (MatMul + Add on the last axis)
        y = y + x[2]
    a = node.attrs
    y = ops.apply_activation(y, a.get("activation", "none"), a.get("act_alpha", 0.0), a.get("act_beta", 0.0))
    return [y.astype(np.float32, copy=False)]


def softmax_axis(node: Node, rank: int) -> int:
    return _norm_axis(int(node.attrs.get("axis", -1)), rank)


@op("Softmax", infer=same_shape)
def _run_softmax(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [ops.softmax(x[0], axis=softmax_axis(node, x[0].ndim))]


def reduce_axes(node: Node, rank: int) -> list[int]:
    return sorted(_norm_axis(a, rank) for a in node.attrs.get("axes", range(rank)))


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


# -- views ------------------------------------------------------------------------------------------------------

VIEW_OPS = ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity")  # what as_views() turns into "View"


@op("View", infer=lambda node, shapes, consts: [tuple(node.attrs["shape"])])
def _run_view(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    """The same data seen with another shape: a Vulkan plan aliases the storage instead of copying."""
    return [x[0].reshape(node.attrs["shape"])]
