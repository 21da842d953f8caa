"""conv_transpose_pair.comp (two ConvTransposes whose kernels equal their strides, the middle map never stored)
against NumPy on fresh random inputs with poisoned outputs, and against conv_transpose.comp run twice: the same
answer bit for bit, in fp32 and fp16 storage."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import (
    STORAGE_DTYPES,
    TOLERANCES,
    check,
    fresh_rng,
    poisoned,
    release,
    run,
    storage_ref,
)
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv_transpose import MAX_PAIR_MIDDLE, record_conv_transpose2d, record_conv_transpose_pair
from vkocr.engine.ops.activation import apply_activation
from vkocr.engine.ops.conv import conv_transpose2d
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

RELU, SIGMOID = ("relu", 0.0, 0.0), ("sigmoid", 0.0, 0.0)
# (N, Cin, H, W), C1, (K1H, K1W), C2, (K2H, K2W), with biases, activations
CASES = [
    ((1, 24, 7, 9), 24, (2, 2), 1, (2, 2), (True, True), (RELU, SIGMOID)),  # DB's head
    ((2, 5, 3, 4), 3, (2, 2), 2, (2, 2), (True, False), (RELU, ("none", 0.0, 0.0))),
    ((1, 3, 5, 2), 7, (3, 1), 3, (1, 2), (False, True), (("hardsigmoid", 0.2, 0.5), ("gelu", 0.0, 0.0))),
    ((1, 1, 1, 1), 1, (1, 1), 1, (1, 1), (False, False), (("none", 0.0, 0.0), ("none", 0.0, 0.0))),
    ((3, 15, 4, 3), MAX_PAIR_MIDDLE, (2, 2), 5, (2, 3), (True, True), (("leakyrelu", 0.1, 0.0), SIGMOID)),
]


def make(rng: np.random.Generator, shape: tuple[int, ...], c1: int, k1: tuple[int, int], c2: int,
         k2: tuple[int, int], biases: tuple[bool, bool], dtype: type) -> list[np.ndarray | None]:
    """x, w1, b1, w2, b2 drawn in float32 and stored as `dtype`, returned as float32 (what the kernel reads)."""
    def draw(*s: int) -> np.ndarray:
        return rng.uniform(-1, 1, s).astype(dtype).astype(np.float32)
    return [draw(*shape), draw(shape[1], c1, *k1), draw(c1) if biases[0] else None, draw(c1, c2, *k2),
            draw(c2) if biases[1] else None]


def reference(x: np.ndarray, w1: np.ndarray, b1: np.ndarray | None, w2: np.ndarray, b2: np.ndarray | None,
              activations: tuple[tuple[str, float, float], ...], dtype: type) -> np.ndarray:
    mid = apply_activation(conv_transpose2d(x, w1, b1, strides=w1.shape[2:]), *activations[0])
    mid = mid.astype(dtype).astype(np.float32)  # as the first ConvTranspose stores it
    return apply_activation(conv_transpose2d(mid, w2, b2, strides=w2.shape[2:]), *activations[1])


def upload(device: Device, arrays: list[np.ndarray | None], dtype: type) -> list[Tensor | None]:
    return [device.upload(a.astype(dtype)) if a is not None else None for a in arrays]


@pytest.mark.parametrize("dtype", STORAGE_DTYPES)
@pytest.mark.parametrize(("shape", "c1", "k1", "c2", "k2", "biases", "activations"), CASES)
def test_the_pair_matches_numpy_and_the_two_kernels_bit_for_bit(
        device: Device, shape: tuple[int, ...], c1: int, k1: tuple[int, int], c2: int, k2: tuple[int, int],
        biases: tuple[bool, bool], activations: tuple[tuple[str, float, float], ...], dtype: type) -> None:
    rng, seed = fresh_rng()
    arrays = make(rng, shape, c1, k1, c2, k2, biases, dtype)
    want = reference(*arrays, activations, dtype)
    x, w1, b1, w2, b2 = tensors = upload(device, arrays, dtype)
    out = poisoned(device, want.shape, dtype)
    mid = poisoned(device, (shape[0], c1, shape[2] * k1[0], shape[3] * k1[1]), dtype)
    apart = poisoned(device, want.shape, dtype)
    run(device, lambda rec: record_conv_transpose_pair(rec, x, w1, b1, w2, b2, out, activations=activations))

    def two_kernels(rec: Recorder) -> None:  # the recorder puts a barrier between them
        (a1, al1, be1), (a2, al2, be2) = activations
        record_conv_transpose2d(rec, x, w1, mid, b1, strides=k1, activation=a1, alpha=al1, beta=be1)
        record_conv_transpose2d(rec, mid, w2, apart, b2, strides=k2, activation=a2, alpha=al2, beta=be2)

    run(device, two_kernels)
    got = device.download(out)
    what = f"pair {shape} {c1}x{k1} -> {c2}x{k2} {activations} {np.dtype(dtype)}"
    check(got, storage_ref(want, dtype), what, seed, TOLERANCES[np.dtype(dtype)])
    assert np.array_equal(got, device.download(apart)), f"{what}: not the two kernels' answer; seed {seed}"
    release(device, out, mid, apart, *(t for t in tensors if t is not None))


BAD = [
    ("the second does not read the first's channels", (1, 4, 3, 3), (4, 6, 2, 2), (5, 1, 2, 2), (1, 1, 12, 12)),
    ("too many middle channels", (1, 4, 3, 3), (4, MAX_PAIR_MIDDLE + 1, 2, 2), (MAX_PAIR_MIDDLE + 1, 1, 2, 2),
     (1, 1, 12, 12)),
    ("the first's weights past shared memory", (1, 17, 3, 3), (17, MAX_PAIR_MIDDLE, 2, 2),
     (MAX_PAIR_MIDDLE, 1, 2, 2), (1, 1, 12, 12)),
    ("the input is not the first's", (1, 3, 3, 3), (4, 6, 2, 2), (6, 1, 2, 2), (1, 1, 12, 12)),
    ("wrong output shape", (1, 4, 3, 3), (4, 6, 2, 2), (6, 1, 2, 2), (1, 1, 12, 11)),
    ("not NCHW", (4, 3, 3), (4, 6, 2, 2), (6, 1, 2, 2), (1, 12, 12)),
]


@pytest.mark.parametrize(("why", "x_shape", "w1_shape", "w2_shape", "out_shape"), BAD)
def test_the_pair_rejects_what_does_not_chain(device: Device, why: str, x_shape: tuple[int, ...],
                                               w1_shape: tuple[int, ...], w2_shape: tuple[int, ...],
                                               out_shape: tuple[int, ...]) -> None:
    x, w1, w2, out = (device.tensor(s) for s in (x_shape, w1_shape, w2_shape, out_shape))
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_conv_transpose_pair(rec, x, w1, None, w2, None, out))
    release(device, x, w1, w2, out)


def test_the_pair_refuses_mixed_storage(device: Device) -> None:
    x, w1 = device.tensor((1, 4, 3, 3), np.float16), device.tensor((4, 6, 2, 2), np.float16)
    w2, out = device.tensor((6, 1, 2, 2)), device.tensor((1, 1, 12, 12), np.float16)
    with pytest.raises(KernelArgumentError, match="share one storage dtype"):
        run(device, lambda rec: record_conv_transpose_pair(rec, x, w1, None, w2, None, out))
    release(device, x, w1, w2, out)
