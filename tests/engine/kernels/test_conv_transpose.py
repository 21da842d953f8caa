"""conv_transpose.comp against vkocr.engine.ops.conv.conv_transpose2d, fresh random inputs, outputs poisoned (NaN).
Each case also runs with float16 storage: the reference is float32 on the same float16 inputs, rounded once."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, check, fresh_rng, poisoned, release, run, storage_ref
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv_transpose import conv_transpose_output_shape, record_conv_transpose2d
from vkocr.engine.ops.activation import apply_activation
from vkocr.engine.ops.conv import conv_transpose2d

# (N, Cin, H, W), (Cout/group, kh, kw), group, strides, pads, dilations, output_padding
CASES = [
    ((1, 1, 1, 1), (1, 1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), (0, 0)),
    ((1, 8, 5, 7), (4, 2, 2), 1, (2, 2), (0, 0, 0, 0), (1, 1), (0, 0)),  # DBNet head upsampling
    ((2, 3, 9, 6), (17, 2, 2), 1, (2, 2), (0, 0, 0, 0), (1, 1), (0, 0)),
    ((1, 4, 7, 8), (1, 2, 2), 1, (2, 2), (0, 0, 0, 0), (1, 1), (0, 0)),
    ((1, 5, 6, 7), (3, 3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), (0, 0)),
    ((2, 6, 5, 5), (2, 3, 3), 3, (2, 2), (1, 1, 1, 1), (1, 1), (1, 1)),
    ((1, 4, 6, 5), (4, 4, 4), 4, (2, 2), (1, 1, 1, 1), (1, 1), (0, 0)),  # depthwise upsampling
    ((1, 3, 5, 4), (2, 3, 5), 1, (3, 2), (2, 0, 1, 3), (1, 1), (2, 1)),
    ((1, 2, 4, 6), (3, 3, 3), 1, (2, 1), (0, 1, 2, 0), (2, 3), (1, 0)),
    ((3, 17, 3, 3), (2, 1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), (0, 0)),
    ((1, 6, 11, 13), (1, 5, 5), 2, (2, 2), (2, 2, 2, 2), (1, 1), (1, 1)),
    ((1, 64, 20, 20), (64, 2, 2), 1, (2, 2), (0, 0, 0, 0), (1, 1), (0, 0)),
    ((2, 4, 5, 5), (6, 3, 3), 2, (2, 2), (1, 0, 1, 2), (1, 1), (1, 0)),  # 6 channels a group: blocks 4 + 2
    ((1, 3, 4, 4), (5, 4, 4), 1, (2, 2), (1, 1, 1, 1), (2, 1), (0, 1)),
]


def random_case(shape: tuple[int, ...], w_tail: tuple[int, int, int], group: int, with_bias: bool,
                dtype: type = np.float32) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    """Inputs drawn in float32 and stored as `dtype`, returned as float32 (exactly the stored values), so the
    references below compute on what the kernel reads."""
    rng, seed = fresh_rng()
    x = rng.uniform(-1, 1, shape).astype(dtype).astype(np.float32)
    w = rng.uniform(-1, 1, (shape[1], *w_tail)).astype(dtype).astype(np.float32)
    b = rng.uniform(-1, 1, (w_tail[0] * group,)).astype(dtype).astype(np.float32) if with_bias else None
    return x, w, b, seed


def run_case(device: Device, x_np: np.ndarray, w_np: np.ndarray, b_np: np.ndarray | None, ref: np.ndarray,
             attrs: dict[str, object], what: str, seed: int, dtype: type = np.float32) -> None:
    x, w = device.upload(x_np.astype(dtype)), device.upload(w_np.astype(dtype))
    b = device.upload(b_np.astype(dtype)) if b_np is not None else None
    out = poisoned(device, ref.shape, dtype)
    run(device, lambda rec: record_conv_transpose2d(rec, x, w, out, b, **attrs))
    check(device.download(out), storage_ref(ref, dtype), f"{what} {np.dtype(dtype)}", seed,
          TOLERANCES[np.dtype(dtype)])
    release(device, x, w, out, *([b] if b is not None else []))


ATTRS = ("shape", "w_tail", "group", "strides", "pads", "dilations", "output_padding")


def geometry_case(device: Device, shape: tuple[int, ...], w_tail: tuple[int, int, int], group: int,
                  strides: tuple[int, int], pads: tuple[int, ...], dilations: tuple[int, int],
                  output_padding: tuple[int, int], with_bias: bool, dtype: type = np.float32) -> None:
    x, w, b, seed = random_case(shape, w_tail, group, with_bias, dtype)
    attrs = {"strides": strides, "pads": pads, "dilations": dilations, "group": group,
             "output_padding": output_padding}
    ref = conv_transpose2d(x, w, b, **attrs)
    assert conv_transpose_output_shape(x.shape, w.shape, **attrs) == ref.shape
    run_case(device, x, w, b, ref, attrs, f"conv_transpose {shape} w{w.shape} {attrs} bias={with_bias}", seed,
             dtype)


@pytest.mark.parametrize(ATTRS, CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_transpose_matches_numpy(device: Device, shape: tuple[int, ...], w_tail: tuple[int, int, int],
                                      group: int, strides: tuple[int, int], pads: tuple[int, ...],
                                      dilations: tuple[int, int], output_padding: tuple[int, int],
                                      with_bias: bool) -> None:
    geometry_case(device, shape, w_tail, group, strides, pads, dilations, output_padding, with_bias)


@pytest.mark.parametrize(ATTRS, CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_transpose_float16_storage_matches_numpy(
    device: Device, shape: tuple[int, ...], w_tail: tuple[int, int, int], group: int, strides: tuple[int, int],
    pads: tuple[int, ...], dilations: tuple[int, int], output_padding: tuple[int, int], with_bias: bool,
) -> None:
    geometry_case(device, shape, w_tail, group, strides, pads, dilations, output_padding, with_bias, np.float16)


ACTIVATIONS = [("relu", 0.0, 0.0), ("clip", 0.0, 6.0), ("hardswish", 1 / 6, 0.5), ("sigmoid", 0.0, 0.0),
               ("hardsigmoid", 0.2, 0.5), ("leakyrelu", 0.1, 0.0), ("gelu", 0.0, 0.0)]


def activation_case(device: Device, activation: str, alpha: float, beta: float, dtype: type = np.float32) -> None:
    x, w, b, seed = random_case((1, 6, 5, 6), (3, 2, 2), 2, True, dtype)
    attrs = {"strides": (2, 2), "group": 2}
    ref = apply_activation(conv_transpose2d(x, w, b, **attrs), activation, alpha, beta)
    attrs |= {"activation": activation, "alpha": alpha, "beta": beta}
    run_case(device, x, w, b, ref, attrs, f"conv_transpose + {activation}", seed, dtype)


@pytest.mark.parametrize(("activation", "alpha", "beta"), ACTIVATIONS)
def test_conv_transpose_fused_activation(device: Device, activation: str, alpha: float, beta: float) -> None:
    activation_case(device, activation, alpha, beta)


@pytest.mark.parametrize(("activation", "alpha", "beta"), ACTIVATIONS)
def test_conv_transpose_fused_activation_float16_storage(device: Device, activation: str, alpha: float,
                                                         beta: float) -> None:
    activation_case(device, activation, alpha, beta, np.float16)


BAD_ARGUMENTS = [
    ("group does not divide Cin", (1, 6, 4, 4), (6, 2, 2, 2), (1, 8, 8, 8), {"group": 4}),
    ("weights Cin mismatch", (1, 6, 4, 4), (4, 2, 2, 2), (1, 2, 8, 8), {}),
    ("wrong output shape", (1, 6, 4, 4), (6, 2, 2, 2), (1, 2, 7, 8), {"strides": (2, 2)}),
    ("negative output_padding", (1, 6, 4, 4), (6, 2, 2, 2), (1, 2, 5, 5), {"output_padding": (-1, 0)}),
    ("pads eat the output", (1, 2, 1, 1), (2, 2, 1, 1), (1, 2, 1, 1), {"pads": (1, 0, 0, 0)}),
    ("zero dilation", (1, 6, 4, 4), (6, 2, 2, 2), (1, 2, 5, 5), {"dilations": (0, 1)}),
    ("not NCHW", (6, 4, 4), (6, 2, 2, 2), (2, 5, 5), {}),
    ("unknown activation", (1, 6, 4, 4), (6, 2, 2, 2), (1, 2, 5, 5), {"activation": "swish"}),
]


@pytest.mark.parametrize(("why", "x_shape", "w_shape", "out_shape", "attrs"), BAD_ARGUMENTS)
def test_conv_transpose_rejects_bad_arguments(device: Device, why: str, x_shape: tuple[int, ...],
                                              w_shape: tuple[int, ...], out_shape: tuple[int, ...],
                                              attrs: dict[str, object]) -> None:
    x, w, out = device.tensor(x_shape), device.tensor(w_shape), device.tensor(out_shape)
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_conv_transpose2d(rec, x, w, out, **attrs))
    release(device, x, w, out)


def test_conv_transpose_refuses_mixed_storage(device: Device) -> None:
    x, w = device.tensor((1, 6, 4, 4), np.float16), device.tensor((6, 2, 2, 2), np.float16)
    out, b32 = device.tensor((1, 2, 5, 5), np.float16), device.tensor((2,))
    with pytest.raises(KernelArgumentError, match="share one storage dtype"):
        run(device, lambda rec: record_conv_transpose2d(rec, x, w, out, b32))
    release(device, x, w, out, b32)


def test_conv_transpose_rejects_bad_bias(device: Device) -> None:
    x, w, out, b = (device.tensor(s) for s in [(1, 6, 4, 4), (6, 2, 2, 2), (1, 2, 5, 5), (3,)])
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_conv_transpose2d(rec, x, w, out, b))
    release(device, x, w, out, b)
