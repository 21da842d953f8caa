"""Multi-head self-attention over a fused q/k/v tensor in one dispatch: shaders/attention.comp.

SVTR's attention (PP-OCR's recognisers) runs as eleven nodes once exported: the q/k/v tensor transposed and
sliced three ways, q scaled (and offset), k transposed, a MatMul, a Softmax, a MatMul and a transpose back, each a
dispatch behind a barrier, on tensors of a few kilobytes. shape_fusion.fuse_attention makes them one Attention
node; this records it, a workgroup per `queries_per_group` query rows, summing as gemm.comp and softmax.comp did
(the second product's tile comes from the same `pick_tile`), so the answer is the eleven nodes' own.
"""

from __future__ import annotations

import numpy as np

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import FLOAT16, check_groups, pack, power_of_two_at_least, require_shape, storage
from vkocr.engine.kernels.matmul import pick_tile
from vkocr.engine.kernels.reduce import row_local_size
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

ATTENTION = KernelDef("attention", ("r", "w"), 24)  # qkv, out
MAX_T = 2048  # positions a row holds in shared memory (attention.comp's ROWS at most)
MAX_D = 64  # attention.comp's MAX_D: a head's width
MIN_ROWS = 64
# k and v values of a head staged in shared memory (attention.comp's KV), 16 KiB for both. Staged, rec 16's two
# attentions took 31.8 and 33.3 µs against 39.3 and 39.5 on an H100 (fp32; in-model A/B,
# benchmarks/2026-12-07-h100-ab-session40-rows-attn.json): each invocation had waited on its loads one by one.
MAX_STAGED = 2048
# Invocations per workgroup: each query row keeps softmax.comp's workgroup for a row of T (row_local_size), and a
# workgroup takes as many rows as fit this many, so that they share one staging of the head's k and v. (One row
# per workgroup: rec 16's attentions staged each head's k and v 40 times, at 64 invocations a workgroup.)
GROUP_INVOCATIONS = 256


def fits(t: int, d: int) -> bool:
    """Whether attention.comp computes T positions of D-wide heads as the unfused nodes did: T ≥ 2 (at T = 1 the
    products went to gemv.comp, which sums in another order) and within its shared memory (T may be symbolic:
    the comparisons are guards of the shape class)."""
    return 2 <= t <= MAX_T and 1 <= d <= MAX_D


def shared_sizes(t: int, d: int) -> tuple[int, int]:
    """(ROWS, KV) of attention.comp for T positions of D-wide heads: the row's positions rounded up to a power of
    two (so that a few pipelines serve every T), and the k and v values staged per head, ROWS · D (0: more than
    MAX_STAGED, read from qkv). D comes from the weights: only ROWS splits shape classes."""
    rows = power_of_two_at_least(t, MIN_ROWS)
    return rows, rows * d if rows * d <= MAX_STAGED else 0


def queries_per_group(t: int, limit: int = GROUP_INVOCATIONS) -> int:
    """Query rows per workgroup for T positions (attention.comp's QUERIES) in workgroups of at most `limit`
    invocations (T may be symbolic: row_local_size's comparisons are guards of the shape class)."""
    return max(1, min(limit, GROUP_INVOCATIONS) // row_local_size(t))


def record_attention(rec: Recorder, qkv: Tensor, out: Tensor, scale: float, add: float | None = None, *,
                     queries: int | None = None) -> None:
    """out[n, t, h, :] = softmax((q_t · scale + add) · kᵀ) · v for qkv (N, T, 3, H, D) (q, k, v along axis 2) and
    out (N, T, H, D); float32 or float16 storage, computed in float32, q, the scores and the weights rounded to
    the storage type as the unfused nodes stored them. `queries` forces the query rows per workgroup (tests)."""
    kernel = storage(ATTENTION, qkv, out)
    if len(qkv.shape) != 5 or qkv.shape[2] != 3:
        raise KernelArgumentError(f"attention takes q, k and v as (N, T, 3, heads, D), not {tuple(qkv.shape)}")
    n, t, _, heads, d = qkv.shape
    require_shape(out, (n, t, heads, d), "attention output")
    if not fits(t, d):
        raise KernelArgumentError(f"attention holds 2 to {MAX_T} positions of heads at most {MAX_D} wide, not "
                                  f"{t} of {d}")
    stored = np.float16 if qkv.dtype == FLOAT16 else np.float32  # the constants, as the Mul and Add stored them
    tile = pick_tile(t, d, n * heads, None, t)  # the tile record_matmul gives the second product
    steps = -(-t // tile.bk)  # BK-deep steps along K = T, dealt to the slices as gemm_tile.glsl deals them
    slice_k = -(-steps // tile.slices) * tile.bk
    limit = rec.device.info.max_workgroup_invocations
    if queries is None:
        queries = queries_per_group(t, limit)
    elif not 1 <= queries <= min(limit, GROUP_INVOCATIONS) // row_local_size(t):
        raise KernelArgumentError(f"attention: {queries} query rows of {row_local_size(t)} invocations pass a "
                                  f"workgroup of {min(limit, GROUP_INVOCATIONS)}")
    groups = (-(-t // queries), heads, n)
    check_groups(rec, groups, "attention")
    pipeline = rec.device.pipeline(kernel, (row_local_size(t) * queries, 1, 1, tile.slices, int(add is not None),
                                            *shared_sizes(t, d), queries))
    push = pack("4I2f", t, heads, d, slice_k, float(stored(scale)), float(stored(add if add is not None else 0.0)))
    rec.dispatch(pipeline, [qkv.view, out.view], push, groups, label="attention")
