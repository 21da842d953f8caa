"""Shape and layout ops (Shape, Reshape, Squeeze, Unsqueeze, Flatten, Concat, Slice, Gather, Transpose, Resize)
and the View that the plan's passes make of the reshaping ones: their shapes, their NumPy execution, and the
argument helpers (`slice_args`, `resize_args`, `transpose_perm`…) that the Vulkan lowering reads too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypedDict

import numpy as np

from vkocr.engine import ops
from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.opset_registry import Shape, norm_axis, op
from vkocr.engine.kernels.layout import slice_output_shape
from vkocr.engine.symbolic import dim


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
    return sorted(norm_axis(a, len(shape)) for a in axes)


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
    axes = sorted(norm_axis(a, rank) for a in axes)
    dims = list(shapes[0])
    for a in axes:
        dims.insert(a, 1)
    return [tuple(dims)]


@op("Unsqueeze", infer=_infer_unsqueeze)
def _run_unsqueeze(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [x[0].reshape(_infer_unsqueeze(node, [x[0].shape], list(x))[0])]


def _infer_flatten(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    axis = norm_axis(int(node.attrs.get("axis", 1)), len(shapes[0]))
    return [(math.prod(shapes[0][:axis]), math.prod(shapes[0][axis:]))]


@op("Flatten", infer=_infer_flatten)
def _run_flatten(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    return [x[0].reshape(_infer_flatten(node, [x[0].shape], list(x))[0])]


def _infer_concat(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    axis = norm_axis(int(node.attrs["axis"]), len(shapes[0]))
    out = list(shapes[0])
    up = int(node.attrs.get("upsample", [1])[0])
    if up != 1:
        out[2:] = [d * up for d in out[2:]]
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


@op("Concat", infer=_infer_concat)
def _run_concat(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    """A `pool_first` attribute (map_fusion.fuse_pool_concat): the first input is the MaxPool's it replaced;
    `upsample` (map_fusion.fuse_upsample_concat): input i is a nearest Resize's input, upsampled by the i-th
    factor (each element repeated on both axes, which is what that Resize computed)."""
    parts = list(x)
    pool = node.attrs.get("pool_first")
    if pool is not None:
        parts[0] = ops.max_pool2d(parts[0], kernel=tuple(pool["kernel_shape"]), strides=(1, 1),
                                  pads=tuple(pool["pads"]), ceil_mode=False)
    for i, up in enumerate(node.attrs.get("upsample", ())):
        if up != 1:
            parts[i] = parts[i].repeat(up, axis=2).repeat(up, axis=3)
    return [np.concatenate(parts, axis=int(node.attrs["axis"]))]


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
    axis = norm_axis(int(node.attrs.get("axis", 0)), len(shapes[0]))
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
        y = ops.resize(x[0], scales=scales, **resize_modes(node))
    else:
        y = ops.resize(x[0], sizes=shape, **resize_modes(node))
    # a fifth input: the Add that passes.fuse_resize_add folded in, computed as the Add node computed it
    return [y + x[4] if len(x) > 4 else y]


# -- views ------------------------------------------------------------------------------------------------------

VIEW_OPS = ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity")  # what as_views() turns into "View"


@op("View", infer=lambda node, shapes, consts: [tuple(node.attrs["shape"])])
def _run_view(node: Node, x: list[np.ndarray]) -> list[np.ndarray]:
    """The same data seen with another shape: a Vulkan plan aliases the storage instead of copying."""
    return [x[0].reshape(node.attrs["shape"])]
