"""Slice and Transpose as strided copies of elements (shaders/copy_strided.comp); Concat as one dispatch per
four inputs (shaders/concat.comp).

A strided copy is an index space (≤ 6 axes after merging), a signed element stride per axis into the input,
one into the output, and a start offset in each (all in elements, so they hold for any element size);
float32 and int32 tensors share the 32-bit word pipeline, float16 has a 16-bit one (copy_strided.fp16).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import (
    FLAT_LOCAL,
    FLOAT16,
    MAX_GROUPS_X,
    PRECISIONS,
    flat_groups,
    pack,
    padded,
    require_shape,
)
from vkocr.engine.pipeline import KernelDef, Pipeline
from vkocr.engine.recorder import Recorder
from vkocr.engine.symbolic import dim
from vkocr.engine.tensor import Tensor

COPY_STRIDED = KernelDef("copy_strided", ("r", "w"), 88)
CONCAT = KernelDef("concat", ("r", "r", "r", "r", "w"), 48)  # four inputs (the spare ones bound to the first), out
CONCAT_INPUTS = 4
COPY_VEC4 = KernelDef("copy_vec4", ("r", "w"), 4)
MAX_RANK = 6
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Row-major element strides."""
    strides, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = acc
        acc *= shape[d]
    return strides


def merge_axes(
    shape: Sequence[int], in_strides: Sequence[int], out_strides: Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    """Drop size-1 axes and fuse each axis into the one before it where both sides stay linear across them.

    A contiguous copy collapses to rank 1; NCHW → NHWC becomes (N, H*W, C).
    """
    dims: list[int] = []
    ins: list[int] = []
    outs: list[int] = []
    for size, si, so in zip(shape, in_strides, out_strides):
        if size == 1:
            continue
        if dims and ins[-1] == si * size and outs[-1] == so * size:
            dims[-1] *= size
            ins[-1], outs[-1] = si, so
        else:
            dims.append(size)
            ins.append(si)
            outs.append(so)
    return dims or [1], ins or [0], outs or [0]


def copy_kernel(*tensors: Tensor) -> KernelDef:
    """The strided copy for the one dtype the tensors share: 32-bit words for float32 and int32, 16-bit
    elements for float16 (the element size is all that matters: a copy converts nothing)."""
    dtypes = {t.dtype.str for t in tensors}
    dtype = tensors[0].dtype
    if len(dtypes) != 1 or (dtype.itemsize != 4 and dtype != FLOAT16):
        raise KernelArgumentError(f"strided copy needs one 32-bit dtype or float16 in all tensors, "
                                  f"got {sorted(dtypes)}")
    return COPY_STRIDED.at(PRECISIONS[FLOAT16]) if dtype == FLOAT16 else COPY_STRIDED


def record_copy_strided(
    rec: Recorder,
    x: Tensor,
    out: Tensor,
    shape: Sequence[int],
    in_strides: Sequence[int],
    out_strides: Sequence[int],
    in_offset: int = 0,
    out_offset: int = 0,
    label: str = "copy_strided",
) -> None:
    """out[out_offset + Σ i·out_strides] = x[in_offset + Σ i·in_strides] for every index i of `shape` (offsets
    and strides in elements)."""
    kernel = copy_kernel(x, out)
    n = 1
    for size in shape:
        n *= size
    if n == 0:
        return
    dims, ins, outs = merge_axes(shape, in_strides, out_strides)
    if len(dims) > MAX_RANK:
        raise KernelArgumentError(f"{label}: index space of rank {len(dims)} > {MAX_RANK} after merging axes")
    if x.numel > INT32_MAX or out.numel > INT32_MAX:
        raise KernelArgumentError(f"{label}: tensors over {INT32_MAX} elements exceed 32-bit indexing")
    push = pack("IIiI6I6i6I", n, len(dims), in_offset, out_offset, *padded(dims, MAX_RANK, 1),
                *padded(ins, MAX_RANK), *padded(outs, MAX_RANK))
    pipeline = rec.device.pipeline(kernel, (FLAT_LOCAL, 1, 1))
    rec.dispatch(pipeline, [x.view, out.view], push, flat_groups(n), label=label)


def record_copy(rec: Recorder, x: Tensor, out: Tensor) -> None:
    """out = x for contiguous tensors of the same size: 16 bytes per invocation when the size allows (any
    dtype, float16 included: copy_vec4 moves bytes, 8 float16 elements a uvec4), else the strided copy (one
    dtype of 4 bytes, or float16)."""
    if x.nbytes != out.nbytes:
        raise KernelArgumentError(f"copy of {x.nbytes} B into {out.nbytes} B")
    if x.nbytes % 16:
        record_copy_strided(rec, x, out, [x.numel], [1], [1], label="copy")
        return
    n4 = x.nbytes // 16
    pipeline = rec.device.pipeline(COPY_VEC4, (FLAT_LOCAL, 1, 1))
    rec.dispatch(pipeline, [x.view, out.view], pack("I", n4), flat_groups(n4), label="copy")


def normalize_axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        raise KernelArgumentError(f"{what}: axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def record_concat(rec: Recorder, xs: Sequence[Tensor], out: Tensor, axis: int,
                  pool_first: tuple[int, int, int, int] | None = None,
                  upsample: Sequence[int] | None = None) -> None:
    """ONNX Concat along `axis` (negative counts from the end): one dispatch of concat.comp per four inputs,
    which writes their slab of the output (so no barrier separates the parts, as one copy per input into the
    same tensor needed). Two fusions, NCHW floats concatenated on channels only:
    - `pool_first` (kh, kw, pad_top, pad_left): the first input is a MaxPool's input, pooled on the way at
      stride 1 with pads that keep its size (a network stem's Concat(MaxPool(a), b), the pooled map never
      stored);
    - `upsample`, a factor per input: an input with a factor u > 1 is a nearest Resize's input, its map u times
      smaller on both axes, gathered on the way at floor(y / u) (an FPN's Concat of upsampled maps)."""
    if not xs:
        raise KernelArgumentError("concat of no tensors")
    copy_kernel(*xs, out)
    rank = len(out.shape)
    axis = normalize_axis(axis, rank, "concat")
    ups = [1] * len(xs) if upsample is None else [int(u) for u in upsample]
    fused = pool_first is not None or any(u != 1 for u in ups)
    if fused and (rank != 4 or axis != 1 or xs[0].dtype.kind != "f"):
        raise KernelArgumentError(f"concat with a pooled or upsampled input takes NCHW floats on axis 1, not "
                                  f"{out.shape} ({out.dtype}) on axis {axis}")
    if pool_first is not None:
        kh, kw, pad_top, pad_left = pool_first
        if not (kh >= 1 and kw >= 1 and 0 <= pad_top < kh and 0 <= pad_left < kw):
            raise KernelArgumentError(f"concat: a {kh}×{kw} pooling window with pads ({pad_top}, {pad_left}) "
                                      "does not keep the map's size at stride 1")
        if ups[0] != 1:
            raise KernelArgumentError("concat: the first input is pooled or upsampled, not both")
    if len(ups) != len(xs) or any(u < 1 for u in ups):
        raise KernelArgumentError(f"concat: {len(xs)} inputs need as many upsampling factors ≥ 1, not {ups}")
    for x, u in zip(xs, ups):
        if len(x.shape) != rank or any(x.shape[d] * (u if d >= 2 else 1) != out.shape[d]
                                       for d in range(rank) if d != axis):
            smaller = f" upsampled by {u}" if u != 1 else ""
            raise KernelArgumentError(f"concat on axis {axis}: input {x.shape}{smaller} does not fit {out.shape}")
    total = sum(x.shape[axis] for x in xs)
    require_shape(out, (*out.shape[:axis], total, *out.shape[axis + 1:]), "concat output")
    if out.numel > INT32_MAX:
        raise KernelArgumentError(f"concat: an output of {out.numel} elements exceeds 32-bit indexing")
    outer, inner = math.prod(out.shape[:axis]), math.prod(out.shape[axis + 1:])
    parts = [(x, u) for x, u in zip(xs, ups) if x.shape[axis] != 0]  # an empty input holds nothing to bind
    if not parts or outer * inner == 0:
        return
    kernel = CONCAT.at(PRECISIONS[FLOAT16]) if out.dtype == FLOAT16 else CONCAT
    pooled = pool_first if parts[0][0] is xs[0] else None  # (an empty first input is not bound)
    # NCHW on channels: a grid of planes, (plane blocks, channels of the slab, images), no division per element.
    # On an H100 (benchmarks/2026-12-07-h100-ab-session40.json) det's stem concat took 46.5 µs against 53.1, its
    # neck's 14.4 against 18.6, rec 16's stem concat 28.8 against 33.5 (fp32).
    planes = rank == 4 and axis == 1 and total <= MAX_GROUPS_X and outer <= MAX_GROUPS_X
    plane_groups = -(-inner // FLAT_LOCAL)
    if planes and plane_groups > MAX_GROUPS_X:
        plane_groups = MAX_GROUPS_X  # each invocation strides over the rest of its plane
    first = 0
    pipelines: dict[tuple[int, ...], Pipeline] = {}  # per (pool window, factors, planes)
    for start in range(0, len(parts), CONCAT_INPUTS):  # more than four: a slab of the axis per four
        chunk = [x for x, _ in parts[start:start + CONCAT_INPUTS]]
        factors = tuple(padded([u for _, u in parts[start:start + CONCAT_INPUTS]], CONCAT_INPUTS, 1))
        lengths = [x.shape[axis] for x in chunk]
        count = sum(lengths)
        n = outer * count * inner
        views = [x.view for x in chunk] + [chunk[0].view] * (CONCAT_INPUTS - len(chunk)) + [out.view]
        window = pooled[:2] if start == 0 and pooled is not None else (0, 0)
        key = (*window, *factors, int(planes))
        if key not in pipelines:
            pipelines[key] = rec.device.pipeline(kernel, (FLAT_LOCAL, 1, 1, *key))
        pads = pooled[2:] if start == 0 and pooled is not None else (0, 0)
        shape = (out.shape[2], out.shape[3]) if window != (0, 0) or factors != (1,) * CONCAT_INPUTS else (0, 0)
        push = pack("8I4i", n, inner, total, first, count, *padded(lengths[:3], 3), *shape, *pads)
        groups = (plane_groups, count, outer) if planes else flat_groups(n)
        rec.dispatch(pipelines[key], views, push, groups, label="concat")
        first += count


def slice_axis(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """ONNX Slice clamping of one axis: (first index, element count).

    Negative start/end count from the end; step > 0 clamps start and end to [0, dim], step < 0 clamps
    start to [0, dim-1] and end to [-1, dim-1]. An end of INT32/INT64 max means "to the end in the step's
    direction" (as onnxruntime and vkocr.engine.ops.layout.slice_ read it), also for negative steps.
    """
    if step == 0:
        raise KernelArgumentError("slice step must be non-zero")
    if end in (INT32_MAX, INT64_MAX):
        end = dim if step > 0 else -1
    elif end < 0:
        end += dim
    start += dim if start < 0 else 0
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return start, max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return start, max(0, -(-(start - end) // -step))


def slice_plan(
    shape: Sequence[int],
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
) -> list[tuple[int, int, int]]:
    """(first index, step, count) for every axis of `shape`; axes not sliced keep (0, 1, dim)."""
    rank, n = len(shape), len(starts)
    axes = list(range(n)) if axes is None else [normalize_axis(int(a), rank, "slice") for a in axes]
    steps = [1] * n if steps is None else [int(s) for s in steps]
    if not len(ends) == len(axes) == len(steps) == n:
        raise KernelArgumentError(f"slice: unequal lengths of starts {starts}, ends {ends}, axes, steps")
    if len(set(axes)) != n or n > rank:
        raise KernelArgumentError(f"slice: axes {axes} repeat or exceed rank {rank}")
    plan = [(0, 1, dim) for dim in shape]
    for start, end, axis, step in zip(starts, ends, axes, steps):
        first, count = slice_axis(dim(start), dim(end), step, shape[axis])
        plan[axis] = (first, step, count)
    return plan


def slice_output_shape(
    shape: Sequence[int],
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """Shape of ONNX Slice(x) for an input of `shape`."""
    return tuple(count for _, _, count in slice_plan(shape, starts, ends, axes, steps))


def record_slice(
    rec: Recorder,
    x: Tensor,
    out: Tensor,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
) -> None:
    """ONNX Slice (opset 13): out = x[starts:ends:steps] on `axes` (default 0..len(starts)-1)."""
    copy_kernel(x, out)
    plan = slice_plan(x.shape, starts, ends, axes, steps)
    require_shape(out, tuple(count for _, _, count in plan), "slice output")
    x_strides = contiguous_strides(x.shape)
    in_offset = sum(first * stride for (first, _, count), stride in zip(plan, x_strides) if count != 0)
    in_strides = [step * stride for (_, step, _), stride in zip(plan, x_strides)]
    record_copy_strided(rec, x, out, out.shape, in_strides, contiguous_strides(out.shape),
                        in_offset=in_offset, label="slice")


def record_transpose(rec: Recorder, x: Tensor, out: Tensor, perm: Sequence[int] | None = None) -> None:
    """ONNX Transpose: out.shape[i] = x.shape[perm[i]]; no perm reverses the axes."""
    rank = len(x.shape)
    perm = list(range(rank - 1, -1, -1)) if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise KernelArgumentError(f"transpose: perm {perm} is not a permutation of 0..{rank - 1}")
    copy_kernel(x, out)
    require_shape(out, tuple(x.shape[p] for p in perm), "transpose output")
    x_strides = contiguous_strides(x.shape)
    record_copy_strided(rec, x, out, out.shape, [x_strides[p] for p in perm], contiguous_strides(out.shape),
                        label="transpose")
