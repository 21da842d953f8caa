"""gemm.comp (MatMul, Gemm) against NumPy on fresh random inputs (outputs poisoned with NaN).
Each case also runs with float16 storage (A, B, C and the output): the reference is computed on the same float16
inputs and rounded once, the kernel accumulates in float32."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, check, fresh_rng, poisoned, release, run, storage_ref
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.matmul import TILES, pick_tile, record_gemm, record_matmul
from vkocr.engine.ops.matmul import gemm, matmul

ODD = [1, 7, 33, 65, 130]
ACTIVATIONS = [
    ("none", 0.0, 0.0), ("relu", 0.0, 0.0), ("clip", 0.0, 6.0), ("hardsigmoid", 1 / 6, 0.5),
    ("hardswish", 1 / 6, 0.5), ("sigmoid", 0.0, 0.0), ("leakyrelu", 0.1, 0.0), ("gelu", 0.0, 0.0),
]


def uniform(rng: np.random.Generator, shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, shape).astype(dtype)


def run_matmul(device: Device, shape_a: tuple[int, ...], shape_b: tuple[int, ...], tile: str | None = None,
               dtype: type = np.float32) -> None:
    rng, seed = fresh_rng()
    a_np, b_np = uniform(rng, shape_a, dtype), uniform(rng, shape_b, dtype)
    # float32 storage: the float64 result; float16: the same, rounded once to what the kernel stores
    exact = matmul(a_np.astype(np.float64), b_np.astype(np.float64))
    ref = exact if dtype is np.float32 else storage_ref(exact, dtype).astype(np.float64)
    a, b, out = device.upload(a_np), device.upload(b_np), poisoned(device, ref.shape, dtype)
    run(device, lambda rec: record_matmul(rec, a, b, out, tile=tile))
    # Measured against the size of the terms (|A|·|B|), not of the result: a sum of K products of either sign
    # can nearly cancel, and a few outputs (M = N = 1) then give any float32 sum a large error relative to it.
    scale = float(np.linalg.norm(matmul(np.abs(a_np).astype(np.float64), np.abs(b_np).astype(np.float64))))
    got = device.download(out).astype(np.float64)
    what = f"matmul {shape_a}@{shape_b} tile={tile} {np.dtype(dtype)}"
    assert got.shape == ref.shape and not np.isnan(got).any(), f"{what}: unwritten (NaN) outputs; seed {seed}"
    err = float(np.linalg.norm(got - ref)) / scale
    tol = TOLERANCES[np.dtype(dtype)]
    assert err <= tol, f"{what}: error {err:.3g} of |A|·|B| > {tol}; seed {seed}"
    release(device, a, b, out)


@pytest.mark.parametrize(("m", "n", "k"), list(itertools.product(ODD, repeat=3)))
def test_matmul_odd_sizes(device: Device, m: int, n: int, k: int) -> None:
    run_matmul(device, (m, k), (k, n))


@pytest.mark.parametrize(("m", "n", "k"), list(itertools.product(ODD, repeat=3)))
def test_matmul_odd_sizes_float16_storage(device: Device, m: int, n: int, k: int) -> None:
    run_matmul(device, (m, k), (k, n), dtype=np.float16)


@pytest.mark.parametrize("tile", list(TILES))
@pytest.mark.parametrize(("m", "n", "k"), [(130, 65, 33), (1, 257, 7), (65, 1, 130), (200, 131, 17), (33, 129, 300)])
def test_matmul_every_tile(device: Device, tile: str, m: int, n: int, k: int) -> None:
    run_matmul(device, (m, k), (k, n), tile)


@pytest.mark.parametrize("tile", list(TILES))
@pytest.mark.parametrize(("m", "n", "k"), [(130, 65, 33), (1, 257, 7), (65, 1, 130), (200, 131, 17), (33, 129, 300)])
def test_matmul_every_tile_float16_storage(device: Device, tile: str, m: int, n: int, k: int) -> None:
    run_matmul(device, (m, k), (k, n), tile, np.float16)


BROADCAST_BATCHES = [
    ((2, 1, 5, 7), (3, 7, 4)),
    ((5, 7), (4, 7, 9)),
    ((4, 5, 7), (7, 9)),
    ((2, 3, 33, 7), (2, 3, 7, 65)),
    ((1, 3, 1, 2, 5, 7), (2, 1, 4, 1, 7, 3)),
    ((3, 1, 1, 1, 6), (1, 2, 4, 6, 1)),
]


@pytest.mark.parametrize(("shape_a", "shape_b"), BROADCAST_BATCHES)
def test_matmul_broadcast_batch(device: Device, shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> None:
    run_matmul(device, shape_a, shape_b)


@pytest.mark.parametrize(("shape_a", "shape_b"), BROADCAST_BATCHES)
def test_matmul_broadcast_batch_float16_storage(device: Device, shape_a: tuple[int, ...],
                                                shape_b: tuple[int, ...]) -> None:
    run_matmul(device, shape_a, shape_b, dtype=np.float16)


def run_gemm(device: Device, m: int, n: int, k: int, c_shape: tuple[int, ...] | None, dtype: type = np.float32,
             residual: bool = False, **attrs: object) -> None:
    """`residual`: an (M, N) tensor added after the activation and the product's rounding to the storage type
    (shape_fusion.fuse_residual's Add)."""
    rng, seed = fresh_rng()
    a_np = uniform(rng, (k, m) if attrs.get("trans_a") else (m, k), dtype)
    b_np = uniform(rng, (n, k) if attrs.get("trans_b") else (k, n), dtype)
    c_np = uniform(rng, c_shape, dtype) if c_shape is not None else None
    r_np = uniform(rng, (m, n), dtype) if residual else None
    kwargs = {key: v for key, v in attrs.items() if key != "tile"}
    c32 = c_np.astype(np.float32) if c_np is not None else None  # the exact result on the stored inputs
    exact = gemm(a_np.astype(np.float32), b_np.astype(np.float32), c32, **kwargs)  # type: ignore[arg-type]
    # the product rounded as the MatMul stored it, then the Add's sum rounded (the pair's answer, fused)
    ref = storage_ref(exact, dtype) if r_np is None else storage_ref(
        storage_ref(exact, dtype).astype(np.float32) + r_np.astype(np.float32), dtype)
    a, b, out = device.upload(a_np), device.upload(b_np), poisoned(device, ref.shape, dtype)
    c = device.upload(c_np) if c_np is not None else None
    r = device.upload(r_np) if r_np is not None else None
    run(device, lambda rec: record_gemm(rec, a, b, out, c, residual=r, **attrs))  # type: ignore[arg-type]
    check(device.download(out), ref, f"gemm M={m} N={n} K={k} C={c_shape} residual={residual} {attrs} "
          f"{np.dtype(dtype)}", seed, TOLERANCES[np.dtype(dtype)])
    release(device, a, b, out, *(t for t in (c, r) if t is not None))


@pytest.mark.parametrize("tile", list(TILES))
@pytest.mark.parametrize(("trans_a", "trans_b"), list(itertools.product([False, True], repeat=2)))
def test_gemm_transposes(device: Device, tile: str, trans_a: bool, trans_b: bool) -> None:
    run_gemm(device, 130, 67, 33, None, trans_a=trans_a, trans_b=trans_b, tile=tile)


@pytest.mark.parametrize("tile", list(TILES))
@pytest.mark.parametrize(("trans_a", "trans_b"), list(itertools.product([False, True], repeat=2)))
def test_gemm_transposes_float16_storage(device: Device, tile: str, trans_a: bool, trans_b: bool) -> None:
    run_gemm(device, 130, 67, 33, None, np.float16, trans_a=trans_a, trans_b=trans_b, tile=tile)


C_SHAPES = [(33,), (1, 33), (65, 1), (65, 33), (1,), (), (1, 1)]
ALPHA_BETA = [(1.0, 1.0), (0.5, -2.0)]


@pytest.mark.parametrize("c_shape", C_SHAPES)
@pytest.mark.parametrize(("alpha", "beta"), ALPHA_BETA)
def test_gemm_c_broadcast(device: Device, c_shape: tuple[int, ...], alpha: float, beta: float) -> None:
    run_gemm(device, 65, 33, 7, c_shape, alpha=alpha, beta=beta, trans_b=True)


@pytest.mark.parametrize("c_shape", C_SHAPES)
@pytest.mark.parametrize(("alpha", "beta"), ALPHA_BETA)
def test_gemm_c_broadcast_float16_storage(device: Device, c_shape: tuple[int, ...], alpha: float,
                                          beta: float) -> None:
    run_gemm(device, 65, 33, 7, c_shape, np.float16, alpha=alpha, beta=beta, trans_b=True)


@pytest.mark.parametrize(("activation", "act_alpha", "act_beta"), ACTIVATIONS)
def test_gemm_fused_activation(device: Device, activation: str, act_alpha: float, act_beta: float) -> None:
    run_gemm(device, 33, 130, 65, (130,), alpha=2.0, activation=activation, act_alpha=act_alpha, act_beta=act_beta)


@pytest.mark.parametrize(("activation", "act_alpha", "act_beta"), ACTIVATIONS)
def test_gemm_fused_activation_float16_storage(device: Device, activation: str, act_alpha: float,
                                               act_beta: float) -> None:
    run_gemm(device, 33, 130, 65, (130,), np.float16, alpha=2.0, activation=activation, act_alpha=act_alpha,
             act_beta=act_beta)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("tile", [*TILES, None])
@pytest.mark.parametrize(("m", "n", "k"), [(65, 33, 130), (40, 120, 120), (1, 33, 65), (33, 1, 65)])
def test_gemm_residual(device: Device, dtype: type, tile: str | None, m: int, n: int, k: int) -> None:
    """act(A·B + c) + R, R of the output's shape (SVTR's skip connections); one output row or column goes to
    gemv.comp unless a tile is forced."""
    run_gemm(device, m, n, k, (n,), dtype, residual=True, tile=tile, activation="gelu")


def test_gemm_residual_must_have_the_output_s_shape(device: Device) -> None:
    a, b, out, r = (device.tensor(s) for s in [(3, 4), (4, 5), (3, 5), (1, 5)])
    with pytest.raises(KernelArgumentError, match="gemm residual"):
        run(device, lambda rec: record_gemm(rec, a, b, out, residual=r))
    release(device, a, b, out, r)


def test_gemm_refuses_mixed_storage(device: Device) -> None:
    a, b, out = (device.tensor(s, np.float16) for s in [(3, 4), (4, 5), (3, 5)])
    c32, b32 = device.tensor((5,)), device.tensor((4, 5))
    for record in [
        lambda rec: record_gemm(rec, a, b, out, c32),  # C too shares the storage dtype
        lambda rec: record_matmul(rec, a, b32, out),
    ]:
        with pytest.raises(KernelArgumentError, match="share one storage dtype"):
            run(device, record)
    release(device, a, b, out, c32, b32)


def test_pick_tile_by_problem_size() -> None:
    assert pick_tile(2048, 2048, 1) == TILES["large"]
    assert pick_tile(240, 18710, 1, k=512) == TILES["large"]
    assert pick_tile(240, 18710, 1, k=120) == TILES["wide"]  # the CTC head: too shallow for large's 64 sums a lane
    assert pick_tile(1024, 1024, 1) == TILES["wide"]  # large would give 64 workgroups: too few
    assert pick_tile(16, 10000, 1) == TILES["thin"]
    assert pick_tile(100, 50, 1) == TILES["small"]
    assert pick_tile(2048, 2048, 1, "small") == TILES["small"]
    # too few workgroups with any tile and a deep K: K split between slices of a workgroup
    assert pick_tile(256, 196, 1, k=256) == TILES["sliced"]  # a 1×1 conv at 14×14
    assert pick_tile(4, 1, 1, k=1280) == TILES["sliced"]  # a classifier's head
    assert pick_tile(256, 196, 1, k=64) == TILES["small"]  # too shallow to split
    assert pick_tile(16, 20000, 1, k=512) == TILES["thin"]  # enough workgroups already
    assert pick_tile(384, 736, 1, k=768) == TILES["small"]  # 72 workgroups: the work decides, not the latency


def test_bad_arguments_raise(device: Device) -> None:
    t = {shape: device.tensor(shape) for shape in [(4,), (3, 4), (4, 5), (5, 4), (3, 5), (3, 4, 5), (2, 3, 5), (2,)]}
    cases = [
        lambda rec: record_matmul(rec, t[(3, 4)], t[(5, 4)], t[(3, 5)]),  # inner dims differ
        lambda rec: record_matmul(rec, t[(4,)], t[(4, 5)], t[(3, 5)]),  # 1-D operand
        lambda rec: record_matmul(rec, t[(3, 4)], t[(4, 5)], t[(5, 4)]),  # wrong output shape
        lambda rec: record_matmul(rec, t[(3, 4, 5)], t[(2, 3, 5)], t[(3, 4, 5)]),  # batch dims do not broadcast
        lambda rec: record_matmul(rec, t[(3, 4)], t[(4, 5)], t[(3, 5)], tile="huge"),
        lambda rec: record_gemm(rec, t[(3, 4)], t[(4, 5)], t[(3, 5)], t[(2,)]),  # C does not broadcast
        lambda rec: record_gemm(rec, t[(3, 4)], t[(4, 5)], t[(3, 5)], activation="mish"),
        lambda rec: record_gemm(rec, t[(3, 4)], t[(4, 5)], t[(3, 5)], trans_a=True),
        lambda rec: record_gemm(rec, t[(3, 4, 5)], t[(4, 5)], t[(3, 5)]),  # gemm is 2-D only
    ]
    for record in cases:
        with pytest.raises(KernelArgumentError):
            run(device, record)
    ints = device.upload(np.zeros((3, 4), np.int32))
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_matmul(rec, ints, t[(4, 5)], t[(3, 5)]))
    release(device, ints, *t.values())


def test_too_many_batch_dims_raise(device: Device) -> None:
    a, b = device.tensor((2, 1, 2, 1, 2, 3, 4)), device.tensor((1, 2, 1, 2, 1, 4, 5))
    out = device.tensor((2, 2, 2, 2, 2, 3, 5))
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_matmul(rec, a, b, out))
    release(device, a, b, out)
