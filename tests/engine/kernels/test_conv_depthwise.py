"""conv2d_depthwise.comp against vkocr.engine.ops.conv.conv2d(group=C), fresh random inputs, outputs poisoned (NaN).
Each case also runs with float16 storage: the reference is float32 on the same float16 inputs, rounded once."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, check, fresh_rng, poisoned, release, run, storage_ref
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.depthwise import record_conv2d_depthwise
from vkocr.engine.ops.conv import conv2d

Pads = tuple[int, int, int, int]

# (N, C, H, W), (kh, kw), strides, pads, dilations
GEOMETRY_CASES = [
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((1, 3, 7, 9), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((2, 17, 13, 11), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((1, 8, 16, 16), (3, 3), (2, 2), (0, 0, 1, 1), (1, 1)),
    ((1, 5, 19, 23), (5, 5), (1, 1), (2, 2, 2, 2), (1, 1)),
    ((2, 4, 20, 17), (5, 5), (2, 2), (2, 2, 2, 2), (1, 1)),
    ((1, 6, 15, 14), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
    ((1, 2, 12, 21), (3, 5), (1, 2), (0, 3, 2, 1), (2, 1)),
    ((1, 3, 9, 8), (7, 7), (1, 1), (3, 3, 3, 3), (1, 1)),
    ((1, 3, 4, 5), (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((3, 1, 33, 70), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 16, 40, 40), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 7, 10, 10), (2, 2), (3, 3), (1, 0, 0, 1), (1, 1)),
    ((1, 4, 6, 6), (3, 1), (1, 1), (1, 0, 1, 0), (1, 1)),
    ((1, 3, 17, 10), (3, 3), (2, 1), (1, 1, 1, 1), (1, 1)),
    ((2, 3, 21, 19), (5, 5), (1, 1), (0, 2, 1, 0), (1, 2)),
    ((1, 12, 23, 29), (7, 7), (1, 1), (3, 3, 3, 3), (1, 1)),   # PP-OCRv6 det's neck
    ((1, 5, 6, 5), (7, 7), (1, 1), (3, 3, 3, 3), (1, 1)),      # a window wider than the plane
    ((2, 8, 1, 37), (1, 7), (1, 1), (0, 3, 0, 3), (1, 1)),     # PP-OCRv6 rec's 1x7 on a one-row map
    ((3, 5, 6, 21), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),     # rec's short maps: 15 planes, not whole workgroups of 4
    ((2, 7, 12, 19), (3, 3), (2, 1), (1, 1, 1, 1), (1, 1)),    # rec's stride (2, 1): 6 rows, 2 blocks of 3
    ((1, 9, 4, 13), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),     # 4 rows: a second block of 3 with one live
]

ACTIVATION_CASES = [
    ("none", 0.0, 0.0), ("relu", 0.0, 0.0), ("clip", 0.0, 6.0), ("clip", -0.3, 0.4),
    ("hardsigmoid", 0.2, 0.5), ("hardswish", 1 / 6, 0.5), ("sigmoid", 0.0, 0.0), ("leakyrelu", 0.1, 0.0),
    ("gelu", 0.0, 0.0),
]


def run_case(device: Device, shape: tuple[int, ...], kernel: tuple[int, int], strides: tuple[int, int],
             pads: Pads, dilations: tuple[int, int], with_bias: bool = True,
             activation: str = "none", alpha: float = 0.0, beta: float = 0.0, dtype: type = np.float32) -> None:
    rng, seed = fresh_rng()
    c = shape[1]
    x_np = rng.uniform(-1, 1, shape).astype(dtype)
    w_np = rng.uniform(-1, 1, (c, 1, *kernel)).astype(dtype)
    b_np = rng.uniform(-1, 1, (c,)).astype(dtype) if with_bias else None
    attrs = {"strides": strides, "pads": pads, "dilations": dilations,
             "activation": activation, "alpha": alpha, "beta": beta}
    b32 = b_np.astype(np.float32) if b_np is not None else None  # the exact result on the stored inputs
    ref = storage_ref(conv2d(x_np.astype(np.float32), w_np.astype(np.float32), b32, group=c, **attrs), dtype)
    x, w = device.upload(x_np), device.upload(w_np)
    b = device.upload(b_np) if b_np is not None else None
    out = poisoned(device, ref.shape, dtype)
    run(device, lambda rec: record_conv2d_depthwise(rec, x, w, out, b, **attrs))
    what = (f"depthwise {shape} k{kernel} s{strides} p{pads} d{dilations} bias={with_bias} {activation} "
            f"{np.dtype(dtype)}")
    check(device.download(out), ref, what, seed, TOLERANCES[np.dtype(dtype)])
    release(device, x, w, out, *([b] if b is not None else []))


@pytest.mark.parametrize(("shape", "kernel", "strides", "pads", "dilations"), GEOMETRY_CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_depthwise_geometry(device: Device, shape: tuple[int, ...], kernel: tuple[int, int],
                            strides: tuple[int, int], pads: Pads, dilations: tuple[int, int],
                            with_bias: bool) -> None:
    run_case(device, shape, kernel, strides, pads, dilations, with_bias)


@pytest.mark.parametrize(("shape", "kernel", "strides", "pads", "dilations"), GEOMETRY_CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_depthwise_geometry_float16_storage(device: Device, shape: tuple[int, ...], kernel: tuple[int, int],
                                            strides: tuple[int, int], pads: Pads, dilations: tuple[int, int],
                                            with_bias: bool) -> None:
    run_case(device, shape, kernel, strides, pads, dilations, with_bias, dtype=np.float16)


@pytest.mark.parametrize(("activation", "alpha", "beta"), ACTIVATION_CASES)
@pytest.mark.parametrize(("kernel", "strides"), [((3, 3), (1, 1)), ((5, 5), (2, 2)), ((7, 7), (1, 1))])
def test_depthwise_activations(device: Device, activation: str, alpha: float, beta: float,
                               kernel: tuple[int, int], strides: tuple[int, int]) -> None:
    pad = kernel[0] // 2
    run_case(device, (2, 5, 11, 13), kernel, strides, (pad,) * 4, (1, 1), True, activation, alpha, beta)


@pytest.mark.parametrize(("activation", "alpha", "beta"), ACTIVATION_CASES)
@pytest.mark.parametrize(("kernel", "strides"), [((3, 3), (1, 1)), ((5, 5), (2, 2)), ((7, 7), (1, 1))])
def test_depthwise_activations_float16_storage(device: Device, activation: str, alpha: float, beta: float,
                                               kernel: tuple[int, int], strides: tuple[int, int]) -> None:
    pad = kernel[0] // 2
    run_case(device, (2, 5, 11, 13), kernel, strides, (pad,) * 4, (1, 1), True, activation, alpha, beta,
             dtype=np.float16)


def test_depthwise_benchmark_shape(device: Device) -> None:
    """The shape that matters for speed: 3×3 on 1×128×160×160 (correctness only here)."""
    run_case(device, (1, 128, 160, 160), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), True, "relu")


def test_depthwise_benchmark_shape_float16_storage(device: Device) -> None:
    run_case(device, (1, 128, 160, 160), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), True, "relu", dtype=np.float16)


def test_depthwise_replay_is_stable(device: Device) -> None:
    """One recording submitted twice writes the same result."""
    from vkocr.engine.recorder import Recorder

    rng, seed = fresh_rng()
    x_np = rng.uniform(-1, 1, (1, 4, 9, 9)).astype(np.float32)
    w_np = rng.uniform(-1, 1, (4, 1, 3, 3)).astype(np.float32)
    ref = conv2d(x_np, w_np, group=4, pads=(1, 1, 1, 1))
    x, w, out = device.upload(x_np), device.upload(w_np), poisoned(device, ref.shape)
    with Recorder(device) as rec:
        record_conv2d_depthwise(rec, x, w, out, pads=(1, 1, 1, 1))
        rec.run()
        check(device.download(out), ref, "first submission", seed)
        device.write(out, np.full(ref.shape, np.nan, np.float32))
        rec.run()
    check(device.download(out), ref, "replay", seed)
    release(device, x, w, out)


BAD_ARGUMENTS = [
    ("wrong weight shape", (1, 4, 8, 8), (4, 2, 3, 3), (1, 4, 6, 6), {}),
    ("channel mismatch", (1, 4, 8, 8), (3, 1, 3, 3), (1, 4, 6, 6), {}),
    ("wrong output shape", (1, 4, 8, 8), (4, 1, 3, 3), (1, 4, 8, 8), {}),
    ("not NCHW", (4, 8, 8), (4, 1, 3, 3), (4, 6, 6), {}),
    ("zero stride", (1, 4, 8, 8), (4, 1, 3, 3), (1, 4, 6, 6), {"strides": (0, 1)}),
    ("negative pad", (1, 4, 8, 8), (4, 1, 3, 3), (1, 4, 6, 6), {"pads": (-1, 0, 0, 0)}),
    ("three pads", (1, 4, 8, 8), (4, 1, 3, 3), (1, 4, 6, 6), {"pads": (1, 1, 1)}),
    ("kernel larger than input", (1, 4, 2, 2), (4, 1, 3, 3), (1, 4, 1, 1), {}),
    ("unknown activation", (1, 4, 8, 8), (4, 1, 3, 3), (1, 4, 6, 6), {"activation": "mish"}),
]


@pytest.mark.parametrize(("why", "x_shape", "w_shape", "out_shape", "attrs"), BAD_ARGUMENTS)
def test_depthwise_rejects_bad_arguments(device: Device, why: str, x_shape: tuple[int, ...],
                                         w_shape: tuple[int, ...], out_shape: tuple[int, ...],
                                         attrs: dict[str, object]) -> None:
    x = device.tensor(x_shape)
    w = device.tensor(w_shape)
    out = device.tensor(out_shape)
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_conv2d_depthwise(rec, x, w, out, **attrs))
    release(device, x, w, out)


def test_depthwise_rejects_bad_bias_and_dtype(device: Device) -> None:
    x, w, out = device.tensor((1, 4, 8, 8)), device.tensor((4, 1, 3, 3)), device.tensor((1, 4, 6, 6))
    bad_bias, int_x = device.tensor((5,)), device.tensor((1, 4, 8, 8), np.int32)
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_conv2d_depthwise(rec, x, w, out, bad_bias))
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_conv2d_depthwise(rec, int_x, w, out))
    release(device, x, w, out, bad_bias, int_x)


def test_depthwise_refuses_mixed_storage(device: Device) -> None:
    """One storage dtype per kernel: float16 activations with float32 weights (or bias) are refused."""
    x, out = device.tensor((1, 4, 8, 8), np.float16), device.tensor((1, 4, 6, 6), np.float16)
    w16, w32, b32 = device.tensor((4, 1, 3, 3), np.float16), device.tensor((4, 1, 3, 3)), device.tensor((4,))
    with pytest.raises(KernelArgumentError, match="share one storage dtype"):
        run(device, lambda rec: record_conv2d_depthwise(rec, x, w32, out))
    with pytest.raises(KernelArgumentError, match="share one storage dtype"):
        run(device, lambda rec: record_conv2d_depthwise(rec, x, w16, out, b32))
    release(device, x, out, w16, w32, b32)


def post_affine_case(device: Device, activation: str, dtype: type = np.float32) -> None:
    rng, seed = fresh_rng()
    scale, shift = (float(v) for v in rng.uniform(-2.0, 2.0, 2).astype(np.float32))
    x_np = rng.uniform(-1, 1, (2, 6, 13, 11)).astype(dtype)
    w_np = rng.uniform(-1, 1, (6, 1, 3, 3)).astype(dtype)
    b_np = rng.uniform(-1, 1, (6,)).astype(dtype)
    attrs = {"strides": (2, 2), "pads": (1, 1, 1, 1), "dilations": (1, 1), "activation": activation,
             "alpha": 1 / 6, "beta": 0.5}
    x32, w32, b32 = (a.astype(np.float32) for a in (x_np, w_np, b_np))
    exact = conv2d(x32, w32, b32, group=6, **attrs) * np.float32(scale) + np.float32(shift)  # type: ignore[arg-type]
    ref = storage_ref(exact, dtype)
    x, w, b = device.upload(x_np), device.upload(w_np), device.upload(b_np)
    out = poisoned(device, ref.shape, dtype)
    run(device, lambda rec: record_conv2d_depthwise(rec, x, w, out, b, post_affine=(scale, shift),
                                                    **attrs))  # type: ignore[arg-type]
    check(device.download(out), ref, f"depthwise {activation} · {scale} + {shift} {np.dtype(dtype)}", seed,
          TOLERANCES[np.dtype(dtype)])
    release(device, x, w, b, out)


@pytest.mark.parametrize("activation", ["none", "hardswish"])
def test_depthwise_post_affine(device: Device, activation: str) -> None:
    """act(conv) · scale + shift in the epilogue (a fused learnable affine block), fresh scale and shift."""
    post_affine_case(device, activation)


@pytest.mark.parametrize("activation", ["none", "hardswish"])
def test_depthwise_post_affine_float16_storage(device: Device, activation: str) -> None:
    post_affine_case(device, activation, np.float16)
