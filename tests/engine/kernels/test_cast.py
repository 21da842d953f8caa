"""cast.comp: float32 → float16 rounds to nearest even exactly as NumPy does, float16 → float32 is exact."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng, poisoned, release, run
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.cast import record_cast


@pytest.mark.parametrize("shape", [(1,), (7, 13), (2, 3, 31, 17), (70001,)], ids=str)
def test_cast_to_float16_rounds_as_numpy(device: Device, shape: tuple[int, ...]) -> None:
    rng, seed = fresh_rng()
    # magnitudes from subnormal to beyond fp16's range (→ inf), both signs
    x_np = (rng.uniform(-1, 1, shape) * 10.0 ** rng.uniform(-8, 6, shape)).astype(np.float32)
    with np.errstate(over="ignore"):
        ref = x_np.astype(np.float16)
    x, out = device.upload(x_np), poisoned(device, shape, np.float16)
    run(device, lambda rec: record_cast(rec, x, out))
    got = device.download(out)
    assert got.dtype == np.float16
    assert np.array_equal(got.view(np.uint16), ref.view(np.uint16)), f"seed {seed}"
    release(device, x, out)


@pytest.mark.parametrize("shape", [(5,), (3, 257), (4, 8, 9, 10)], ids=str)
def test_cast_to_float32_is_exact(device: Device, shape: tuple[int, ...]) -> None:
    rng, seed = fresh_rng()
    x_np = rng.uniform(-60000, 60000, shape).astype(np.float16)
    x, out = device.upload(x_np), poisoned(device, shape, np.float32)
    run(device, lambda rec: record_cast(rec, x, out))
    assert np.array_equal(device.download(out), x_np.astype(np.float32)), f"seed {seed}"
    release(device, x, out)


def test_cast_refuses_what_it_cannot_convert(device: Device) -> None:
    a = device.upload(np.ones((4,), np.float32))
    b = device.upload(np.ones((4,), np.float32))
    c = device.upload(np.ones((5,), np.float16))
    with pytest.raises(KernelArgumentError, match="only float32"):
        run(device, lambda rec: record_cast(rec, a, b))
    with pytest.raises(KernelArgumentError, match="shapes"):
        run(device, lambda rec: record_cast(rec, a, c))
    release(device, a, b, c)
