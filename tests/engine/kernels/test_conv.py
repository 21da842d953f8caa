"""conv2d.comp (implicit GEMM) against NumPy on fresh random inputs (outputs poisoned with NaN)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, check, fresh_rng, poisoned, release, run, storage_ref
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv import conv_output_shape, record_conv2d
from vkocr.engine.kernels.matmul import TILES, GemmTile
from vkocr.engine.ops.conv import conv2d


@dataclass(frozen=True)
class Case:
    x: tuple[int, int, int, int]  # N, Cin, H, W
    cout: int
    kernel: tuple[int, int]
    strides: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilations: tuple[int, int] = (1, 1)
    group: int = 1
    bias: bool = True
    attrs: dict[str, object] = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        return (f"x{self.x} cout={self.cout} k{self.kernel} s{self.strides} p{self.pads} d{self.dilations} "
                f"g{self.group} bias={self.bias} {self.attrs}")


CASES = [
    Case((1, 8, 13, 11), 16, (1, 1)),                                       # pointwise: plain GEMM loader
    Case((2, 8, 13, 11), 16, (1, 1), bias=False),                           # pointwise, batch 2
    Case((1, 8, 13, 11), 12, (1, 1), strides=(2, 2)),                       # 1×1 stride 2
    Case((1, 6, 9, 10), 10, (1, 1), pads=(1, 0, 0, 2)),                     # 1×1 padded
    Case((1, 5, 17, 19), 24, (3, 3), pads=(1, 1, 1, 1)),
    Case((2, 5, 17, 19), 24, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1), bias=False),
    Case((1, 4, 16, 15), 8, (3, 3), strides=(2, 1), pads=(0, 1, 2, 1)),     # asymmetric pads, mixed stride
    Case((1, 6, 21, 23), 8, (3, 3), pads=(2, 2, 2, 2), dilations=(2, 2)),
    Case((1, 6, 21, 23), 8, (3, 3), pads=(2, 1, 0, 3), dilations=(2, 1)),
    Case((1, 4, 19, 17), 8, (5, 5), pads=(2, 2, 2, 2)),
    Case((2, 3, 23, 21), 9, (7, 7), strides=(2, 2), pads=(3, 3, 3, 3)),
    Case((1, 3, 12, 40), 7, (3, 5), pads=(1, 2, 1, 2)),                    # rectangular kernel
    Case((1, 8, 15, 13), 12, (3, 3), pads=(1, 1, 1, 1), group=2),
    Case((2, 12, 11, 9), 6, (3, 3), strides=(2, 2), pads=(0, 1, 1, 0), group=3, bias=False),
    Case((1, 16, 15, 17), 16, (3, 3), pads=(1, 1, 1, 1), group=16),        # depthwise
    Case((2, 16, 14, 13), 16, (5, 5), strides=(2, 2), pads=(2, 2, 2, 2), group=16, bias=False),
    Case((1, 8, 13, 11), 16, (3, 3), pads=(1, 1, 1, 1), group=8),          # depthwise, channel multiplier 2
    Case((1, 64, 9, 9), 40, (1, 1), group=4),                               # grouped pointwise
    Case((1, 3, 2, 3), 5, (3, 3), pads=(1, 1, 1, 1)),                      # output smaller than any tile
    Case((1, 1, 1, 1), 1, (1, 1)),
    Case((1, 33, 10, 14), 130, (3, 3), pads=(1, 1, 1, 1)),                 # M beyond one tile
]

# Shallow pointwise convs of at least VECTOR_STORE_MIN_COUT outputs store a thread's 4 columns at once where the
# row starts 4-aligned, element by element elsewhere (rows of an odd H·W) and past the last whole vector.
VECTOR_STORE_CASES = [
    Case((2, 24, 12, 20), 48, (1, 1)),                                      # H·W = 240: every row aligned
    Case((1, 48, 13, 11), 96, (1, 1), bias=False),                          # H·W = 143: rows alternate
    Case((1, 24, 6, 9), 64, (1, 1), attrs={"activation": "hardswish", "alpha": 1 / 6, "beta": 0.5}),  # H·W = 54
]


def run_case(device: Device, case: Case, tile: str | None = None, dtype: type = np.float32) -> None:
    rng, seed = fresh_rng()
    cin = case.x[1]
    x_np = rng.uniform(-1.0, 1.0, case.x).astype(dtype)
    w_np = rng.uniform(-1.0, 1.0, (case.cout, cin // case.group, *case.kernel)).astype(dtype)
    b_np = rng.uniform(-1.0, 1.0, (case.cout,)).astype(dtype) if case.bias else None
    attrs = dict(strides=case.strides, pads=case.pads, dilations=case.dilations, group=case.group, **case.attrs)
    b32 = b_np.astype(np.float32) if b_np is not None else None  # the exact result on the stored inputs
    ref = storage_ref(conv2d(x_np.astype(np.float32), w_np.astype(np.float32), b32, **attrs),  # type: ignore[arg-type]
                      dtype)
    x, w, out = device.upload(x_np), device.upload(w_np), poisoned(device, ref.shape, dtype)
    b = device.upload(b_np) if b_np is not None else None
    run(device, lambda rec: record_conv2d(rec, x, w, out, b, tile=tile, **attrs))  # type: ignore[arg-type]
    check(device.download(out), ref, f"conv2d {case} tile={tile} {np.dtype(dtype)}", seed,
          TOLERANCES[np.dtype(dtype)])
    release(device, x, w, out, *([b] if b is not None else []))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_conv2d_matches_numpy(device: Device, case: Case) -> None:
    run_case(device, case)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", VECTOR_STORE_CASES, ids=str)
def test_conv2d_vector_stores_match_numpy(device: Device, case: Case, dtype: type) -> None:
    run_case(device, case, dtype=dtype)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_conv2d_float16_storage_matches_numpy(device: Device, case: Case) -> None:
    run_case(device, case, dtype=np.float16)


def test_conv2d_refuses_mixed_storage(device: Device) -> None:
    x = device.upload(np.ones((1, 2, 4, 4), np.float16))
    w = device.upload(np.ones((3, 2, 1, 1), np.float32))
    out = device.upload(np.ones((1, 3, 4, 4), np.float16))
    with pytest.raises(KernelArgumentError, match="share one storage dtype"):
        run(device, lambda rec: record_conv2d(rec, x, w, out))
    release(device, x, w, out)


@pytest.mark.parametrize("tile", list(TILES))
@pytest.mark.parametrize("case", [CASES[1], CASES[5], CASES[13], CASES[-1]], ids=str)
def test_conv2d_every_tile(device: Device, case: Case, tile: str) -> None:
    run_case(device, case, tile)


# tiles that fetch 8 elements of one operand per step (two vec4s in gemm_tile.glsl), as scripts/sweep_conv_tiles.py
# times them: B (wide, BK 16), A (tall, BK 16), B on 128 invocations (8×8 per thread)
DEEP_TILES = [GemmTile(64, 128, 16, 4, 8), GemmTile(128, 64, 16, 8, 4), GemmTile(64, 128, 8, 8, 8)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("tile", DEEP_TILES, ids=str)
@pytest.mark.parametrize("case", [CASES[1], CASES[5], CASES[-1]], ids=str)
def test_conv2d_tiles_fetching_eight_per_operand(device: Device, case: Case, tile: GemmTile, dtype: type) -> None:
    run_case(device, case, tile, dtype)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("activation", "alpha", "beta"),
    [
        ("none", 0.0, 0.0), ("relu", 0.0, 0.0), ("clip", 0.0, 6.0), ("hardsigmoid", 1 / 6, 0.5),
        ("hardswish", 1 / 6, 0.5), ("sigmoid", 0.0, 0.0), ("leakyrelu", 0.1, 0.0), ("gelu", 0.0, 0.0),
    ],
)
def test_conv2d_fused_activation(device: Device, activation: str, alpha: float, beta: float) -> None:
    attrs = {"activation": activation, "alpha": alpha, "beta": beta}
    run_case(device, Case((1, 6, 12, 11), 20, (3, 3), pads=(1, 1, 1, 1), attrs=attrs))


def test_conv_output_shape() -> None:
    assert conv_output_shape((2, 3, 17, 19), (8, 3, 3, 3), pads=(1, 1, 1, 1)) == (2, 8, 17, 19)
    assert conv_output_shape((1, 4, 16, 15), (8, 4, 3, 3), strides=(2, 1), pads=(0, 1, 2, 1)) == (1, 8, 8, 15)
    assert conv_output_shape((1, 6, 21, 23), (8, 3, 3, 3), dilations=(2, 2), group=2) == (1, 8, 17, 19)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs"),
    [
        ((1, 6, 8, 8), (4, 4, 3, 3), {"group": 2}),        # weight channels ≠ Cin / group
        ((1, 6, 8, 8), (5, 3, 3, 3), {"group": 2}),        # Cout not divisible by group
        ((1, 5, 8, 8), (4, 1, 3, 3), {"group": 2}),        # Cin not divisible by group
        ((1, 3, 2, 2), (4, 3, 3, 3), {}),                  # kernel larger than the input: empty output
        ((3, 8, 8), (4, 3, 3, 3), {}),                     # not NCHW
        ((1, 3, 8, 8), (4, 3, 3, 3), {"strides": (0, 1)}),
        ((1, 3, 8, 8), (4, 3, 3, 3), {"pads": (1, 1)}),
    ],
)
def test_bad_shapes_raise(x_shape: tuple[int, ...], w_shape: tuple[int, ...], attrs: dict[str, object]) -> None:
    with pytest.raises(KernelArgumentError):
        conv_output_shape(x_shape, w_shape, **attrs)  # type: ignore[arg-type]


def test_bad_arguments_raise(device: Device) -> None:
    x, w, out = device.tensor((1, 3, 8, 8)), device.tensor((4, 3, 3, 3)), device.tensor((1, 4, 6, 6))
    bad_bias, bad_out = device.tensor((3,)), device.tensor((1, 4, 8, 8))
    for record in [
        lambda rec: record_conv2d(rec, x, w, bad_out),
        lambda rec: record_conv2d(rec, x, w, out, bad_bias),
        lambda rec: record_conv2d(rec, x, w, out, activation="mish"),
        lambda rec: record_conv2d(rec, x, w, out, group=3),
    ]:
        with pytest.raises(KernelArgumentError):
            run(device, record)
    release(device, x, w, out, bad_bias, bad_out)


@pytest.mark.parametrize("activation", ["none", "hardswish"])
@pytest.mark.parametrize("case", [CASES[1], CASES[-1]], ids=str)
def test_conv2d_post_affine(device: Device, case: Case, activation: str) -> None:
    """act(conv) · scale + shift in the epilogue (a fused learnable affine block), fresh scale and shift."""
    rng, seed = fresh_rng()
    scale, shift = (float(v) for v in rng.uniform(-2.0, 2.0, 2).astype(np.float32))
    cin = case.x[1]
    x_np = rng.uniform(-1.0, 1.0, case.x).astype(np.float32)
    w_np = rng.uniform(-1.0, 1.0, (case.cout, cin // case.group, *case.kernel)).astype(np.float32)
    attrs = dict(strides=case.strides, pads=case.pads, dilations=case.dilations, group=case.group,
                 activation=activation, alpha=1 / 6, beta=0.5)
    ref = conv2d(x_np, w_np, None, **attrs) * np.float32(scale) + np.float32(shift)  # type: ignore[arg-type]
    x, w, out = device.upload(x_np), device.upload(w_np), poisoned(device, ref.shape)
    run(device, lambda rec: record_conv2d(rec, x, w, out, None, post_affine=(scale, shift),  # type: ignore[arg-type]
                                          **attrs))
    check(device.download(out), ref, f"conv2d {case} {activation} · {scale} + {shift}", seed)
    release(device, x, w, out)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", [CASES[0], CASES[4], CASES[13], *VECTOR_STORE_CASES[:2]], ids=str)
def test_conv2d_adds_a_residual_after_its_epilogue(device: Device, case: Case, dtype: type) -> None:
    """out = act(conv + b) + r, r read at out's own index (passes.fuse_residual's fused Add)."""
    rng, seed = fresh_rng()
    x_np = rng.uniform(-1.0, 1.0, case.x).astype(dtype)
    w_np = rng.uniform(-1.0, 1.0, (case.cout, case.x[1] // case.group, *case.kernel)).astype(dtype)
    attrs = dict(strides=case.strides, pads=case.pads, dilations=case.dilations, group=case.group)
    plain = conv2d(x_np.astype(np.float32), w_np.astype(np.float32), None, activation="relu",
                   **attrs)  # type: ignore[arg-type]
    r_np = rng.uniform(-1.0, 1.0, plain.shape).astype(dtype)
    ref = storage_ref(plain + r_np.astype(np.float32), dtype)
    x, w, r, out = device.upload(x_np), device.upload(w_np), device.upload(r_np), poisoned(device, ref.shape, dtype)
    run(device, lambda rec: record_conv2d(rec, x, w, out, activation="relu", residual=r, **attrs))  # type: ignore[arg-type]
    check(device.download(out), ref, f"conv2d+residual {case} {np.dtype(dtype)}", seed, TOLERANCES[np.dtype(dtype)])
    bad = device.upload(np.ones((1, 1, 1, 1), dtype))
    with pytest.raises(KernelArgumentError, match="residual"):
        run(device, lambda rec: record_conv2d(rec, x, w, out, residual=bad, **attrs))  # type: ignore[arg-type]
    release(device, x, w, r, out, bad)


def test_shallow_pointwise_convs_take_the_thin_tile(device: Device) -> None:
    """A 1×1 conv shallower than SHALLOW_POINTWISE_K runs on the thin tile where it makes MIN_GROUPS workgroups
    (det's 48..96-channel ones: faster on the H100 than the wide or large tile), deeper ones keep pick_tile's."""
    from vkocr.engine.kernels.conv import SHALLOW_POINTWISE_K, Conv2d
    from vkocr.engine.recorder import Recorder

    def constants(cin: int, cout: int, side: int) -> tuple[int, ...]:
        x = device.upload(np.ones((1, cin, side, side), np.float32))
        w = device.upload(np.ones((cout, cin, 1, 1), np.float32))
        out = device.tensor((1, cout, side, side), np.float32)
        with Recorder(device) as rec:
            Conv2d(w.shape).record(rec, x, w, out, coopmat=False)
            picked = next(op.pipeline.constants for op in rec._ops if hasattr(op, "pipeline"))
        release(device, x, w, out)
        return tuple(picked[3:8])

    thin, wide = TILES["thin"], TILES["wide"]
    shape = (thin.bm, thin.bn, thin.bk, thin.tm, thin.tn)
    assert constants(48, 96, 128) == shape
    assert constants(SHALLOW_POINTWISE_K - 1, 96, 128) == shape
    assert constants(SHALLOW_POINTWISE_K, 96, 128) == (wide.bm, wide.bn, wide.bk, wide.tm, wide.tn)


def test_vector_stores_only_for_shallow_pointwise_convs_of_many_outputs(device: Device) -> None:
    """conv2d.comp's VECTOR_STORES constant (the last but one) is set for 1×1 convs shallower than
    SHALLOW_POINTWISE_K with at least VECTOR_STORE_MIN_COUT outputs, and for no other; VECTOR_LOADS (the last) for
    every 1×1 conv."""
    from vkocr.engine.kernels.conv import SHALLOW_POINTWISE_K, VECTOR_STORE_MIN_COUT, Conv2d
    from vkocr.engine.recorder import Recorder

    def vector_flags(cin: int, cout: int, kernel: int) -> tuple[int, int]:
        x = device.upload(np.ones((1, cin, 16, 16), np.float32))
        w = device.upload(np.ones((cout, cin, kernel, kernel), np.float32))
        out = device.tensor((1, cout, 17 - kernel, 17 - kernel), np.float32)
        with Recorder(device) as rec:
            Conv2d(w.shape).record(rec, x, w, out, coopmat=False, direct=False, taps=False)
            picked = next(op.pipeline.constants for op in rec._ops if hasattr(op, "pipeline"))
        release(device, x, w, out)
        return int(picked[-2]), int(picked[-1])

    assert vector_flags(48, VECTOR_STORE_MIN_COUT, 1) == (1, 1)
    assert vector_flags(SHALLOW_POINTWISE_K - 1, 96, 1) == (1, 1)
    assert vector_flags(48, VECTOR_STORE_MIN_COUT - 1, 1) == (0, 1)
    assert vector_flags(SHALLOW_POINTWISE_K, 96, 1) == (0, 1)
    assert vector_flags(48, 96, 3) == (0, 0)
