"""attention.comp (SVTR's multi-head self-attention over a fused q/k/v tensor, one dispatch) against NumPy on
fresh random inputs with poisoned outputs, in both storage precisions, with and without q's addend, at lengths
where the second product's tile is whole and where it is sliced."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, fresh_rng, poisoned, rel_err, release, run
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.attention import MAX_T, queries_per_group, record_attention, shared_sizes
from vkocr.engine.kernels.matmul import pick_tile
from vkocr.engine.recorder import Recorder

# (N, T, heads, D): rec's 8 heads of 15 at 40 positions, a batch, and T = 200 over two heads, where the second
# product ran on the sliced tile (few workgroups, a deep K)
SHAPES = [(1, 40, 8, 15), (3, 17, 2, 7), (1, 200, 2, 15), (2, 2, 1, 64)]


def reference(qkv: np.ndarray, scale: float, add: float | None, dtype: type) -> np.ndarray:
    """In float64, q', the scores and the weights rounded to the storage dtype as the unfused nodes stored them."""
    def stored(a: np.ndarray) -> np.ndarray:
        return a.astype(dtype).astype(np.float64)

    q, k, v = qkv.astype(np.float64).transpose(2, 0, 3, 1, 4)
    q = stored(q * float(dtype(scale)))
    if add is not None:
        q = stored(q + float(dtype(add)))
    s = stored(q @ k.transpose(0, 1, 3, 2))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = stored(e / e.sum(axis=-1, keepdims=True))
    return (p @ v).transpose(0, 2, 1, 3).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("add", [None, 0.0, 0.125])
@pytest.mark.parametrize("shape", SHAPES)
def test_attention_matches_numpy(device: Device, shape: tuple[int, int, int, int], add: float | None,
                                 dtype: type) -> None:
    rng, seed = fresh_rng()
    n, t, heads, d = shape
    qkv_np = rng.uniform(-2, 2, (n, t, 3, heads, d)).astype(dtype)
    scale = float(d) ** -0.5
    qkv, out = device.upload(qkv_np), poisoned(device, (n, t, heads, d), dtype)
    try:
        run(device, lambda rec: record_attention(rec, qkv, out, scale, add))
        got = device.download(out)
    finally:
        release(device, qkv, out)
    err = rel_err(got, reference(qkv_np, scale, add, dtype))
    assert err <= TOLERANCES[np.dtype(dtype)], f"{shape} add={add} {dtype}: rel error {err:.3g}; seed {seed}"


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", SHAPES)
def test_rows_sharing_a_workgroup_change_no_bit(device: Device, shape: tuple[int, int, int, int],
                                                 dtype: type) -> None:
    """Several query rows per workgroup (sharing the staged k and v) give one row's answer bit for bit: each row
    keeps its lanes, its sums' order and its tree. T = 17 and 40 leave rows past T in the last workgroup."""
    n, t, heads, d = shape
    rng, seed = fresh_rng()
    qkv_np = rng.uniform(-2, 2, (n, t, 3, heads, d)).astype(dtype)
    qkv = device.upload(qkv_np)
    outs = {q: poisoned(device, (n, t, heads, d), dtype) for q in {1, queries_per_group(t)}}
    try:
        for q, out in outs.items():
            run(device, lambda rec, q=q, out=out: record_attention(rec, qkv, out, d ** -0.5, 0.125, queries=q))
        got = {q: device.download(out) for q, out in outs.items()}
    finally:
        release(device, qkv, *outs.values())
    assert t > 64 or len(got) == 2  # short rows do share a workgroup
    first, *rest = got.values()
    for other in rest:
        assert np.array_equal(first.view(np.uint8), other.view(np.uint8)), f"{shape} {dtype}: seed {seed}"


def test_the_long_case_takes_the_sliced_sums() -> None:
    assert pick_tile(200, 15, 2, None, 200).slices > 1  # (else SHAPES misses the sliced chains)
    assert pick_tile(40, 15, 8, None, 40).slices == 1


def test_attention_refuses_what_it_cannot_hold(device: Device) -> None:
    for shape in [(1, 1, 3, 2, 4), (1, MAX_T + 1, 3, 1, 4), (1, 4, 2, 2, 4)]:
        qkv = device.upload(np.ones(shape, np.float32))
        out = device.upload(np.ones((1, shape[1], shape[3], 4), np.float32))
        try:
            with pytest.raises(KernelArgumentError, match="attention"), Recorder(device) as rec:
                record_attention(rec, qkv, out, 0.5)
        finally:
            release(device, qkv, out)


def test_shapes_cover_staged_and_unstaged_k_and_v() -> None:
    """rec's shape and the small odd one stage k and v in shared memory; the long and the wide one read them from
    qkv: SHAPES runs both of attention.comp's paths."""
    staged = {shape: shared_sizes(shape[1], shape[3])[1] > 0 for shape in SHAPES}
    assert staged == {(1, 40, 8, 15): True, (3, 17, 2, 7): True, (1, 200, 2, 15): False, (2, 2, 1, 64): False}
    assert shared_sizes(40, 15) == (64, 960)
