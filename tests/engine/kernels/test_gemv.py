"""gemv.comp (matrix-vector products) against NumPy on fresh random inputs (outputs poisoned with NaN), through
the conv and matmul wrappers that route to it: 1×1 convolutions on 1×1 maps, MatMul/Gemm with one output row or
column. Each sum is checked element by element against the size of its terms (Σ|a·x|), so that a row whose sum
nearly cancels cannot hide an error; float16 storage is checked against the exact result on the same float16
inputs, rounded once."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, fresh_rng, poisoned, release, run
from vkocr.engine.device import Device
from vkocr.engine.kernels.conv import record_conv2d
from vkocr.engine.kernels.matmul import record_gemm, record_matmul
from vkocr.engine.ops.activation import apply_activation
from vkocr.engine.recorder import Recorder

DTYPES = [np.float32, np.float16]
DEPTHS = [1, 7, 33, 1280, 4099]  # K: not a multiple of the lanes, the unrolled step or anything else
ROWS = [1, 5, 130, 2051]
ACTIVATIONS = [
    ("none", 0.0, 0.0), ("relu", 0.0, 0.0), ("clip", -0.5, 0.5), ("hardsigmoid", 1 / 6, 0.5),
    ("hardswish", 1 / 6, 0.5), ("sigmoid", 0.0, 0.0), ("leakyrelu", 0.1, 0.0), ("gelu", 0.0, 0.0),
]


def uniform(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, shape).astype(dtype)


def check_close(got: np.ndarray, ref: np.ndarray, scale: np.ndarray, what: str, seed: int, dtype: type) -> None:
    """|got − ref| ≤ tol · (scale + |ref|) everywhere: scale bounds the rounding of the sum and epilogue (the
    sizes of their terms), |ref| the one rounding on store."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    assert not np.isnan(got).any(), f"{what}: unwritten (NaN) outputs; seed {seed}"
    tol = TOLERANCES[np.dtype(dtype)]
    err = np.abs(got.astype(np.float64) - ref) / (scale + np.abs(ref) + 1e-30)
    worst = np.unravel_index(int(np.argmax(err)), err.shape)
    assert err[worst] <= tol, f"{what}: error {err[worst]:.3g} at {worst} > {tol}; seed {seed}"


def epilogue_ref(sums: np.ndarray, bias: np.ndarray | None, activation: tuple[str, float, float],
                 post_affine: tuple[float, float] | None, residual: np.ndarray | None) -> np.ndarray:
    """The conv's epilogue in float64: act(sum + bias) (· scale + shift) (+ residual)."""
    v = sums + (bias if bias is not None else 0.0)
    v = apply_activation(v, *activation)
    if post_affine is not None:
        v = v * post_affine[0] + post_affine[1]
    return v + (residual if residual is not None else 0.0)


def run_conv(device: Device, n: int, cin: int, cout: int, dtype: type, *, bias: bool = True,
             activation: tuple[str, float, float] = ("none", 0.0, 0.0), affine: bool = False,
             residual: bool = False) -> None:
    """A pointwise conv of x (n, cin, 1, 1) to (n, cout, 1, 1), every epilogue part as asked."""
    rng, seed = fresh_rng()
    x_np, w_np = uniform(rng, (n, cin, 1, 1), dtype), uniform(rng, (cout, cin, 1, 1), dtype)
    b_np = uniform(rng, (cout,), dtype) if bias else None
    r_np = uniform(rng, (n, cout, 1, 1), dtype) if residual else None
    post = tuple(float(v) for v in rng.uniform(-2.0, 2.0, 2).astype(np.float32)) if affine else None
    x64, w64 = x_np.reshape(n, cin).astype(np.float64), w_np.reshape(cout, cin).astype(np.float64)
    b64 = b_np.astype(np.float64) if b_np is not None else None
    r64 = r_np.reshape(n, cout).astype(np.float64) if r_np is not None else None
    ref = epilogue_ref(x64 @ w64.T, b64, activation, post, r64)  # type: ignore[arg-type]
    scale = (np.abs(x64) @ np.abs(w64).T + (np.abs(b64) if b64 is not None else 0.0)) * (abs(post[0]) if post else 1)
    scale = scale + (abs(post[1]) if post else 0) + (np.abs(r64) if r64 is not None else 0)
    x, w, out = device.upload(x_np), device.upload(w_np), poisoned(device, (n, cout, 1, 1), dtype)
    b = device.upload(b_np) if b_np is not None else None
    r = device.upload(r_np) if r_np is not None else None
    kind, alpha, beta = activation
    run(device, lambda rec: record_conv2d(rec, x, w, out, b, activation=kind, alpha=alpha, beta=beta,
                                          post_affine=post, residual=r))  # type: ignore[arg-type]
    got = device.download(out).reshape(n, cout)
    what = f"gemv conv n={n} {cin}→{cout} bias={bias} {activation} affine={post} residual={residual} {np.dtype(dtype)}"
    check_close(got, ref, scale, what, seed, dtype)
    release(device, x, w, out, *(t for t in (b, r) if t is not None))


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16"])
@pytest.mark.parametrize(("cin", "cout"), list(itertools.product(DEPTHS, ROWS)))
def test_pointwise_conv_on_a_1x1_map(device: Device, cin: int, cout: int, dtype: type) -> None:
    run_conv(device, 3, cin, cout, dtype, activation=("relu", 0.0, 0.0))


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16"])
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_conv_epilogue_activations(device: Device, activation: tuple[str, float, float], dtype: type) -> None:
    run_conv(device, 2, 130, 67, dtype, activation=activation)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16"])
@pytest.mark.parametrize(("bias", "affine", "residual"), list(itertools.product([False, True], repeat=3)))
def test_conv_epilogue_parts(device: Device, bias: bool, affine: bool, residual: bool, dtype: type) -> None:
    """SE blocks' shapes (a 1×1 conv 480 → 120, then a hard sigmoid), every combination of the optional parts."""
    run_conv(device, 2, 480, 120, dtype, bias=bias, activation=("hardswish", 1 / 6, 0.5), affine=affine,
             residual=residual)


def run_matmul(device: Device, shape_a: tuple[int, ...], shape_b: tuple[int, ...], dtype: type) -> None:
    rng, seed = fresh_rng()
    a_np, b_np = uniform(rng, shape_a, dtype), uniform(rng, shape_b, dtype)
    a64, b64 = a_np.astype(np.float64), b_np.astype(np.float64)
    ref, scale = a64 @ b64, np.abs(a64) @ np.abs(b64)
    a, b, out = device.upload(a_np), device.upload(b_np), poisoned(device, ref.shape, dtype)
    run(device, lambda rec: record_matmul(rec, a, b, out))
    check_close(device.download(out), ref, scale, f"gemv matmul {shape_a}@{shape_b} {np.dtype(dtype)}", seed, dtype)
    release(device, a, b, out)


MATMULS = [
    *(((1, k), (k, n)) for k, n in itertools.product(DEPTHS, [1, 4, 5, 1000])),   # one row: the classifier's
    *(((m, k), (k, 1)) for k, m in itertools.product([7, 1280], [5, 2051])),      # one column
    ((3, 1, 33), (3, 33, 6)),       # batched
    ((1, 1280), (4, 1280, 4)),      # the row broadcast to every batch
    ((5, 17, 130), (130, 1)),       # the column broadcast to every batch
    ((2, 3, 1, 9), (2, 3, 9, 7)),   # batch dims merged into one
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16"])
@pytest.mark.parametrize(("shape_a", "shape_b"), MATMULS, ids=str)
def test_matmul_with_one_output_row_or_column(device: Device, shape_a: tuple[int, ...], shape_b: tuple[int, ...],
                                              dtype: type) -> None:
    run_matmul(device, shape_a, shape_b, dtype)


GEMMS = [  # (m, n, k, trans_a, trans_b, C's shape or None)
    (1, 4, 1280, False, False, (4,)),       # the orientation model's head (MatMul + bias)
    (1, 37, 33, True, False, (1, 37)),
    (1, 130, 4099, False, True, ()),
    (1, 6, 7, True, True, None),
    (130, 1, 33, False, False, (130, 1)),
    (57, 1, 1280, True, False, (1,)),
    (9, 1, 7, False, True, (1, 1)),
    (2051, 1, 130, True, True, None),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", GEMMS, ids=str)
def test_gemm_with_one_output_row_or_column(device: Device, case: tuple, dtype: type) -> None:
    """Gemm's own epilogue (alpha · A'B' + beta · C, then the activation), transposes as strides."""
    m, n, k, trans_a, trans_b, c_shape = case
    rng, seed = fresh_rng()
    a_np = uniform(rng, (k, m) if trans_a else (m, k), dtype)
    b_np = uniform(rng, (n, k) if trans_b else (k, n), dtype)
    c_np = uniform(rng, c_shape, dtype) if c_shape is not None else None
    alpha, beta = (float(v) for v in rng.uniform(0.5, 2.0, 2).astype(np.float32))
    a64, b64 = a_np.astype(np.float64), b_np.astype(np.float64)
    a64, b64 = (a64.T if trans_a else a64), (b64.T if trans_b else b64)
    c64 = c_np.astype(np.float64) if c_np is not None else 0.0
    ref = apply_activation(alpha * (a64 @ b64) + beta * c64, "hardswish", 1 / 6, 0.5)
    scale = alpha * (np.abs(a64) @ np.abs(b64)) + beta * np.abs(c64)
    a, b, out = device.upload(a_np), device.upload(b_np), poisoned(device, (m, n), dtype)
    c = device.upload(c_np) if c_np is not None else None
    run(device, lambda rec: record_gemm(rec, a, b, out, c, alpha=alpha, beta=beta, trans_a=trans_a,
                                        trans_b=trans_b, activation="hardswish", act_alpha=1 / 6, act_beta=0.5))
    check_close(device.download(out), ref, scale, f"gemv gemm {case} {np.dtype(dtype)}", seed, dtype)
    release(device, a, b, out, *([c] if c is not None else []))


def kernels_recorded(device: Device, record: object) -> list[str]:
    """The shaders of the dispatches `record(rec)` records (nothing is run)."""
    with Recorder(device) as rec:
        record(rec)  # type: ignore[operator]
        return [op.pipeline.kernel.shader for op in rec._ops if hasattr(op, "pipeline")]


def test_gemv_is_chosen_for_one_output_row_or_column_only(device: Device) -> None:
    def conv(x_shape: tuple[int, ...], w_shape: tuple[int, ...], **attrs: object) -> list[str]:
        x, w = device.tensor(x_shape), device.tensor(w_shape)
        out = device.tensor((x_shape[0], w_shape[0], 1 if x_shape[2] == 1 else x_shape[2] - w_shape[2] + 1,
                             1 if x_shape[3] == 1 else x_shape[3] - w_shape[3] + 1))
        try:
            return kernels_recorded(device, lambda rec: record_conv2d(rec, x, w, out, **attrs))  # type: ignore[arg-type]
        finally:
            release(device, x, w, out)

    def matmul(shape_a: tuple[int, ...], shape_b: tuple[int, ...], **attrs: object) -> list[str]:
        a, b = device.tensor(shape_a), device.tensor(shape_b)
        out = device.tensor(np.matmul(np.zeros(shape_a), np.zeros(shape_b)).shape)
        try:
            return kernels_recorded(device, lambda rec: record_matmul(rec, a, b, out, **attrs))  # type: ignore[arg-type]
        finally:
            release(device, a, b, out)

    assert conv((2, 512, 1, 1), (1280, 512, 1, 1)) == ["gemv"]
    assert conv((1, 512, 2, 1), (1280, 512, 1, 1)) == ["conv2d"]          # two output columns
    assert conv((1, 8, 1, 1), (4, 4, 1, 1), group=2) == ["conv2d"]        # grouped
    assert conv((1, 8, 3, 3), (4, 8, 3, 3)) == ["conv2d"]                 # a 3×3 conv making a 1×1 map
    assert conv((1, 8, 1, 1), (4, 8, 1, 1), tile="thin") == ["conv2d"]    # a tile asked for
    assert matmul((1, 1280), (1280, 4)) == ["gemv"]
    assert matmul((7, 33), (33, 1)) == ["gemv"]
    assert matmul((3, 1, 33), (3, 33, 6)) == ["gemv"]
    assert matmul((2, 33), (33, 2)) == ["gemm"]
    assert matmul((2, 1, 3, 1, 5), (1, 4, 1, 5, 6)) == ["gemm"]           # two batch dims after merging
    assert matmul((1, 1280), (1280, 4), tile="thin") == ["gemm"]


def test_gemv_sums_in_a_fixed_order(device: Device) -> None:
    """Two runs on the same inputs give the same bits (no atomics, no order left to the scheduler)."""
    rng, _ = fresh_rng()
    x, w = device.upload(uniform(rng, (1, 4099, 1, 1), np.float32)), device.upload(uniform(rng, (67, 4099, 1, 1),
                                                                                             np.float32))
    outs = [poisoned(device, (1, 67, 1, 1)) for _ in range(2)]
    for out in outs:
        run(device, lambda rec, out=out: record_conv2d(rec, x, w, out))  # type: ignore[misc]
    first, second = (device.download(o) for o in outs)
    assert not np.isnan(first).any() and np.array_equal(first, second)
    release(device, x, w, *outs)
