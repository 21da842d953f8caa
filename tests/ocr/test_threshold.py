"""threshold_edges.comp against vkocr.agent.ocr.threshold_reference on fresh random maps, outputs poisoned (0xDEADBEEF) first:
the results must be identical bit for bit. One recording is replayed with new thresholds and dilate flags, and
the reference is checked against a direct construction of the runs (and against cv2.dilate when installed).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from tests.kernels.harness import fresh_rng, release, run
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.agent.ocr.threshold_kernel import record_threshold_edges, threshold_params
from vkocr.agent.ocr.threshold_reference import dilate2x2, edge_words, threshold_edges
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

POISON = 0xDEADBEEF
THRESH = 0.3


def poisoned_words(device: Device, shape: tuple[int, ...]) -> Tensor:
    return device.upload(np.full(shape, POISON, np.uint32))


def sparse_map(rng: np.random.Generator, shape: tuple[int, ...], thresh: float) -> np.ndarray:
    """Mostly below the threshold, with a few random rectangles above it, values exactly at the threshold
    (which are not above it) and NaN (never above it)."""
    h, w = shape[-2:]
    x = rng.uniform(0, thresh, (h, w)).astype(np.float32)
    for _ in range(max(1, h * w // 400)):
        y0, x0 = rng.integers(0, h), rng.integers(0, w)
        y1, x1 = y0 + rng.integers(1, 12), x0 + rng.integers(1, 60)
        x[y0:y1, x0:x1] = rng.uniform(thresh, 1, x[y0:y1, x0:x1].shape)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, max(1, flat.size // 50))] = np.float32(thresh)
    flat[rng.integers(0, flat.size, max(1, flat.size // 100))] = np.nan
    return x.reshape(shape)


def dense_map(rng: np.random.Generator, shape: tuple[int, ...], thresh: float) -> np.ndarray:
    """Uniform noise around the threshold: short runs everywhere, some values at it, some NaN."""
    x = rng.uniform(thresh - 0.5, thresh + 0.5, shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, max(1, flat.size // 20))] = np.float32(thresh)
    flat[rng.integers(0, flat.size, max(1, flat.size // 50))] = np.nan
    return x


def gpu_edges(device: Device, x_np: np.ndarray, thresh: float, dilate: bool) -> np.ndarray:
    h, w = x_np.shape[-2:]
    x, params = device.upload(x_np), device.upload(threshold_params(thresh, dilate))
    out = poisoned_words(device, (h, edge_words(w)))
    run(device, lambda rec: record_threshold_edges(rec, x, params, out))
    got = device.download(out)
    release(device, x, params, out)
    return got


def assert_same_edges(got: np.ndarray, ref: np.ndarray, what: str, seed: int) -> None:
    assert got.dtype == np.uint32, f"{what}: dtype {got.dtype}"
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, not {ref.shape}"
    bad = np.argwhere(got != ref)[:3]
    got_hex, ref_hex = [hex(got[tuple(b)]) for b in bad], [hex(ref[tuple(b)]) for b in bad]
    where = f"words differ at (row, word) {bad.tolist()}: {got_hex} != {ref_hex}"
    assert not bad.size, f"{what}: {where}; seed {seed}"


SHAPES = [
    (1, 1, 1, 1), (1, 1, 5, 31), (1, 1, 7, 32), (1, 1, 9, 33), (1, 1, 40, 100), (1, 1, 1, 100), (1, 1, 1, 32),
    (3, 1), (1, 1, 64, 736), (1, 1, 50, 1248), (1, 1, 17, 2000), (50, 33),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", ["sparse", "dense"])
@pytest.mark.parametrize("dilate", [False, True])
def test_threshold_edges_matches_numpy(device: Device, shape: tuple[int, ...], kind: str,
                                       dilate: bool) -> None:
    rng, seed = fresh_rng()
    x_np = (sparse_map if kind == "sparse" else dense_map)(rng, shape, THRESH)
    ref = threshold_edges(x_np, THRESH, dilate)
    assert_same_edges(gpu_edges(device, x_np, THRESH, dilate), ref, f"{kind} {shape} dilate={dilate}", seed)


@pytest.mark.parametrize("dilate", [False, True])
def test_threshold_edges_on_a_full_size_map(device: Device, dilate: bool) -> None:
    """A detector map of 736×3424 (W a multiple of 32: the last word holds only the edge at x = W)."""
    rng, seed = fresh_rng()
    x_np = sparse_map(rng, (1, 1, 736, 3424), THRESH)
    x_np[0, 0, :, -5:] = 0.9  # runs that end at the right border
    ref = threshold_edges(x_np, THRESH, dilate)
    assert (ref[:, -1] == 1).any()
    assert_same_edges(gpu_edges(device, x_np, THRESH, dilate), ref, f"736×3424 dilate={dilate}", seed)


@pytest.mark.parametrize("dilate", [False, True])
def test_threshold_edges_compares_zeros_infinities_and_denormals_as_ieee(device: Device,
                                                                         dilate: bool) -> None:
    """Threshold 0 (and the smallest denormal, and -0): -0 is not above +0 and denormals are not zero,
    whatever the GPU's float comparisons do with them."""
    rng, seed = fresh_rng()
    tiny = np.array([1, 2, 0x7fffff], np.uint32).view(np.float32)
    specials = np.array([0.0, -0.0, *tiny, *-tiny, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0], np.float32)
    x_np = rng.choice(specials, (6, 97)).astype(np.float32)
    for thresh in (0.0, -0.0, float(tiny[0]), float(-tiny[0]), np.inf, -np.inf, np.nan):
        ref = threshold_edges(x_np, thresh, dilate)
        assert_same_edges(gpu_edges(device, x_np, thresh, dilate), ref, f"specials, threshold {thresh}", seed)


def test_one_recording_replayed_with_new_params(device: Device) -> None:
    """The recording copies the params from host-visible staging; new thresholds and dilate flags take effect
    on every replay without recording again."""
    rng, seed = fresh_rng()
    shape = (1, 1, 45, 130)
    staging = device.pool.alloc(4 * 2, "upload")
    x_np = dense_map(rng, shape, 0.5)
    x, params = device.upload(x_np), device.tensor((2,), np.uint32)
    out = poisoned_words(device, (45, edge_words(130)))
    with Recorder(device) as rec:
        rec.copy(staging.view, params.view)
        record_threshold_edges(rec, x, params, out)
        rec.end()
        in_map = float(x_np[np.isfinite(x_np)][7])  # a threshold equal to some of the values
        cases = [(0.5, True), (0.5, False), (0.2, False), (0.7, True), (in_map, True), (in_map, False)]
        for thresh, dilate in cases:
            staging.array(np.uint32)[:] = threshold_params(thresh, dilate)
            staging.flush()
            rec.run()
            ref = threshold_edges(x_np, thresh, dilate)
            assert_same_edges(device.download(out), ref, f"replay, threshold {thresh} dilate={dilate}", seed)
    device.pool.free(staging)
    release(device, x, params, out)


# -- argument errors: each is raised before anything is recorded ---------------------------------------------

@pytest.fixture
def tensors(device: Device) -> Iterator[dict[str, Tensor]]:
    made = {
        "x": device.tensor((1, 1, 4, 40)),
        "params": device.tensor((2,), np.uint32),
        "out": device.tensor((4, 2), np.uint32),
    }
    yield made
    release(device, *made.values())


def rejected(device: Device, x: Tensor, params: Tensor, out: Tensor, match: str) -> None:
    with Recorder(device) as rec:
        with pytest.raises(KernelArgumentError, match=match):
            record_threshold_edges(rec, x, params, out)
        assert rec.dispatch_count == 0


def test_rejects_float64_input(device: Device, tensors: dict[str, Tensor]) -> None:
    x = device.tensor((1, 1, 4, 40), np.float64)
    rejected(device, x, tensors["params"], tensors["out"], "float32")
    release(device, x)


def test_rejects_leading_dims_other_than_1(device: Device, tensors: dict[str, Tensor]) -> None:
    x = device.tensor((2, 4, 40))
    rejected(device, x, tensors["params"], tensors["out"], "leading dims 1")
    release(device, x)


def test_rejects_a_rank_1_input(device: Device, tensors: dict[str, Tensor]) -> None:
    x = device.tensor((40,))
    rejected(device, x, tensors["params"], tensors["out"], "leading dims 1")
    release(device, x)


def test_rejects_an_empty_input(device: Device, tensors: dict[str, Tensor]) -> None:
    rejected(device, replace(tensors["x"], shape=(1, 1, 0, 40)), tensors["params"], tensors["out"], "empty")


def test_rejects_float_params(device: Device, tensors: dict[str, Tensor]) -> None:
    params = device.tensor((2,))
    rejected(device, tensors["x"], params, tensors["out"], "params must be uint32")
    release(device, params)


def test_rejects_params_of_one_word(device: Device, tensors: dict[str, Tensor]) -> None:
    params = device.tensor((1,), np.uint32)
    rejected(device, tensors["x"], params, tensors["out"], "at least 2 words")
    release(device, params)


def test_rejects_an_output_of_the_wrong_shape(device: Device, tensors: dict[str, Tensor]) -> None:
    out = device.tensor((4, 1), np.uint32)  # W = 40 needs 40 // 32 + 1 = 2 words
    rejected(device, tensors["x"], tensors["params"], out, r"\(4, 2\)")
    release(device, out)


def test_rejects_an_int32_output(device: Device, tensors: dict[str, Tensor]) -> None:
    out = device.tensor((4, 2), np.int32)
    rejected(device, tensors["x"], tensors["params"], out, "output must be uint32")
    release(device, out)


def test_rejects_maps_beyond_32_bit_indexing(device: Device, tensors: dict[str, Tensor]) -> None:
    big = replace(tensors["x"], shape=(1, 1, 70_000, 70_000))  # shape only: nothing is recorded
    out = replace(tensors["out"], shape=(70_000, edge_words(70_000)))
    rejected(device, big, tensors["params"], out, "32-bit")


# -- the reference -------------------------------------------------------------------------------------------

def set_bits(words: np.ndarray) -> list[list[int]]:
    """The set bit positions of each row, decoded one bit at a time."""
    return [[32 * k + b for k in range(len(row)) for b in range(32) if int(row[k]) >> b & 1] for row in words]


@pytest.mark.parametrize("width", [1, 31, 32, 33, 64, 100])
@pytest.mark.parametrize("dilate", [False, True])
def test_reference_agrees_with_a_direct_construction(width: int, dilate: bool) -> None:
    """Per row: dilate by looking at the neighbours one pixel at a time, then the run starts and ends are
    where np.diff of the zero-padded row is nonzero."""
    rng, seed = fresh_rng()
    h = 9
    x = rng.uniform(0, 1, (1, 1, h, width)).astype(np.float32)
    x[0, 0, rng.integers(0, h, 3), rng.integers(0, width, 3)] = np.nan
    x[0, 0, rng.integers(0, h, 3), rng.integers(0, width, 3)] = np.float32(0.6)
    fg = x[0, 0] > np.float32(0.6)
    if dilate:
        fg = np.array([[any(fg[yy, xx] for yy in (y - 1, y) for xx in (i - 1, i) if yy >= 0 and xx >= 0)
                        for i in range(width)] for y in range(h)])
    expected = [np.flatnonzero(np.diff(np.concatenate([[0], r.astype(np.int8), [0]]))).tolist() for r in fg]
    words = threshold_edges(x, 0.6, dilate)
    assert words.dtype == np.uint32 and words.shape == (h, width // 32 + 1)
    assert set_bits(words) == expected, f"seed {seed}"


def test_reference_dilation_matches_cv2() -> None:
    cv2 = pytest.importorskip("cv2")
    rng, seed = fresh_rng()
    for h, w in [(1, 1), (1, 7), (6, 1), (23, 41)]:
        fg = rng.uniform(0, 1, (h, w)) > 0.8
        ref = cv2.dilate(fg.astype(np.uint8), np.ones((2, 2), np.uint8)).astype(bool)
        assert np.array_equal(dilate2x2(fg), ref), f"{h}×{w}; seed {seed}"
