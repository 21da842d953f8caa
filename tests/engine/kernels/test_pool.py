"""pool.comp and global_avgpool.comp against vkocr.engine.ops.pool, fresh random inputs, outputs poisoned (NaN).
Each case also runs with float16 storage: the reference is computed on the same float16 inputs, rounded once."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, check, fresh_rng, poisoned, release, run, storage_ref
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.pool import (
    pool_output_shape,
    record_average_pool2d,
    record_global_average_pool,
    record_max_pool2d,
)
from vkocr.engine.ops.pool import average_pool2d, global_average_pool, max_pool2d

# (N, C, H, W), kernel, strides, pads (top, left, bottom, right)
WINDOWS = [
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),
    ((1, 3, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0)),
    ((2, 17, 9, 11), (2, 2), (2, 2), (0, 0, 0, 0)),
    ((1, 5, 15, 13), (3, 3), (2, 2), (1, 1, 1, 1)),      # ResNet stem
    ((1, 4, 10, 7), (3, 3), (1, 1), (1, 1, 1, 1)),
    ((2, 3, 12, 20), (2, 1), (2, 1), (0, 0, 0, 0)),      # CRNN height-only pooling
    ((1, 6, 7, 9), (3, 2), (2, 3), (2, 0, 1, 1)),
    ((1, 2, 5, 6), (5, 5), (1, 1), (2, 2, 2, 2)),
    ((1, 2, 6, 6), (6, 6), (1, 1), (0, 0, 0, 0)),
    ((3, 1, 23, 31), (3, 3), (3, 3), (0, 1, 2, 0)),
    ((1, 32, 40, 40), (3, 3), (2, 2), (1, 1, 1, 1)),
    ((1, 24, 17, 23), (2, 2), (1, 1), (0, 0, 1, 1)),      # PP-OCRv6 stem: 2x2 stride 1, SAME_UPPER
    ((1, 3, 9, 10), (2, 2), (1, 1), (1, 1, 0, 0)),        # the same, SAME_LOWER
    ((2, 12, 3, 25), (3, 2), (3, 2), (0, 0, 0, 0)),       # PP-OCRv6 rec's AveragePool before its neck
]


def pool_case(device: Device, mode: str, shape: tuple[int, ...], kernel: tuple[int, int],
              strides: tuple[int, int], pads: tuple[int, ...], ceil_mode: bool,
              count_include_pad: bool = False, dtype: type = np.float32) -> None:
    rng, seed = fresh_rng()
    x_np = rng.uniform(-1, 1, shape).astype(dtype)
    x32 = x_np.astype(np.float32)
    attrs = {"kernel": kernel, "strides": strides, "pads": pads, "ceil_mode": ceil_mode}
    if mode == "max":
        ref = storage_ref(max_pool2d(x32, **attrs), dtype)
        assert pool_output_shape(shape, **attrs) == ref.shape
        x, out = device.upload(x_np), poisoned(device, ref.shape, dtype)
        run(device, lambda rec: record_max_pool2d(rec, x, out, **attrs))
    else:
        ref = storage_ref(average_pool2d(x32, count_include_pad=count_include_pad, **attrs), dtype)
        x, out = device.upload(x_np), poisoned(device, ref.shape, dtype)
        run(device, lambda rec: record_average_pool2d(rec, x, out, count_include_pad=count_include_pad,
                                                      **attrs))
    got = device.download(out)
    what = f"{mode} pool {shape} {attrs} include_pad={count_include_pad} {np.dtype(dtype)}"
    if mode == "max":  # a maximum picks an input: exact in any storage
        assert np.array_equal(got, ref), f"{what}: {np.sum(got != ref)} elements differ; seed {seed}"
    else:
        check(got, ref, what, seed, TOLERANCES[np.dtype(dtype)])
    release(device, x, out)


@pytest.mark.parametrize(("shape", "kernel", "strides", "pads"), WINDOWS)
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool(device: Device, shape: tuple[int, ...], kernel: tuple[int, int], strides: tuple[int, int],
                  pads: tuple[int, ...], ceil_mode: bool) -> None:
    pool_case(device, "max", shape, kernel, strides, pads, ceil_mode)


@pytest.mark.parametrize(("shape", "kernel", "strides", "pads"), WINDOWS)
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool_float16_storage(device: Device, shape: tuple[int, ...], kernel: tuple[int, int],
                                  strides: tuple[int, int], pads: tuple[int, ...], ceil_mode: bool) -> None:
    pool_case(device, "max", shape, kernel, strides, pads, ceil_mode, dtype=np.float16)


@pytest.mark.parametrize(("shape", "kernel", "strides", "pads"), WINDOWS)
@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [False, True])
def test_average_pool(device: Device, shape: tuple[int, ...], kernel: tuple[int, int],
                      strides: tuple[int, int], pads: tuple[int, ...], ceil_mode: bool,
                      count_include_pad: bool) -> None:
    pool_case(device, "average", shape, kernel, strides, pads, ceil_mode, count_include_pad)


@pytest.mark.parametrize(("shape", "kernel", "strides", "pads"), WINDOWS)
@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [False, True])
def test_average_pool_float16_storage(device: Device, shape: tuple[int, ...], kernel: tuple[int, int],
                                      strides: tuple[int, int], pads: tuple[int, ...], ceil_mode: bool,
                                      count_include_pad: bool) -> None:
    pool_case(device, "average", shape, kernel, strides, pads, ceil_mode, count_include_pad, np.float16)


def test_ceil_mode_adds_a_partial_window() -> None:
    """7 wide, kernel 2, stride 2: floor gives 3 windows, ceil a 4th that covers only the last column."""
    attrs = {"kernel": (2, 2), "strides": (2, 2)}
    assert pool_output_shape((1, 1, 7, 7), **attrs, ceil_mode=False) == (1, 1, 3, 3)
    assert pool_output_shape((1, 1, 7, 7), **attrs, ceil_mode=True) == (1, 1, 4, 4)


# (1, 5, 96, 101) and (2, 3, 130, 131): few long planes, on the widest workgroup (reduce.py mean_local_size),
# with a tail past the last eight-load step
GLOBAL_SHAPES = [(1, 1, 1, 1), (1, 3, 7, 5), (2, 17, 16, 16), (1, 8, 1, 600), (2, 4, 80, 81), (1, 70_000, 1, 2),
                 (1, 5, 96, 101), (2, 3, 130, 131)]


def global_case(device: Device, shape: tuple[int, ...], dtype: type = np.float32) -> None:
    rng, seed = fresh_rng()
    x_np = rng.uniform(-1, 1, shape).astype(dtype)
    ref = storage_ref(global_average_pool(x_np.astype(np.float64)), dtype)
    x, out = device.upload(x_np), poisoned(device, ref.shape, dtype)
    run(device, lambda rec: record_global_average_pool(rec, x, out))
    check(device.download(out), ref, f"global average pool {shape} {np.dtype(dtype)}", seed,
          TOLERANCES[np.dtype(dtype)])
    release(device, x, out)


@pytest.mark.parametrize("shape", GLOBAL_SHAPES)
def test_global_average_pool(device: Device, shape: tuple[int, ...]) -> None:
    global_case(device, shape)


@pytest.mark.parametrize("shape", GLOBAL_SHAPES)
def test_global_average_pool_float16_storage(device: Device, shape: tuple[int, ...]) -> None:
    global_case(device, shape, np.float16)


def test_pools_refuse_mixed_storage(device: Device) -> None:
    x16, out32 = device.tensor((1, 2, 4, 4), np.float16), device.tensor((1, 2, 2, 2))
    g32 = device.tensor((1, 2, 1, 1))
    for record in [
        lambda rec: record_max_pool2d(rec, x16, out32, kernel=(2, 2), strides=(2, 2)),
        lambda rec: record_average_pool2d(rec, x16, out32, kernel=(2, 2), strides=(2, 2)),
        lambda rec: record_global_average_pool(rec, x16, g32),
    ]:
        with pytest.raises(KernelArgumentError, match="share one storage dtype"):
            run(device, record)
    release(device, x16, out32, g32)


BAD_POOLS = [
    ("pad not smaller than kernel", (1, 2, 8, 8), (1, 2, 5, 5), {"kernel": (2, 2), "strides": (2, 2),
                                                                  "pads": (2, 0, 0, 0)}),
    ("kernel larger than input", (1, 2, 3, 3), (1, 2, 1, 1), {"kernel": (4, 4), "strides": (1, 1)}),
    ("zero stride", (1, 2, 8, 8), (1, 2, 4, 4), {"kernel": (2, 2), "strides": (0, 2)}),
    ("one kernel size", (1, 2, 8, 8), (1, 2, 4, 4), {"kernel": (2,), "strides": (2, 2)}),
    ("wrong output shape", (1, 2, 8, 8), (1, 2, 5, 5), {"kernel": (2, 2), "strides": (2, 2)}),
    ("not NCHW", (2, 8, 8), (2, 4, 4), {"kernel": (2, 2), "strides": (2, 2)}),
]


@pytest.mark.parametrize("record", [record_max_pool2d, record_average_pool2d])
@pytest.mark.parametrize(("why", "x_shape", "out_shape", "attrs"), BAD_POOLS)
def test_pool_rejects_bad_arguments(device: Device, record: object, why: str, x_shape: tuple[int, ...],
                                    out_shape: tuple[int, ...], attrs: dict[str, object]) -> None:
    x, out = device.tensor(x_shape), device.tensor(out_shape)
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record(rec, x, out, **attrs))  # type: ignore[operator]
    release(device, x, out)


@pytest.mark.parametrize(("x_shape", "out_shape", "dtype"),
                         [((1, 2, 4, 4), (1, 2, 1), np.float32), ((2, 4, 4), (2, 1, 1), np.float32),
                          ((1, 2, 4, 4), (1, 2, 1, 1), np.int32)])
def test_global_average_pool_rejects_bad_arguments(device: Device, x_shape: tuple[int, ...],
                                                   out_shape: tuple[int, ...], dtype: type) -> None:
    x, out = device.tensor(x_shape, dtype), device.tensor(out_shape)
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_global_average_pool(rec, x, out))
    release(device, x, out)
