"""concat.comp (Concat), copy_strided.comp (Slice, Transpose) and copy_vec4.comp against vkocr.engine.ops.layout:
copies must match exactly, for float32 and int32 (32-bit words) and float16 (the .fp16 variants: 16-bit
elements; copy_vec4 moves bytes)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng, poisoned, release, run
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.layout import (
    merge_axes,
    record_concat,
    record_copy,
    record_slice,
    record_transpose,
    slice_output_shape,
)
from vkocr.engine.ops.layout import concat, slice_, transpose
from vkocr.engine.ops.pool import max_pool2d
from vkocr.engine.ops.resize import resize
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

INT64_MAX, INT32_MAX = 2**63 - 1, 2**31 - 1


DTYPES = [np.float32, np.int32, np.float16]


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    if dtype is np.int32:
        return rng.integers(-(2**31), 2**31, shape, dtype=np.int32)
    if dtype is np.float16:  # every float16 but NaN (which != itself): subnormals, ±0 and ±inf must move unchanged
        bits = rng.integers(0, 0x7C01, shape, dtype=np.uint16) | (rng.integers(0, 2, shape, dtype=np.uint16) << 15)
        return bits.view(np.float16)
    return rng.uniform(-1, 1, shape).astype(np.float32)


def assert_copied(device: Device, record: Callable[[Recorder, Tensor], None], ref: np.ndarray,
                  what: str, seed: int) -> None:
    out = poisoned(device, ref.shape, ref.dtype.type)
    run(device, lambda rec: record(rec, out))
    got = device.download(out)
    release(device, out)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    assert np.array_equal(got, ref), f"{what}: {np.sum(got != ref)}/{ref.size} elements differ; seed {seed}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 9])
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -2, -3, -4])
def test_concat_matches_reference(device: Device, axis: int, count: int, dtype: type) -> None:
    """Every input count up to four in one dispatch, more in one per four (a slab of the axis each)."""
    rng, seed = fresh_rng()
    base = [2, 3, 4, 5]
    # a random length along the concat axis per input (different channel counts on axis 1)
    shapes = [tuple(int(rng.integers(1, 5)) if d == axis % 4 else n for d, n in enumerate(base))
              for _ in range(count)]
    arrays = [random_array(rng, s, dtype) for s in shapes]
    xs = [device.upload(a) for a in arrays]
    dispatches: list[int] = []

    def record(rec: Recorder, out: Tensor) -> None:
        record_concat(rec, xs, out, axis)
        dispatches.append(rec.dispatch_count)

    assert_copied(device, record, concat(arrays, axis), f"concat {shapes} axis {axis}", seed)
    assert dispatches == [-(-count // 4)]
    release(device, *xs)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    ("shapes", "axis"),
    [([(7,), (1,), (300,)], 0), ([(3, 0, 2), (3, 4, 2), (3, 1, 2)], 1), ([(1, 1, 5), (1, 1, 6)], -1)],
)
def test_concat_edge_shapes(device: Device, shapes: list[tuple[int, ...]], axis: int, dtype: type) -> None:
    rng, seed = fresh_rng()
    arrays = [random_array(rng, s, dtype) for s in shapes]
    # Device.upload cannot stage 0 bytes: empty inputs are bare (never read) tensors
    xs = [device.upload(a) if a.size else device.tensor(a.shape, dtype) for a in arrays]
    assert_copied(device, lambda rec, out: record_concat(rec, xs, out, axis), concat(arrays, axis),
                  f"concat {shapes} axis {axis}", seed)
    release(device, *xs)


# the pooled first input's window (kh, kw, pad_top, pad_left) and the inputs' shapes (the first one pooled)
POOLED = [
    ((2, 2, 0, 0), [(1, 24, 9, 13), (1, 24, 9, 13)]),  # a stem's MaxPool, SAME_UPPER
    ((2, 2, 1, 1), [(2, 3, 5, 4), (2, 5, 5, 4), (2, 1, 5, 4)]),  # SAME_LOWER, a batch of two
    ((3, 3, 1, 1), [(1, 4, 1, 7), (1, 2, 1, 7)]),  # a map of one row
    ((3, 1, 2, 0), [(1, 2, 6, 3), *[(1, 1, 6, 3)] * 5]),  # six inputs: two dispatches, the pooled one in the first
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(("pool", "shapes"), POOLED)
def test_concat_pools_its_first_input_as_max_pool_does(device: Device, pool: tuple[int, int, int, int],
                                                       shapes: list[tuple[int, ...]], dtype: type) -> None:
    """concat.comp with a pooled first input: bit for bit NumPy's MaxPool (stride 1, pads keeping the size) of
    the first input, then the others, on ±0, ±inf and subnormals too."""
    rng, seed = fresh_rng()
    arrays = [random_array(rng, s, dtype) for s in shapes]
    if dtype is np.float32:
        arrays[0].reshape(-1)[:4] = [0.0, -0.0, np.inf, -np.inf]
    kh, kw, top, left = pool
    pooled = max_pool2d(arrays[0], kernel=(kh, kw), strides=(1, 1), pads=(top, left, kh - 1 - top, kw - 1 - left))
    xs = [device.upload(a) for a in arrays]
    assert_copied(device, lambda rec, out: record_concat(rec, xs, out, 1, pool_first=pool),
                  concat([pooled.astype(dtype), *arrays[1:]], 1), f"pooled concat {shapes} {pool}", seed)
    release(device, *xs)


@pytest.mark.parametrize(("why", "shapes", "axis", "pool", "dtype"), [
    ("not on channels", [(1, 2, 3, 3), (1, 2, 3, 3)], 2, (2, 2, 0, 0), np.float32),
    ("not NCHW", [(2, 3, 3), (2, 3, 3)], 1, (2, 2, 0, 0), np.float32),
    ("integers", [(1, 2, 3, 3), (1, 2, 3, 3)], 1, (2, 2, 0, 0), np.int32),
    ("pads that change the size", [(1, 2, 3, 3), (1, 2, 3, 3)], 1, (2, 2, 2, 0), np.float32),
])
def test_concat_refuses_a_pooled_input_it_cannot_pool(device: Device, why: str, shapes: list[tuple[int, ...]],
                                                      axis: int, pool: tuple[int, int, int, int],
                                                      dtype: type) -> None:
    out_shape = tuple(sum(s[d] for s in shapes) if d == axis else n for d, n in enumerate(shapes[0]))
    xs = [device.tensor(s, dtype) for s in shapes]
    out = device.tensor(out_shape, dtype)
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_concat(rec, xs, out, axis, pool_first=pool))
    release(device, *xs, out)


# per input: its factor (1: read as it is) and its channels; the output's map (h, w); the batch; the pooled first
# input's window, if any
UPSAMPLED = [
    ([(8, 3), (4, 2), (2, 5), (1, 4)], (16, 24), 1, None),  # DB's neck: four levels joined at the finest
    ([(1, 3), (3, 2)], (9, 6), 2, None),  # a batch of two, an odd factor
    ([(2, 1), *[(1, 1)] * 4, (2, 2)], (4, 10), 1, None),  # six inputs: two dispatches, an upsampled one in each
    ([(1, 2), (2, 3), (4, 1)], (8, 8), 1, (2, 2, 0, 0)),  # after a pooled first input
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(("inputs", "size", "batch", "pool"), UPSAMPLED)
def test_concat_upsamples_inputs_as_nearest_resize_does(device: Device, inputs: list[tuple[int, int]],
                                                        size: tuple[int, int], batch: int,
                                                        pool: tuple[int, int, int, int] | None, dtype: type) -> None:
    """concat.comp with upsampled inputs: bit for bit ONNX's nearest Resize (asymmetric, floor) of each by its
    factor, then the concatenation, on ±0, ±inf and subnormals too."""
    rng, seed = fresh_rng()
    h, w = size
    arrays = [random_array(rng, (batch, c, h // up, w // up), dtype) for up, c in inputs]
    if dtype is np.float32:
        arrays[-1].reshape(-1)[:4] = [0.0, -0.0, np.inf, -np.inf]
    parts = [resize(a, scales=[1, 1, up, up], mode="nearest", coordinate_transformation_mode="asymmetric",
                    nearest_mode="floor").astype(dtype) if up != 1 else a for a, (up, _) in zip(arrays, inputs)]
    if pool is not None:
        kh, kw, top, left = pool
        parts[0] = max_pool2d(arrays[0], kernel=(kh, kw), strides=(1, 1),
                              pads=(top, left, kh - 1 - top, kw - 1 - left)).astype(dtype)
    xs = [device.upload(a) for a in arrays]
    assert_copied(device, lambda rec, out: record_concat(rec, xs, out, 1, pool_first=pool,
                                                          upsample=[up for up, _ in inputs]),
                  concat(parts, 1), f"upsampled concat {inputs} {size}", seed)
    release(device, *xs)


@pytest.mark.parametrize(("why", "shapes", "out_shape", "ups", "pool"), [
    ("a factor that does not fit", [(1, 2, 3, 3), (1, 2, 6, 6)], (1, 4, 6, 6), [3, 1], None),
    ("a factor of zero", [(1, 2, 3, 3), (1, 2, 3, 3)], (1, 4, 3, 3), [0, 1], None),
    ("a factor per input missing", [(1, 2, 3, 3), (1, 2, 6, 6)], (1, 4, 6, 6), [2], None),
    ("the pooled input upsampled too", [(1, 2, 3, 3), (1, 2, 6, 6)], (1, 4, 6, 6), [2, 1], (2, 2, 0, 0)),
    ("not NCHW", [(2, 3, 3), (2, 3, 6)], (2, 6, 6), [2, 1], None),
])
def test_concat_refuses_an_upsampling_it_cannot_do(device: Device, why: str, shapes: list[tuple[int, ...]],
                                                    out_shape: tuple[int, ...], ups: list[int],
                                                    pool: tuple[int, int, int, int] | None) -> None:
    xs = [device.tensor(s, np.float32) for s in shapes]
    out = device.tensor(out_shape, np.float32)
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_concat(rec, xs, out, 1, pool_first=pool, upsample=ups))
    release(device, *xs, out)


SLICES = [
    # shape, starts, ends, axes, steps
    ((10,), [2], [8], None, None),
    ((10,), [1], [10], [0], [2]),
    ((10,), [-1], [-INT64_MAX], [0], [-1]),
    ((10,), [9], [0], [0], [-3]),
    ((10,), [-2], [INT64_MAX], [0], [-3]),
    ((10,), [3], [INT32_MAX], None, [2]),
    ((4, 6, 8), [1, -5], [3, 100], [1, 2], [1, 2]),
    ((4, 6, 8), [-1, 0, 7], [-100, 6, 0], [0, 1, 2], [-1, 2, -3]),
    ((4, 6, 8), [0], [-1], [-1], [1]),
    ((2, 3, 5, 7), [0, -2], [INT64_MAX, -INT64_MAX - 1], [3, -2], [3, -1]),
    ((2, 3, 5, 7), [1, 0, -1], [2, INT64_MAX, -8], [0, 3, 2], [1, -2, -2]),
    ((2, 3, 5, 7), [0, 1], [2, 3], [0, 1], [1, 1]),
    ((3, 4, 2, 5, 3, 2), [2, 3, 1, -1], [-5, 0, 5, -10], [0, 1, 3, 5], [-1, -2, 2, -1]),
    ((1, 64, 33), [0, 32], [1, 0], [0, 1], [1, -1]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "starts", "ends", "axes", "steps"), SLICES)
def test_slice_matches_reference(device: Device, shape: tuple[int, ...], starts: list[int], ends: list[int],
                                 axes: list[int] | None, steps: list[int] | None, dtype: type) -> None:
    rng, seed = fresh_rng()
    x_np = random_array(rng, shape, dtype)
    ref = np.ascontiguousarray(slice_(x_np, starts, ends, axes, steps))
    assert slice_output_shape(shape, starts, ends, axes, steps) == ref.shape
    x = device.upload(x_np)
    assert_copied(device, lambda rec, out: record_slice(rec, x, out, starts, ends, axes, steps), ref,
                  f"slice {shape} starts {starts} ends {ends} axes {axes} steps {steps}", seed)
    release(device, x)


@pytest.mark.parametrize(("starts", "ends", "steps"), [([20], [30], [1]), ([5], [2], [1]), ([2], [5], [-1]),
                                                       ([-20], [-30], [1])])
def test_empty_slice_records_nothing(
    device: Device, starts: list[int], ends: list[int], steps: list[int]
) -> None:
    assert slice_output_shape((3, 10), starts, ends, [1], steps) == (3, 0)
    assert slice_(np.zeros((3, 10)), starts, ends, [1], steps).shape == (3, 0)
    x, out = device.tensor((3, 10)), device.tensor((3, 0))
    with Recorder(device) as rec:
        record_slice(rec, x, out, starts, ends, [1], steps)
        assert rec.dispatch_count == 0
    release(device, x, out)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("repeat", range(4))
def test_transpose_random_perms(device: Device, rank: int, repeat: int, dtype: type) -> None:
    rng, seed = fresh_rng()
    shape = tuple(int(n) for n in rng.integers(1, 6, rank))
    perm = [int(p) for p in rng.permutation(rank)]
    x_np = random_array(rng, shape, dtype)
    x = device.upload(x_np)
    ref = np.ascontiguousarray(transpose(x_np, perm))
    assert_copied(device, lambda rec, out: record_transpose(rec, x, out, perm), ref,
                  f"transpose {shape} perm {perm}", seed)
    release(device, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_transpose_default_perm_and_nchw_to_nhwc(device: Device, dtype: type) -> None:
    rng, seed = fresh_rng()
    x_np = random_array(rng, (2, 16, 9, 11), dtype)
    x = device.upload(x_np)
    assert_copied(device, lambda rec, out: record_transpose(rec, x, out, None), transpose(x_np).copy(),
                  "transpose reversed", seed)
    assert_copied(device, lambda rec, out: record_transpose(rec, x, out, (0, 2, 3, 1)),
                  transpose(x_np, (0, 2, 3, 1)).copy(), "NCHW -> NHWC", seed)
    release(device, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_large_copy_folds_grid(device: Device, dtype: type) -> None:
    """16.8 M elements need more than 65535 workgroups of 256: the grid folds into 2-D."""
    rng, seed = fresh_rng()
    x_np = random_array(rng, (2, 2049, 4096), dtype)
    x = device.upload(x_np)
    assert_copied(device, lambda rec, out: record_slice(rec, x, out, [-1], [-INT64_MAX], [0], [-1]),
                  x_np[::-1].copy(), "reverse 16.8 M", seed)
    release(device, x)


def test_merge_axes() -> None:
    # NCHW -> NHWC over the output index space (N, H, W, C): H and W fuse on both sides
    assert merge_axes([2, 4, 5, 3], [60, 5, 1, 20], [60, 15, 3, 1]) == ([2, 20, 3], [60, 1, 20], [60, 3, 1])
    assert merge_axes([3, 1, 4], [-4, 7, -1], [4, 4, 1]) == ([12], [-1], [1])  # reversed whole tensor
    assert merge_axes([1, 1], [1, 1], [1, 1]) == ([1], [0], [0])


def expect_error(
    device: Device,
    shapes: list[tuple[int, ...]],
    out_shape: tuple[int, ...],
    record: Callable[[Recorder, list[Tensor], Tensor], None],
    out_dtype: type = np.float32,
) -> None:
    xs = [device.tensor(s) for s in shapes]
    out = device.tensor(out_shape, out_dtype)
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record(rec, xs, out))
    release(device, *xs, out)


@pytest.mark.parametrize(
    ("shapes", "out_shape", "axis", "out_dtype"),
    [
        ([(2, 3), (2, 4)], (2, 7), 2, np.float32),
        ([(2, 3), (2, 4)], (2, 7), -3, np.float32),
        ([(2, 3), (3, 4)], (2, 7), 1, np.float32),
        ([(2, 3), (2, 4)], (2, 8), 1, np.float32),
        ([(2, 3), (2, 4, 1)], (2, 7), 1, np.float32),
        ([(2, 3), (2, 4)], (2, 7), 1, np.int32),
        ([(2, 3), (2, 4)], (2, 7), 1, np.float64),
        ([(2, 3), (2, 4)], (2, 7), 1, np.float16),  # float32 inputs: one dtype, a copy converts nothing
        ([], (2, 7), 1, np.float32),
    ],
)
def test_concat_rejects_bad_arguments(
    device: Device, shapes: list[tuple[int, ...]], out_shape: tuple[int, ...], axis: int, out_dtype: type
) -> None:
    expect_error(device, shapes, out_shape, lambda rec, xs, out: record_concat(rec, xs, out, axis), out_dtype)


@pytest.mark.parametrize(
    ("out_shape", "starts", "ends", "axes", "steps"),
    [
        ((4, 3), [0], [3], [1], [0]),
        ((4, 3), [0], [3], [2], None),
        ((4, 3), [0], [3], [-3], None),
        ((4, 3), [0, 0], [3, 3], [1, 1], None),
        ((4, 3), [0, 0], [3], [1], None),
        ((4, 4), [0], [3], [1], None),
        ((4, 6), [0, 0, 0], [1, 1, 1], None, None),
    ],
)
def test_slice_rejects_bad_arguments(
    device: Device, out_shape: tuple[int, ...], starts: list[int], ends: list[int],
    axes: list[int] | None, steps: list[int] | None,
) -> None:
    expect_error(device, [(4, 6)], out_shape,
                 lambda rec, xs, out: record_slice(rec, xs[0], out, starts, ends, axes, steps))


@pytest.mark.parametrize(
    ("perm", "out_shape"),
    [([0, 0, 1], (2, 2, 3)), ([0, 1], (2, 3)), ([2, 0, 1], (2, 4, 3)), ([0, 1, 3], (2, 3, 4))],
)
def test_transpose_rejects_bad_arguments(device: Device, perm: list[int], out_shape: tuple[int, ...]) -> None:
    expect_error(device, [(2, 3, 4)], out_shape, lambda rec, xs, out: record_transpose(rec, xs[0], out, perm))


def test_rank_above_six_after_merging_is_rejected(device: Device) -> None:
    # reversing seven axes leaves no two neighbours in order, so nothing merges
    expect_error(device, [(2,) * 7], (2,) * 7, lambda rec, xs, out: record_transpose(rec, xs[0], out, None))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (3,), (4,), (2, 3, 5), (8, 16), (70_001,), (65_536 * 4 + 4,),
                                   (65_536 * 4 + 8,)])
def test_contiguous_copy_is_exact(device: Device, shape: tuple[int, ...], dtype: type) -> None:
    """Sizes that are and are not multiples of 16 bytes (vec4 path and element path): in float16, (4,) and
    65_536 * 4 + 4 elements leave 8 bytes over (strided 16-bit copy), (8, 16) and 65_536 * 4 + 8 do not (vec4)."""
    rng, seed = fresh_rng()
    x_np = random_array(rng, shape, dtype)
    x = device.upload(x_np)
    assert_copied(device, lambda rec, out: record_copy(rec, x, out), x_np, f"copy {shape}", seed)
    release(device, x)


def test_copy_refuses_size_mismatch(device: Device) -> None:
    x, y = device.tensor((4,)), device.tensor((5,))
    with Recorder(device) as rec, pytest.raises(KernelArgumentError, match="copy of 16 B into 20 B"):
        record_copy(rec, x, y)
    release(device, x, y)
