"""binary.comp, binary_vec4.comp and unary.comp against NumPy on fresh random inputs (outputs poisoned with NaN).
Each case also runs with float16 storage: the reference is float32 on the same float16 inputs, rounded once."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, check, fresh_rng, poisoned, release, run, storage_ref
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.elementwise import broadcast_strides, record_binary, record_unary
from vkocr.engine.ops.elementwise import binary, unary

BROADCAST_CASES = [
    ((7,), (7,)),
    ((3, 5, 7), (3, 5, 7)),
    ((2, 3, 4, 5), (5,)),
    ((2, 3, 4, 5), (1,)),
    ((1,), (2, 3, 1)),
    ((2, 1, 4, 1), (1, 3, 1, 5)),
    ((8, 1, 5, 6), (8, 4, 5, 6)),
    ((1, 3, 1, 1), (2, 3, 17, 19)),
    ((2, 1, 2, 1, 2, 3), (1, 2, 1, 2, 1, 3)),
    ((4, 1, 1, 9), (1, 6, 7, 1)),
    ((), (3, 2)),
    ((1, 1, 1), (1, 1, 1)),
    ((2, 3, 4, 8), (2, 3, 4, 8)),  # equal shapes, size % 4 == 0: the vec4 path
    ((4,), (4,)),
    ((65_540,), (65_540,)),  # vec4 path, an odd count of vec4s (8-byte f16vec4s end mid-16 bytes in float16)
]


def binary_case(device: Device, op: str, shape_a: tuple[int, ...], shape_b: tuple[int, ...],
                dtype: type = np.float32) -> None:
    rng, seed = fresh_rng()
    lo = 0.5 if op in ("pow", "div") else -2.0  # pow of negatives is NaN; division by ~0 is ill-conditioned
    a_np = rng.uniform(lo, 2.0, shape_a).astype(dtype)
    b_np = rng.uniform(lo, 2.0, shape_b).astype(dtype)
    ref = storage_ref(binary(op, a_np.astype(np.float32), b_np.astype(np.float32)), dtype)
    a, b = device.upload(a_np), device.upload(b_np)
    out = poisoned(device, ref.shape, dtype)
    run(device, lambda rec: record_binary(rec, op, a, b, out))
    check(device.download(out), ref, f"{op} {shape_a}∘{shape_b} {np.dtype(dtype)}", seed,
          TOLERANCES[np.dtype(dtype)])
    release(device, a, b, out)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
@pytest.mark.parametrize(("shape_a", "shape_b"), BROADCAST_CASES)
def test_binary_matches_numpy(device: Device, op: str, shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> None:
    binary_case(device, op, shape_a, shape_b)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
@pytest.mark.parametrize(("shape_a", "shape_b"), BROADCAST_CASES)
def test_binary_float16_storage_matches_numpy(device: Device, op: str, shape_a: tuple[int, ...],
                                              shape_b: tuple[int, ...]) -> None:
    binary_case(device, op, shape_a, shape_b, np.float16)


def test_elementwise_refuses_mixed_storage(device: Device) -> None:
    """One storage dtype per kernel, on the vec4 path, the broadcasting one and unary ops alike."""
    a16, b32 = device.tensor((8,), np.float16), device.tensor((8,))
    c16, one32 = device.tensor((7,), np.float16), device.tensor((1,))
    for record in [
        lambda rec: record_binary(rec, "add", a16, b32, a16),   # vec4 path
        lambda rec: record_binary(rec, "mul", c16, one32, c16),  # broadcast path
        lambda rec: record_binary(rec, "sub", a16, a16, b32),   # output
        lambda rec: record_unary(rec, "relu", a16, b32),
    ]:
        with pytest.raises(KernelArgumentError, match="share one storage dtype"):
            run(device, record)
    release(device, a16, b32, c16, one32)


def test_broadcast_strides_merge_axes() -> None:
    assert broadcast_strides((8, 1, 5, 6), (8, 4, 5, 6)) == ([8, 4, 30], [30, 0, 1], [120, 30, 1])
    assert broadcast_strides((2, 3), (2, 3)) == ([6], [1], [1])


UNARY_CASES = [
    ("sqrt", 0, 0), ("exp", 0, 0), ("tanh", 0, 0), ("neg", 0, 0), ("abs", 0, 0), ("reciprocal", 0, 0),
    ("relu", 0, 0), ("clip", 0.0, 6.0), ("clip", -0.5, 0.25), ("hardsigmoid", 1 / 6, 0.5),
    ("hardsigmoid", 0.2, 0.5), ("hardswish", 1 / 6, 0.5), ("sigmoid", 0, 0), ("leakyrelu", 0.1, 0),
    ("erf", 0, 0),
]
UNARY_SIZES = [1, 255, 257, 70_001]


def unary_case(device: Device, op: str, alpha: float, beta: float, n: int, dtype: type = np.float32) -> None:
    rng, seed = fresh_rng()
    lo = 0.1 if op in ("sqrt", "reciprocal") else -8.0
    x_np = rng.uniform(lo, 8.0, (n,)).astype(dtype)  # (exp(8) ≈ 2981: within float16's range)
    ref = storage_ref(unary(op, x_np.astype(np.float32), alpha, beta), dtype)
    x, out = device.upload(x_np), poisoned(device, (n,), dtype)
    run(device, lambda rec: record_unary(rec, op, x, out, alpha, beta))
    check(device.download(out), ref, f"{op}(α={alpha}, β={beta}) n={n} {np.dtype(dtype)}", seed,
          TOLERANCES[np.dtype(dtype)])
    release(device, x, out)


@pytest.mark.parametrize(("op", "alpha", "beta"), UNARY_CASES)
@pytest.mark.parametrize("n", UNARY_SIZES)
def test_unary_matches_numpy(device: Device, op: str, alpha: float, beta: float, n: int) -> None:
    unary_case(device, op, alpha, beta, n)


@pytest.mark.parametrize(("op", "alpha", "beta"), UNARY_CASES)
@pytest.mark.parametrize("n", UNARY_SIZES)
def test_unary_float16_storage_matches_numpy(device: Device, op: str, alpha: float, beta: float, n: int) -> None:
    unary_case(device, op, alpha, beta, n, np.float16)


@pytest.mark.parametrize("op", ["erf", "gelu"])
def test_erf_and_gelu_are_close_at_every_point(device: Device, op: str) -> None:
    """GLSL has no erf: unary.comp's rational fit, elementwise, against the float64 reference over the range
    where erf bends (|x| ≤ 5, dense), within 1e-6 of erf's scale (1) or GELU's (|x|, at least 1), and
    relatively near 0, where erf(x) ≈ 1.128·x and GELU(x) ≈ x / 2. (Below x ≈ -2, GELU is 1 + erf(x/√2)
    after cancellation in every float32 implementation, onnxruntime's included: only the absolute bound means
    anything there, which is also why GELU is not in the relative-norm sweep above.)"""
    rng, seed = fresh_rng()
    x_np = np.concatenate([rng.uniform(-5, 5, 50_000), np.linspace(-4.5, 4.5, 9_001),
                           rng.uniform(-1, 1, 1_000) * 10.0 ** rng.uniform(-30, -1, 1_000)]).astype(np.float32)
    ref = unary(op, x_np)
    x, out = device.upload(x_np), poisoned(device, x_np.shape)
    run(device, lambda rec: record_unary(rec, op, x, out))
    got = device.download(out).astype(np.float64)
    release(device, x, out)
    ref64 = ref.astype(np.float64)
    scale = np.maximum(np.abs(x_np.astype(np.float64)), 1.0) if op == "gelu" else 1.0
    err = np.abs(got - ref64) / scale
    assert not np.isnan(err).any(), f"{op}: NaN outputs; seed {seed}"
    worst = int(np.argmax(err))
    assert err[worst] <= 1e-6, f"{op}({x_np[worst]!r}) = {got[worst]!r}, reference {ref[worst]!r}; seed {seed}"
    tiny = (np.abs(x_np) < 1e-3) & (x_np != 0)
    rel = np.abs(got[tiny] - ref64[tiny]) / np.abs(ref64[tiny])
    assert rel.max() <= 1e-6, f"{op} near 0: relative error {rel.max():.3g}; seed {seed}"
    assert (got[x_np == 0] == 0).all(), f"{op}(0) != 0"
