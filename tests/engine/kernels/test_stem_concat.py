"""stem_concat.comp (a stem's pooled Concat and its two 2×2 convolutions, padded below and to the right, in one
dispatch) against NumPy on fresh random inputs with poisoned outputs, and against what it replaces, the direct
kernel run twice and the pooled Concat: the same answer bit for bit, in fp32 and fp16 storage."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import STORAGE_DTYPES, TOLERANCES, check, fresh_rng, poisoned, release, run
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv import Conv2d
from vkocr.engine.kernels.layout import record_concat
from vkocr.engine.kernels.stem_concat import MAX_MIDDLE, MAX_SECOND, record_stem_concat
from vkocr.engine.ops.activation import apply_activation
from vkocr.engine.ops.conv import conv2d
from vkocr.engine.ops.pool import max_pool2d
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

RELU, NONE = ("relu", 0.0, 0.0), ("none", 0.0, 0.0)
SAME_UPPER = (0, 0, 1, 1)
# (N, C0, H, W), C1, C2, with biases, activations
CASES = [
    ((1, 24, 37, 70), 12, 24, (True, True), (RELU, RELU)),  # PP-OCRv6 det's stem, on a small map
    ((2, 5, 9, 33), 3, 7, (True, False), (RELU, ("hardsigmoid", 0.2, 0.5))),  # two images, a column past a tile
    ((1, 3, 1, 1), 1, 1, (False, True), (("leakyrelu", 0.1, 0.0), NONE)),  # one pixel: every tap but one padded
    ((1, 7, 6, 2), MAX_MIDDLE, 20, (True, True), (("gelu", 0.0, 0.0), RELU)),  # all of the middle's accumulators
    ((1, 5, 5, 40), 8, MAX_SECOND, (False, False), (RELU, ("sigmoid", 0.0, 0.0))),  # all of the second's
]


def make(rng: np.random.Generator, shape: tuple[int, ...], c1: int, c2: int, biases: tuple[bool, bool],
         dtype: type) -> list[np.ndarray | None]:
    """x (after a ReLU, as a stem's is: zeros among positives), w1, b1, w2, b2 drawn in float32 and stored as
    `dtype`, returned as float32 (what the kernel reads)."""
    def draw(*s: int) -> np.ndarray:
        return rng.uniform(-1, 1, s).astype(dtype).astype(np.float32)
    x = np.maximum(draw(*shape), 0.0)
    return [x, draw(c1, shape[1], 2, 2), draw(c1) if biases[0] else None, draw(c2, c1, 2, 2),
            draw(c2) if biases[1] else None]


def reference(x: np.ndarray, w1: np.ndarray, b1: np.ndarray | None, w2: np.ndarray, b2: np.ndarray | None,
              activations: tuple[tuple[str, float, float], ...], dtype: type) -> np.ndarray:
    mid = apply_activation(conv2d(x, w1, b1, pads=SAME_UPPER), *activations[0])
    mid = mid.astype(dtype).astype(np.float32)  # as the first convolution stores it
    conv = apply_activation(conv2d(mid, w2, b2, pads=SAME_UPPER), *activations[1])
    return np.concatenate([max_pool2d(x, kernel=(2, 2), strides=(1, 1), pads=SAME_UPPER), conv], axis=1)


def upload(device: Device, arrays: list[np.ndarray | None], dtype: type) -> list[Tensor | None]:
    return [device.upload(a.astype(dtype)) if a is not None else None for a in arrays]


@pytest.mark.parametrize("dtype", STORAGE_DTYPES)
@pytest.mark.parametrize(("shape", "c1", "c2", "biases", "activations"), CASES)
def test_the_stem_matches_numpy_and_the_direct_kernel_bit_for_bit(
        device: Device, shape: tuple[int, ...], c1: int, c2: int, biases: tuple[bool, bool],
        activations: tuple[tuple[str, float, float], ...], dtype: type) -> None:
    rng, seed = fresh_rng()
    arrays = make(rng, shape, c1, c2, biases, dtype)
    want = reference(*arrays, activations, dtype).astype(dtype)
    x, w1, b1, w2, b2 = tensors = upload(device, arrays, dtype)
    n, c0, h, w = shape
    out = poisoned(device, want.shape, dtype)
    mid, conv, apart = (poisoned(device, s, dtype) for s in ((n, c1, h, w), (n, c2, h, w), want.shape))
    run(device, lambda rec: record_stem_concat(rec, x, w1, b1, w2, b2, out, activations=activations))

    def three_kernels(rec: Recorder) -> None:  # the recorder puts barriers between them
        for src, weights, bias, dst, (act, alpha, beta) in ((x, w1, b1, mid, activations[0]),
                                                            (mid, w2, b2, conv, activations[1])):
            Conv2d(weights.shape, has_bias=bias is not None, pads=SAME_UPPER, activation=act, alpha=alpha,
                   beta=beta).record(rec, src, weights, dst, bias, direct=True)
        record_concat(rec, [x, conv], apart, 1, pool_first=(2, 2, 0, 0))

    run(device, three_kernels)
    got = device.download(out)
    what = f"stem {shape} -> {c1} -> {c2} {activations} {np.dtype(dtype)}"
    check(got, want, what, seed, TOLERANCES[np.dtype(dtype)])
    assert np.array_equal(got, device.download(apart)), f"{what}: not the three kernels' answer; seed {seed}"
    release(device, out, mid, conv, apart, *(t for t in tensors if t is not None))


BAD = [
    ("the second does not read the first's channels", (1, 4, 3, 3), (6, 4, 2, 2), (5, 5, 2, 2), (1, 9, 3, 3)),
    ("too many middle channels", (1, 4, 3, 3), (MAX_MIDDLE + 1, 4, 2, 2), (2, MAX_MIDDLE + 1, 2, 2), (1, 6, 3, 3)),
    ("too many output channels", (1, 4, 3, 3), (6, 4, 2, 2), (MAX_SECOND + 1, 6, 2, 2), (1, 37, 3, 3)),
    ("past the shared memory", (1, 4, 3, 3), (MAX_MIDDLE, 4, 2, 2), (MAX_SECOND, MAX_MIDDLE, 2, 2), (1, 36, 3, 3)),
    ("not 2×2", (1, 4, 3, 3), (6, 4, 3, 3), (5, 6, 2, 2), (1, 9, 3, 3)),
    ("the input is not the first's", (1, 3, 3, 3), (6, 4, 2, 2), (5, 6, 2, 2), (1, 9, 3, 3)),
    ("wrong output shape", (1, 4, 3, 3), (6, 4, 2, 2), (5, 6, 2, 2), (1, 5, 3, 3)),
    ("not NCHW", (4, 3, 3), (6, 4, 2, 2), (5, 6, 2, 2), (9, 3, 3)),
]


@pytest.mark.parametrize(("why", "x_shape", "w1_shape", "w2_shape", "out_shape"), BAD)
def test_the_stem_rejects_what_does_not_chain(device: Device, why: str, x_shape: tuple[int, ...],
                                              w1_shape: tuple[int, ...], w2_shape: tuple[int, ...],
                                              out_shape: tuple[int, ...]) -> None:
    x, w1, w2, out = (device.tensor(s) for s in (x_shape, w1_shape, w2_shape, out_shape))
    with pytest.raises(KernelArgumentError):
        run(device, lambda rec: record_stem_concat(rec, x, w1, None, w2, None, out))
    release(device, x, w1, w2, out)


def test_the_stem_refuses_mixed_storage(device: Device) -> None:
    x, w1 = device.tensor((1, 4, 3, 3), np.float16), device.tensor((6, 4, 2, 2), np.float16)
    w2, out = device.tensor((5, 6, 2, 2)), device.tensor((1, 9, 3, 3), np.float16)
    with pytest.raises(KernelArgumentError, match="share one storage dtype"):
        run(device, lambda rec: record_stem_concat(rec, x, w1, None, w2, None, out))
    release(device, x, w1, w2, out)
