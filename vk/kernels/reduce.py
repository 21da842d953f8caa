"""Row reductions: softmax, layer norm, reduce-mean, argmax (shaders/softmax.comp, layernorm.comp,
reduce_mean.comp, argmax.comp).

The host views the tensor as [outer, length, inner] around the reduced (contiguous) axes; each shader runs one
workgroup per (outer, inner) row and reduces it in shared memory, or, for short rows over a long inner axis,
one invocation per row (softmax, reduce-mean, argmax).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import (
    FLAT_LOCAL,
    flat_groups,
    pack,
    power_of_two_at_least,
    require_float32,
    require_shape,
    storage,
)
from vkocr.engine.memory import BufferView
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

SOFTMAX = KernelDef("softmax", ("r", "w"), 12)
LAYER_NORM = KernelDef("layernorm", ("r", "r", "r", "w"), 12)
REDUCE_MEAN = KernelDef("reduce_mean", ("r", "w"), 12)
ARGMAX = KernelDef("argmax", ("r", "w", "w"), 12)
MIN_ROW_LOCAL, MAX_ROW_LOCAL = 32, 256  # the shaders' shared arrays hold 256
SOFTMAX_MAX_CACHE = 32  # softmax.comp MAX_CACHE: rows up to 256 * 32 = 8192 are read once


def row_local_size(length: int) -> int:
    """Workgroup size for one row of `length`: a power of two (the tree reduction halves it), one warp at
    least, 256 at most (longer rows are strided)."""
    return power_of_two_at_least(min(length, MAX_ROW_LOCAL), MIN_ROW_LOCAL)


# A mean over few long rows (an SE block's squeeze of a big map: det's 96 planes of 184 × 256) launches one
# workgroup per row on a GPU of more multiprocessors than rows; each invocation then waits on its loads ~46 times
# in a row. Such rows get the widest workgroup the mean shaders hold, so each multiprocessor keeps four times as
# many loads in flight. On an H100, in det 1×3×736×1024 (benchmarks/2026-12-07-h100-ab-session40.json): that
# squeeze took 9.1 µs against 23.4, the stem's ReduceMean 7.8 against 15.3, det 1.892 ms against 1.928 (fp32),
# rec 16's short rows unchanged.
WIDE_ROW_LOCAL = 1024  # global_avgpool.comp's and reduce_mean.comp's shared arrays hold this many
WIDE_MAX_ROWS, WIDE_MIN_LENGTH = 512, 8192


def mean_local_size(rows: int, length: int, max_invocations: int) -> int:
    """Workgroup size of a mean over `rows` rows of `length`: row_local_size, or WIDE_ROW_LOCAL (within the
    device's limit) for at most WIDE_MAX_ROWS rows of at least WIDE_MIN_LENGTH (comparisons: guards of the shape
    class when sizes are symbolic)."""
    if rows <= WIDE_MAX_ROWS and length >= WIDE_MIN_LENGTH:
        wide = MAX_ROW_LOCAL
        while wide * 2 <= min(WIDE_ROW_LOCAL, max_invocations):
            wide *= 2
        return wide
    return row_local_size(length)


def row_groups(rows: int) -> tuple[int, int, int]:
    """One workgroup per row, folded into grid y past 65535 rows (the shaders unfold it)."""
    return flat_groups(rows, 1)


def normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise KernelArgumentError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


def contiguous_axes(axes: Sequence[int] | None, rank: int) -> tuple[int, int]:
    """[first, last) of the reduced axes; None or empty means all (ONNX ReduceMean). They must be a block."""
    if not axes:
        return 0, rank
    norm = sorted(normalize_axis(int(a), rank) for a in axes)
    if len(set(norm)) != len(norm):
        raise KernelArgumentError(f"repeated axis in {tuple(axes)}")
    if norm[-1] - norm[0] + 1 != len(norm):
        raise KernelArgumentError(f"axes {tuple(axes)} are not contiguous (one block of axes is reduced)")
    return norm[0], norm[-1] + 1


def row_view(shape: Sequence[int], first: int, last: int) -> tuple[int, int, int]:
    """(outer, length, inner): products of the axes before, inside and after [first, last)."""
    return math.prod(shape[:first]), math.prod(shape[first:last]), math.prod(shape[last:])


def reduced_shape(shape: Sequence[int], first: int, last: int, keepdims: bool) -> tuple[int, ...]:
    kept = (1,) * (last - first) if keepdims else ()
    return (*shape[:first], *kept, *shape[last:])


def require_nonempty(t: Tensor, what: str) -> None:
    if t.numel == 0 or 0 in t.shape:
        raise KernelArgumentError(f"{what}: empty tensor {t.shape}")


def row_per_invocation(length: int, inner: int) -> bool:
    """Give each invocation a whole row when a warp of rows reads adjacent memory (inner ≥ 32) and the rows
    are short next to how many there are (inner ≥ 16 × length), so serial loops still fill the GPU."""
    return inner >= 32 and inner >= 16 * length


# Rows past the cache are read three times (max, sum, write), eight strided elements loaded together each time:
# rec 16's 640 rows of 18 710 took 67.8 µs against 87.6 one element at a time on an H100 (in-model A/B,
# benchmarks/2026-12-07-h100-ab-session40-rows-attn.json); argmax.comp's SOFTMAX reads them so too.
def softmax_cache(length: int) -> int:
    """Elements each invocation of a workgroup row keeps in registers (0: the row is too long, re-read it).

    A specialisation constant of softmax.comp (CACHE): ceil(length / workgroup size), which is 1 for every row
    up to 256 and then changes every 256. Found by comparisons rather than int(): under a trace each is a guard
    on the length's range, so a class holds every length of one CACHE and nothing escapes."""
    per_invocation = -(-length // row_local_size(length))
    for cache in range(1, SOFTMAX_MAX_CACHE + 1):
        if per_invocation <= cache:
            return cache
    return 0


def _dispatch_rows(rec: Recorder, kernel: KernelDef, views: list[BufferView], outer: int, length: int,
                   inner: int, label: str, row_constants: tuple[int, ...] = (),
                   flat_constants: tuple[int, ...] | None = None, wide: bool = False) -> None:
    """Softmax, reduce-mean, argmax: one workgroup per row, or one invocation per row (PER_INVOCATION).
    `row_constants` follow PER_INVOCATION in workgroup mode; per-invocation mode sets `flat_constants` there
    (default: as many zeros). `wide`: the shader holds WIDE_ROW_LOCAL invocations (mean_local_size)."""
    rows = outer * inner
    push = pack("III", rows, length, inner)
    if row_per_invocation(length, inner):
        flat = flat_constants if flat_constants is not None else tuple(0 for _ in row_constants)
        pipeline = rec.device.pipeline(kernel, (FLAT_LOCAL, 1, 1, 1, *flat))
        rec.dispatch(pipeline, views, push, flat_groups(rows), label=label)
    else:
        local = (mean_local_size(rows, length, rec.device.info.max_workgroup_invocations) if wide
                 else row_local_size(length))
        pipeline = rec.device.pipeline(kernel, (local, 1, 1, 0, *row_constants))
        rec.dispatch(pipeline, views, push, row_groups(rows), label=label)


def record_softmax(rec: Recorder, x: Tensor, out: Tensor, axis: int = -1) -> None:
    """ONNX Softmax-13 along one axis: exp(x - max) / sum(exp(x - max)); the max and the sum in float32
    whatever the storage."""
    kernel = storage(SOFTMAX, x, out)
    require_nonempty(x, "softmax")
    require_shape(out, x.shape, "softmax output")
    a = normalize_axis(axis, len(x.shape))
    outer, length, inner = row_view(x.shape, a, a + 1)
    cache = softmax_cache(length)
    _dispatch_rows(rec, kernel, [x.view, out.view], outer, length, inner, "softmax", (cache,))


def record_reduce_mean(rec: Recorder, x: Tensor, out: Tensor, axes: Sequence[int] | None,
                       keepdims: bool = True) -> None:
    """ONNX ReduceMean-13 over a contiguous block of axes (None or empty: all axes), summed in float32."""
    kernel = storage(REDUCE_MEAN, x, out)
    require_nonempty(x, "reduce_mean")
    first, last = contiguous_axes(axes, len(x.shape))
    require_shape(out, reduced_shape(x.shape, first, last, keepdims), "reduce_mean output")
    outer, length, inner = row_view(x.shape, first, last)
    _dispatch_rows(rec, kernel, [x.view, out.view], outer, length, inner, "reduce_mean", wide=True)


def record_argmax(rec: Recorder, x: Tensor, indices_out: Tensor, values_out: Tensor, axis: int = -1,
                  keepdims: bool = False, *, softmax: bool = False) -> None:
    """ONNX ArgMax (first index on ties) into an int32 tensor, and the maximum values alongside; `softmax`:
    of Softmax(x) along the same axis, bit for bit what record_softmax then record_argmax give (the same
    reductions in the same order), without the probabilities ever being written."""
    require_float32(x, values_out)
    if indices_out.dtype.str != "<i4":
        raise KernelArgumentError(f"argmax indices must be int32, got {indices_out.dtype}")
    require_nonempty(x, "argmax")
    a = normalize_axis(axis, len(x.shape))
    shape = reduced_shape(x.shape, a, a + 1, keepdims)
    require_shape(indices_out, shape, "argmax indices")
    require_shape(values_out, shape, "argmax values")
    outer, length, inner = row_view(x.shape, a, a + 1)
    _dispatch_rows(rec, ARGMAX, [x.view, indices_out.view, values_out.view], outer, length, inner,
                   "softmax_argmax" if softmax else "argmax", (int(softmax),), (int(softmax),))


def normalized_param_shape(t: Tensor, normalized: tuple[int, ...], what: str) -> None:
    """LayerNorm scale/bias: the normalised shape, optionally with fewer leading (size-1) axes."""
    def strip(s: Sequence[int]) -> tuple[int, ...]:
        s = tuple(s)
        while s and s[0] == 1:
            s = s[1:]
        return s

    if strip(t.shape) != strip(normalized):
        raise KernelArgumentError(f"layer norm {what}: expected shape {normalized}, got {t.shape}")


def record_layer_norm(rec: Recorder, x: Tensor, scale: Tensor, out: Tensor, bias: Tensor | None = None, *,
                      axis: int = -1, epsilon: float = 1e-5) -> None:
    """ONNX LayerNormalization-17 over axes axis..end: (x - mean) / sqrt(var + epsilon) * scale + bias; every
    tensor float32, or every one float16 (scale and bias too), the mean and variance in float32."""
    kernel = storage(LAYER_NORM, x, scale, out, bias)
    require_nonempty(x, "layer norm")
    require_shape(out, x.shape, "layer norm output")
    if not epsilon >= 0:
        raise KernelArgumentError(f"layer norm epsilon must be ≥ 0, got {epsilon}")
    a = normalize_axis(axis, len(x.shape))
    normalized = tuple(x.shape[a:])
    normalized_param_shape(scale, normalized, "scale")
    if bias is not None:
        normalized_param_shape(bias, normalized, "bias")
    outer, length, _ = row_view(x.shape, a, len(x.shape))
    pipeline = rec.device.pipeline(kernel, (row_local_size(length), 1, 1, int(bias is not None)))
    views = [x.view, scale.view, (bias if bias is not None else scale).view, out.view]
    push = pack("IIf", outer, length, float(epsilon))
    rec.dispatch(pipeline, views, push, row_groups(outer), label="layer_norm")
