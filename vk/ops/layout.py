"""ONNX data-movement ops: Concat, Slice, Transpose. Results may be views of the input."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_INT_MAX = (2**31 - 1, 2**63 - 1)


def concat(xs: Sequence[np.ndarray], axis: int) -> np.ndarray:
    """ONNX Concat: join along ``axis`` (negative counts from the end); other dims must match."""
    if not xs:
        raise ValueError("concat of no tensors")
    return np.concatenate([np.asarray(t) for t in xs], axis=axis)


def _slice_bounds(start: int, end: int, step: int, dim: int) -> slice:
    """ONNX Slice index clamping for one axis (handles negatives, INT_MAX / INT64_MIN, step < 0)."""
    if step == 0:
        raise ValueError("slice step must be non-zero")
    if end in _INT_MAX:  # onnxruntime: "slice to the end" in the step's direction (numpy None)
        end = dim if step > 0 else -dim - 1
    start += dim if start < 0 else 0
    end += dim if end < 0 else 0
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


def slice_(
    x: np.ndarray,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
) -> np.ndarray:
    """ONNX Slice (opset 13): x[starts:ends:steps] on ``axes`` (default 0..len(starts)-1).

    Negative starts/ends add dim; then for step > 0 clamp to [0, dim], for step < 0 start to
    [0, dim-1] and end to [-1, dim-1] (-1 meaning "before index 0"). As in onnxruntime, an end of
    INT32_MAX / INT64_MAX means "through the last element in the step direction" even for step < 0
    (the spec's literal clamping, and onnx shape inference, would give an empty slice there).
    """
    n = len(starts)
    axes = list(range(n)) if axes is None else [int(a) + x.ndim if int(a) < 0 else int(a) for a in axes]
    steps = [1] * n if steps is None else list(steps)
    if not len(ends) == len(axes) == len(steps) == n or len(set(axes)) != n:
        raise ValueError(f"slice: bad starts {starts} ends {ends} axes {axes} steps {steps}")
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        if not 0 <= a < x.ndim:
            raise ValueError(f"slice axis {a} out of range for rank {x.ndim}")
        index[a] = _slice_bounds(int(s), int(e), int(st), x.shape[a])
    return x[tuple(index)]


def transpose(x: np.ndarray, perm: Sequence[int] | None = None) -> np.ndarray:
    """ONNX Transpose: out.shape[i] = x.shape[perm[i]]; default perm reverses the axes."""
    return np.transpose(x, None if perm is None else tuple(int(p) for p in perm))
