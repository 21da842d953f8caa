"""softmax, layernorm, reduce_mean and argmax shaders against vkocr.engine.ops, fresh random inputs, outputs poisoned.

References run in float64 so the tolerance measures the kernel, not the reference's own float32 rounding.
Softmax, layer norm and reduce-mean cases also run with float16 storage: the float64 reference on the same float16
inputs, rounded once to float16 (the kernels' max, sums, mean and variance stay float32). Argmax stays float32.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, check, fresh_rng, poisoned, release, run, storage_ref
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.reduce import (
    WIDE_MAX_ROWS,
    WIDE_MIN_LENGTH,
    contiguous_axes,
    mean_local_size,
    record_argmax,
    record_layer_norm,
    record_reduce_mean,
    record_softmax,
    row_local_size,
    row_per_invocation,
    softmax_cache,
)
from vkocr.engine.ops.argmax import argmax_with_max
from vkocr.engine.ops.normalize import layer_norm, reduce_mean, softmax
from vkocr.engine.tensor import Tensor

VOCAB = 6625  # the recogniser's output classes
VOCAB_V6 = 18_710  # PP-OCRv6 rec's

# (shape, axis): 1-element axes, long rows, inner > 1, batch > 1, odd sizes
AXIS_CASES = [
    ((1,), 0), ((7,), -1), ((3, 1), -1), ((3, 1, 4), 1), ((2, 5), 0), ((4, 17), -1), ((2, 3, 257), 2),
    ((2, 40, VOCAB), -1), ((1, 80, VOCAB), 2), ((2, 3, 5, 7), 1), ((2, 300, 3), 1), ((5, 513), 1),
    ((70_000, 2), 1),
    ((2, 5, 40, 40), 1), ((3, 2, 33), 1), ((1, 1, 64), 1), ((2, 3, 70_000), 1),  # one invocation per row
    ((3, 9000), 1), ((2, 10, VOCAB_V6), 2),  # too long for softmax's register cache
]


def poisoned_any(device: Device, shape: tuple[int, ...], dtype: type = np.float32) -> Tensor:
    """harness.poisoned, also for 0-d outputs: Device.upload turns a 0-d array into shape (1,), so poison one
    element and view it as the scalar."""
    t = poisoned(device, shape or (1,), dtype)
    return Tensor(t.alloc, shape, t.dtype)


def uniform(shape: tuple[int, ...], dtype: type = np.float32) -> tuple[np.ndarray, int]:
    rng, seed = fresh_rng()
    return rng.uniform(-1, 1, shape).astype(dtype), seed


def softmax_case(device: Device, x_np: np.ndarray, axis: int, what: str, seed: int) -> None:
    """x_np in its storage dtype; the float64 softmax of exactly those values, rounded once to it."""
    dtype = x_np.dtype.type
    ref = storage_ref(softmax(x_np.astype(np.float64), axis), dtype)
    x, out = device.upload(x_np), poisoned(device, x_np.shape, dtype)
    run(device, lambda rec: record_softmax(rec, x, out, axis))
    check(device.download(out), ref, f"{what} {x_np.dtype}", seed, TOLERANCES[x_np.dtype])
    release(device, x, out)


@pytest.mark.parametrize(("shape", "axis"), AXIS_CASES)
def test_softmax(device: Device, shape: tuple[int, ...], axis: int) -> None:
    x_np, seed = uniform(shape)
    softmax_case(device, x_np, axis, f"softmax {shape} axis={axis}", seed)


@pytest.mark.parametrize(("shape", "axis"), AXIS_CASES)
def test_softmax_float16_storage(device: Device, shape: tuple[int, ...], axis: int) -> None:
    """(Rows of 18 710 put probabilities near 5e-5, below float16's smallest normal: rounded alike.)"""
    x_np, seed = uniform(shape, np.float16)
    softmax_case(device, x_np, axis, f"softmax {shape} axis={axis}", seed)


def test_softmax_is_stable_for_large_logits(device: Device) -> None:
    """exp(1000) overflows: only the max-subtracted form gives finite probabilities."""
    x_np, seed = uniform((3, 100))
    softmax_case(device, x_np * 50 + 1000, -1, "softmax of large logits", seed)


def test_softmax_is_stable_for_large_logits_float16_storage(device: Device) -> None:
    x_np, seed = uniform((3, 100))
    softmax_case(device, (x_np * 50 + 1000).astype(np.float16), -1, "softmax of large logits", seed)


LAYER_NORM_CASES = [((1,), 0), ((3, 1), -1), ((2, 25, 120), -1), ((4, 7, 9), 1), ((2, 3, 4, 5), -3), ((3, 384), -1),
                    ((2, VOCAB), 1), ((70_000, 3), -1)]


def layer_norm_case(device: Device, shape: tuple[int, ...], axis: int, with_bias: bool,
                    dtype: type = np.float32) -> None:
    x_np, seed = uniform(shape, dtype)
    rng, _ = fresh_rng()
    normalized = shape[axis % len(shape):]
    scale_np = rng.uniform(-1, 1, normalized).astype(dtype)  # scale and bias share the storage dtype
    bias_np = rng.uniform(-1, 1, normalized).astype(dtype) if with_bias else None
    ref = layer_norm(x_np.astype(np.float64), scale_np.astype(np.float64),
                     None if bias_np is None else bias_np.astype(np.float64), axis=axis, epsilon=1e-5)
    x, scale, out = device.upload(x_np), device.upload(scale_np), poisoned(device, shape, dtype)
    bias = device.upload(bias_np) if bias_np is not None else None
    run(device, lambda rec: record_layer_norm(rec, x, scale, out, bias, axis=axis, epsilon=1e-5))
    what = f"layer norm {shape} axis={axis} bias={with_bias} {np.dtype(dtype)}"
    check(device.download(out), storage_ref(ref, dtype), what, seed, TOLERANCES[np.dtype(dtype)])
    release(device, x, scale, out, *([bias] if bias is not None else []))


@pytest.mark.parametrize(("shape", "axis"), LAYER_NORM_CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm(device: Device, shape: tuple[int, ...], axis: int, with_bias: bool) -> None:
    layer_norm_case(device, shape, axis, with_bias)


@pytest.mark.parametrize(("shape", "axis"), LAYER_NORM_CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm_float16_storage(device: Device, shape: tuple[int, ...], axis: int, with_bias: bool) -> None:
    layer_norm_case(device, shape, axis, with_bias, np.float16)


def scale_without_leading_ones_case(device: Device, dtype: type) -> None:
    x_np, seed = uniform((2, 1, 33), dtype)
    scale_np = np.full((33,), 0.5, dtype)
    ref = storage_ref(layer_norm(x_np.astype(np.float64), scale_np.astype(np.float64), axis=1, epsilon=1e-3),
                      dtype)
    x, scale, out = device.upload(x_np), device.upload(scale_np), poisoned(device, x_np.shape, dtype)
    run(device, lambda rec: record_layer_norm(rec, x, scale, out, axis=1, epsilon=1e-3))
    check(device.download(out), ref, f"layer norm, scale (33,), normalised (1, 33) {np.dtype(dtype)}", seed,
          TOLERANCES[np.dtype(dtype)])
    release(device, x, scale, out)


def test_layer_norm_accepts_scale_without_leading_ones(device: Device) -> None:
    scale_without_leading_ones_case(device, np.float32)


def test_layer_norm_accepts_scale_without_leading_ones_float16_storage(device: Device) -> None:
    scale_without_leading_ones_case(device, np.float16)


REDUCE_MEAN_CASES = [
    ((1,), (0,)), ((5,), None), ((3, 4), ()), ((2, 3, 4, 5), (2, 3)), ((2, 3, 4, 5), (-1,)),
    ((2, 17, 9, 11), (1,)), ((2, 3, 4, 5), (1, 2)), ((3, 1, 5), (1,)), ((2, 3, 4, 5), (0, 1, 2)),
    ((1, 96, 40, 40), (2, 3)),
    ((2, VOCAB), (1,)), ((2, 1000, 3), (-2,)), ((1, 96, 40, 40), (1,)), ((2, 3, 5, 40), (1, 2)),
    ((1, 6, 92, 97), (2, 3)), ((2, 9000, 3), (1,)),  # few long rows: the widest workgroup (mean_local_size)
]


def reduce_mean_case(device: Device, shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdims: bool,
                     dtype: type = np.float32) -> None:
    x_np, seed = uniform(shape, dtype)
    ref = storage_ref(np.asarray(reduce_mean(x_np.astype(np.float64), axes, keepdims)), dtype)
    x, out = device.upload(x_np), poisoned_any(device, ref.shape, dtype)
    run(device, lambda rec: record_reduce_mean(rec, x, out, axes, keepdims))
    check(device.download(out), ref, f"reduce_mean {shape} axes={axes} keepdims={keepdims} {np.dtype(dtype)}",
          seed, TOLERANCES[np.dtype(dtype)])
    release(device, x, out)


@pytest.mark.parametrize(("shape", "axes"), REDUCE_MEAN_CASES)
@pytest.mark.parametrize("keepdims", [True, False])
def test_reduce_mean(device: Device, shape: tuple[int, ...], axes: tuple[int, ...] | None,
                     keepdims: bool) -> None:
    reduce_mean_case(device, shape, axes, keepdims)


@pytest.mark.parametrize(("shape", "axes"), REDUCE_MEAN_CASES)
@pytest.mark.parametrize("keepdims", [True, False])
def test_reduce_mean_float16_storage(device: Device, shape: tuple[int, ...], axes: tuple[int, ...] | None,
                                     keepdims: bool) -> None:
    reduce_mean_case(device, shape, axes, keepdims, np.float16)


def test_reductions_refuse_mixed_storage(device: Device) -> None:
    """One storage dtype per kernel: layer norm's scale and bias too."""
    x16, out16, out32 = (device.tensor((2, 4), dt) for dt in (np.float16, np.float16, np.float32))
    s16, s32 = device.tensor((4,), np.float16), device.tensor((4,))
    m32 = device.tensor((2, 1))
    for record in [
        lambda rec: record_softmax(rec, x16, out32, -1),
        lambda rec: record_reduce_mean(rec, x16, m32, (1,), True),
        lambda rec: record_layer_norm(rec, x16, s32, out16),
        lambda rec: record_layer_norm(rec, x16, s16, out16, s32),
    ]:
        with pytest.raises(KernelArgumentError, match="share one storage dtype"):
            run(device, record)
    release(device, x16, out16, out32, s16, s32, m32)


def distinct_values(shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """Uniform(-1, 1) with every value distinct, so the argmax is unique."""
    rng, seed = fresh_rng()
    n = int(np.prod(shape))
    x = rng.permutation(n).astype(np.float64) / max(n, 1) * 2 - 1 + rng.uniform(0, 1 / (4 * max(n, 1)), n)
    return x.astype(np.float32).reshape(shape), seed


def argmax_case(device: Device, x_np: np.ndarray, axis: int, keepdims: bool, seed: int) -> None:
    ref_idx, ref_val = argmax_with_max(x_np, axis, keepdims)
    x = device.upload(x_np)
    idx, val = poisoned_any(device, ref_idx.shape, np.int32), poisoned_any(device, ref_val.shape)
    run(device, lambda rec: record_argmax(rec, x, idx, val, axis, keepdims))
    got_idx = device.download(idx)
    assert got_idx.dtype == np.int32
    mismatches = np.argwhere(got_idx != ref_idx)
    where = f"argmax {x_np.shape} axis={axis}: indices differ at {mismatches[:5]}"
    assert not mismatches.size, f"{where}; seed {seed}"
    check(device.download(val), ref_val, f"argmax values {x_np.shape} axis={axis}", seed)
    release(device, x, idx, val)


@pytest.mark.parametrize(("shape", "axis"), AXIS_CASES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax(device: Device, shape: tuple[int, ...], axis: int, keepdims: bool) -> None:
    x_np, seed = distinct_values(shape)
    assert np.unique(x_np).size == x_np.size
    argmax_case(device, x_np, axis, keepdims, seed)


@pytest.mark.parametrize("length", [2, 5, 256, 257, 1000, VOCAB])
def test_argmax_returns_first_of_tied_maxima(device: Device, length: int) -> None:
    """Crafted rows: the maximum repeats at several positions (in different invocations' strides)."""
    rng, seed = fresh_rng()
    x_np = rng.uniform(-1, 0.5, (6, length)).astype(np.float32)
    for row in range(6):
        ties = rng.choice(length, size=min(length, 1 + row), replace=False)
        x_np[row, ties] = 0.75
    x_np[0, :] = 0.25  # a row that is all one value: index 0
    argmax_case(device, x_np, -1, False, seed)


def test_argmax_ties_along_a_channel_axis(device: Device) -> None:
    """The same on short rows over a long inner axis, which run one invocation per row."""
    rng, seed = fresh_rng()
    x_np = rng.uniform(-1, 0.5, (2, 6, 100)).astype(np.float32)
    x_np[:, [1, 4], ::2] = 0.75
    x_np[:, [0, 5], 1::3] = 0.9
    argmax_case(device, x_np, 1, True, seed)


def test_argmax_counts_nan_as_largest(device: Device) -> None:
    x_np, seed = distinct_values((3, 300))
    x_np[1, [17, 200]] = np.nan
    x = device.upload(x_np)
    idx, val = poisoned(device, (3,), np.int32), poisoned(device, (3,))
    run(device, lambda rec: record_argmax(rec, x, idx, val, -1))
    assert device.download(idx)[1] == 17, f"seed {seed}"
    assert np.isnan(device.download(val)[1])
    release(device, x, idx, val)


def softmax_argmax_case(device: Device, x_np: np.ndarray, axis: int, keepdims: bool, seed: int) -> None:
    """argmax(softmax=True) on logits: bit for bit Softmax then ArgMax on this device, and the float64 softmax's
    first maximum and its probability."""
    ref_idx, _ = argmax_with_max(x_np, axis, keepdims)
    probs64 = softmax(x_np.astype(np.float64), axis)
    ref_val = np.take_along_axis(probs64, np.expand_dims(ref_idx, axis) if not keepdims else ref_idx, axis)
    ref_val = ref_val if keepdims else np.squeeze(ref_val, axis)
    x, probs = device.upload(x_np), poisoned(device, x_np.shape)
    fused = poisoned_any(device, ref_idx.shape, np.int32), poisoned_any(device, ref_val.shape)
    apart = poisoned_any(device, ref_idx.shape, np.int32), poisoned_any(device, ref_val.shape)
    run(device, lambda rec: record_argmax(rec, x, *fused, axis, keepdims, softmax=True))
    run(device, lambda rec: record_softmax(rec, x, probs, axis))
    run(device, lambda rec: record_argmax(rec, probs, *apart, axis, keepdims))
    (got_idx, got_val), (sep_idx, sep_val) = ([device.download(t) for t in pair] for pair in (fused, apart))
    what = f"softmax argmax {x_np.shape} axis={axis}"
    wrong = np.argwhere(got_idx != ref_idx)[:5]
    assert not wrong.size, f"{what}: indices differ at {wrong}; seed {seed}"
    check(got_val, ref_val, f"{what} values", seed)
    assert np.array_equal(got_idx, sep_idx), f"{what}: not Softmax then ArgMax's indices; seed {seed}"
    assert np.array_equal(got_val.view(np.uint32), sep_val.view(np.uint32)), \
        f"{what}: not Softmax then ArgMax's values, max |d| {np.abs(got_val - sep_val).max()}; seed {seed}"
    release(device, x, probs, *fused, *apart)


@pytest.mark.parametrize(("shape", "axis"), AXIS_CASES)
def test_softmax_argmax(device: Device, shape: tuple[int, ...], axis: int) -> None:
    """Logits spread over [-8, 8] (peaked rows, as a recogniser's are), every value distinct."""
    x_np, seed = distinct_values(shape)
    softmax_argmax_case(device, x_np * 8, axis, axis % 2 == 1, seed)


def test_softmax_argmax_ties_and_nan(device: Device) -> None:
    """Tied maxima give the first (their probabilities tie too); a NaN makes its row's softmax NaN, and NaN
    counts as the largest, so the row's first element wins, with a NaN value."""
    rng, seed = fresh_rng()
    x_np = rng.uniform(-4, 2, (4, VOCAB_V6)).astype(np.float32)
    x_np[0, [40, 9000, 18_000]] = 3.0
    x_np[1, :] = 0.5
    x_np[2, 77] = np.nan
    x, idx, val = device.upload(x_np), poisoned(device, (4,), np.int32), poisoned(device, (4,))
    run(device, lambda rec: record_argmax(rec, x, idx, val, -1, softmax=True))
    got_idx, got_val = device.download(idx), device.download(val)
    assert got_idx[:3].tolist() == [40, 0, 0], f"seed {seed}"
    assert np.isnan(got_val[2]) and not np.isnan(got_val[[0, 1, 3]]).any(), f"seed {seed}"
    check(got_val[1:2], np.array([1 / VOCAB_V6]), "a flat row's probability", seed)
    release(device, x, idx, val)


def test_row_local_size_is_a_power_of_two_up_to_256() -> None:
    assert [row_local_size(n) for n in (1, 32, 33, 200, 256, 257, VOCAB)] == [32, 32, 64, 256, 256, 256, 256]


def test_mean_local_size_widens_only_few_long_rows() -> None:
    assert mean_local_size(96, 184 * 256, 1024) == 1024
    assert mean_local_size(96, 184 * 256, 512) == 512
    assert mean_local_size(96, 184 * 256, 896) == 512  # a power of two within the device's limit
    assert mean_local_size(WIDE_MAX_ROWS + 1, 184 * 256, 1024) == 256  # enough rows to fill the GPU
    assert mean_local_size(96, WIDE_MIN_LENGTH - 1, 1024) == 256
    assert mean_local_size(4, 100, 1024) == row_local_size(100)


def test_contiguous_axes() -> None:
    assert contiguous_axes((3, 2), 4) == (2, 4)
    assert contiguous_axes((-1, -2), 4) == (2, 4)
    assert contiguous_axes(None, 3) == (0, 3)
    for bad in [(0, 2), (1, 1), (4,), (-5,)]:
        with pytest.raises(KernelArgumentError):
            contiguous_axes(bad, 4)


def test_reductions_reject_bad_arguments(device: Device) -> None:
    x, same = device.tensor((2, 3, 4)), device.tensor((2, 3, 4))
    wrong, ints = device.tensor((2, 3)), device.tensor((2, 3), np.int32)
    scale4, scale5, floats = device.tensor((4,)), device.tensor((5,)), device.tensor((2, 3))
    bad_calls = [
        lambda rec: record_softmax(rec, x, wrong, -1),                     # output shape
        lambda rec: record_softmax(rec, x, same, 3),                       # axis out of range
        lambda rec: record_reduce_mean(rec, x, wrong, (0, 2), False),      # axes not contiguous
        lambda rec: record_reduce_mean(rec, x, same, (2,), True),          # output shape
        lambda rec: record_argmax(rec, x, floats, floats, -1),             # indices not int32
        lambda rec: record_argmax(rec, x, ints, ints, -1),                 # values not float32
        lambda rec: record_argmax(rec, x, ints, floats, -1, True),         # keepdims shape
        lambda rec: record_layer_norm(rec, x, scale5, same),               # scale shape
        lambda rec: record_layer_norm(rec, x, scale4, same, scale5),       # bias shape
        lambda rec: record_layer_norm(rec, x, scale4, same, epsilon=-1.0),
        lambda rec: record_layer_norm(rec, x, scale4, wrong),              # output shape
    ]
    for i, bad in enumerate(bad_calls):
        with pytest.raises(KernelArgumentError):
            run(device, bad)
            pytest.fail(f"bad call {i} was accepted")
    release(device, x, same, wrong, ints, scale4, scale5, floats)


def test_row_per_invocation_only_for_short_rows_over_long_inner_axes() -> None:
    assert row_per_invocation(128, 160 * 160)
    assert not row_per_invocation(VOCAB, 64)
    assert not row_per_invocation(3, 20)


def test_softmax_caches_rows_up_to_8192_in_registers() -> None:
    assert [softmax_cache(n) for n in (1, 32, 33, 256, 257, VOCAB, 8192, 8193)] == [1, 1, 1, 1, 2, 26, 32, 0]
