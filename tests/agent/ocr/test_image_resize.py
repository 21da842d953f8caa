"""image_resize.comp against vkocr.agent.ocr.image_reference.resize_letterboxed_u8 on fresh random images, byte for
byte, with the output buffer poisoned (0xDEADBEEF words) first: the image's words must hold the resized bytes (the bytes
of its last word past the image 0), every other word its poison. One recording is replayed for several images,
and the reference is checked against cv2.resize + cv2.copyMakeBorder when OpenCV is installed.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng, release
from vkocr.agent.ocr.image_kernels import RESIZE_PARAMS_WORDS, record_image_resize, resize_params, rgb_words
from vkocr.agent.ocr.image_reference import det_input_size, resize_letterboxed_u8
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

POISON = 0xDEADBEEF
SPARE_WORDS = 37  # poisoned words after the image, which the kernel must leave alone


def random_image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def image_words(nbytes: int) -> int:
    return -(-nbytes // 4)


def expected_words(ref: np.ndarray, size: int) -> np.ndarray:
    """What the buffer of `size` words must hold: the packed image (its last word zero-padded), then poison."""
    want = np.full(size, POISON, np.uint32)
    packed = rgb_words(ref)
    want[:packed.size] = packed
    return want


def assert_words(got: np.ndarray, want: np.ndarray, out_w: int, what: str, seed: int) -> None:
    if np.array_equal(got, want):
        return
    bad = np.flatnonzero(got.view(np.uint8) != want.view(np.uint8))
    row, col = divmod(int(bad[0]), 3 * out_w)
    raise AssertionError(f"{what}: {bad.size} bytes differ, the first at byte {bad[0]} (row {row}, pixel "
                         f"{col // 3}, channel {col % 3}): {got.view(np.uint8)[bad[0]]} != "
                         f"{want.view(np.uint8)[bad[0]]}; seed {seed}")


def gpu_resize(device: Device, rgb: np.ndarray, out_h: int, out_w: int, pad_top: int = 0, turn: int = 0
               ) -> np.ndarray:
    """The kernel's whole output buffer: the image's words plus SPARE_WORDS, all poisoned first; the image is
    np.rot90(rgb, turn), read from rgb's own rows."""
    h, w = np.rot90(rgb, turn).shape[:2]
    size = image_words((out_h + 2 * pad_top) * out_w * 3) + SPARE_WORDS
    image = device.upload(rgb_words(rgb))
    params = device.upload(resize_params(h, w, out_h, out_w, pad_top=pad_top, out_capacity=4 * size, turn=turn))
    out = device.upload(np.full(size, POISON, np.uint32))
    with Recorder(device) as rec:
        record_image_resize(rec, image, params, out)
        rec.run()
    got = device.download(out)
    release(device, image, params, out)
    return got


def check_resize(device: Device, rng: np.random.Generator, seed: int, h: int, w: int, out_h: int, out_w: int,
                 pad_top: int = 0) -> None:
    rgb = random_image(rng, h, w)
    got = gpu_resize(device, rgb, out_h, out_w, pad_top)
    want = expected_words(resize_letterboxed_u8(rgb, out_h, out_w, pad_top), got.size)
    assert_words(got, want, out_w, f"resize {h}×{w} → {out_h}×{out_w}, pad {pad_top}", seed)


# RapidOCR's sizes: reduce_max_side rounds both sides to multiples of 32 (2000 itself rounds half-to-even to
# 1984); its letterbox for a 160×1984 image is int((2 · max(1984 // 8, 30) - 160) / 2) = 168 rows.
TALL_SIZE = det_input_size(2036, 834, 2000, "max")
WIDE_SIZE = det_input_size(300, 4000, 2000, "max")

CASES = [
    # (src_h, src_w, out_h, out_w, pad_top)
    (2036, 834, *TALL_SIZE, 0),  # 1984×832: RapidOCR's max-side resize of a tall page
    (2036, 834, 2000, 832, 0),
    (300, 4000, *WIDE_SIZE, 168),  # 160×1984 plus RapidOCR's letterbox
    (300, 4000, 160, 2000, 170),
    (480, 642, 240, 321, 0),  # an exact halving, odd output width: words straddle rows
    (37, 53, 64, 97, 5),  # upscales
    (5, 7, 61, 3, 2),
    (1, 1, 3, 5, 1),  # one-pixel sources and outputs
    (1, 9, 4, 1, 0),
    (7, 1, 1, 7, 3),
    (11, 13, 1, 1, 2),
    (101, 77, 40, 31, 1),
    (3, 4097, 2, 4096, 0),  # float32 halfway cases decided by the tie term
    (2, 5845, 2, 2048, 0),
]


@pytest.mark.parametrize(("h", "w", "out_h", "out_w", "pad_top"), CASES)
def test_image_resize_matches_numpy(device: Device, h: int, w: int, out_h: int, out_w: int, pad_top: int) -> None:
    rng, seed = fresh_rng()
    check_resize(device, rng, seed, h, w, out_h, out_w, pad_top)


def test_image_resize_random_sizes(device: Device) -> None:
    rng, seed = fresh_rng()
    for _ in range(8):
        h, w, out_h, out_w = (int(v) for v in rng.integers(1, 160, 4))
        check_resize(device, rng, seed, h, w, out_h, out_w, int(rng.integers(0, 4)))


@pytest.mark.parametrize("turn", [1, 2, 3])
def test_a_turned_image_resizes_as_numpy_turns_it(device: Device, turn: int) -> None:
    """The page orientation stage's turn, folded into the resize's reads: np.rot90 first, then the resize; the
    same size too (the turn alone), odd sides so that words straddle rows."""
    rng, seed = fresh_rng()
    for h, w, out_h, out_w, pad_top in [(37, 53, 53, 37, 0), (61, 45, 90, 122, 2), (9, 1, 1, 9, 1),
                                        (200, 131, 64, 99, 0)]:
        rgb = random_image(rng, h, w)
        got = gpu_resize(device, rgb, out_h, out_w, pad_top, turn)
        want = expected_words(resize_letterboxed_u8(np.ascontiguousarray(np.rot90(rgb, turn)), out_h, out_w,
                                                    pad_top), got.size)
        assert_words(got, want, out_w, f"turn {turn}: {h}×{w} → {out_h}×{out_w}, pad {pad_top}", seed)


def test_image_resize_stride_offset(device: Device) -> None:
    """The source inside a larger buffer: padded rows and a byte offset, surrounded by random bytes."""
    rng, seed = fresh_rng()
    h, w, stride, offset, out_h, out_w = 45, 61, 3 * 61 + 7, 13, 70, 50
    rgb = random_image(rng, h, w)
    buf = rng.integers(0, 256, offset + h * stride + 5, dtype=np.uint8)
    for r in range(h):
        buf[offset + r * stride: offset + r * stride + 3 * w] = rgb[r].reshape(-1)
    size = image_words((out_h + 2) * out_w * 3) + SPARE_WORDS
    image = device.upload(rgb_words(buf))
    params = device.upload(resize_params(h, w, out_h, out_w, pad_top=1, row_stride=stride, offset=offset,
                                         capacity=buf.size, out_capacity=4 * size))
    out = device.upload(np.full(size, POISON, np.uint32))
    with Recorder(device) as rec:
        record_image_resize(rec, image, params, out)
        rec.run()
    want = expected_words(resize_letterboxed_u8(rgb, out_h, out_w, 1), size)
    assert_words(device.download(out), want, out_w, "resize with stride/offset", seed)
    release(device, image, params, out)


def test_one_recording_replayed_for_smaller_images(device: Device) -> None:
    """Recorded once for the biggest image, the source read straight from host-visible memory as the pipeline
    does; smaller images replay it with new params, and the words past each image keep their poison."""
    rng, seed = fresh_rng()
    image_cap, size = 240 * 320 * 3 + 64, image_words(260 * 330 * 3)
    image = Tensor(device.pool.alloc(image_cap, "upload"), (image_cap // 4,), np.dtype(np.uint32))
    staging = device.pool.alloc(4 * RESIZE_PARAMS_WORDS, "upload")
    params = device.tensor((RESIZE_PARAMS_WORDS,), np.uint32)
    out = device.tensor((size,), np.uint32)
    with Recorder(device) as rec:
        rec.copy(staging.view, params.view)
        record_image_resize(rec, image, params, out)
        rec.end()
        for h, w, out_h, out_w, pad_top in [(240, 320, 250, 330, 5), (61, 83, 96, 129, 3), (200, 150, 31, 17, 0),
                                            (1, 2, 1, 1, 0)]:
            rgb = random_image(rng, h, w)
            words = rgb_words(rgb)
            image.alloc.array(np.uint32)[:words.size] = words
            image.alloc.flush()
            staging.array(np.uint32)[:] = resize_params(h, w, out_h, out_w, pad_top=pad_top, capacity=image_cap,
                                                        out_capacity=out.nbytes)
            staging.flush()
            device.write(out, np.full(size, POISON, np.uint32))
            rec.run()
            want = expected_words(resize_letterboxed_u8(rgb, out_h, out_w, pad_top), size)
            assert_words(device.download(out), want, out_w, f"replayed {h}×{w} → {out_h}×{out_w}", seed)
    device.pool.free(staging)
    release(device, image, params, out)


def test_words_bound_the_dispatch(device: Device) -> None:
    """`words` below the buffer's size: words from there on are never written, even inside the image, and
    the grid's rounding up to whole workgroups writes nothing extra."""
    rng, seed = fresh_rng()
    h, w, out_h, out_w = 50, 70, 40, 55
    rgb = random_image(rng, h, w)
    total = image_words(out_h * out_w * 3)
    size = total + 300
    ref = expected_words(resize_letterboxed_u8(rgb, out_h, out_w, 0), size)
    image = device.upload(rgb_words(rgb))
    params = device.upload(resize_params(h, w, out_h, out_w))
    out = device.tensor((size,), np.uint32)
    for words in (total - 101, total + 77):  # neither a multiple of the workgroup size
        device.write(out, np.full(size, POISON, np.uint32))
        with Recorder(device) as rec:
            record_image_resize(rec, image, params, out, words=words)
            rec.run()
        want = ref.copy()
        want[words:] = POISON
        assert_words(device.download(out), want, out_w, f"{words} words of {size}", seed)
    release(device, image, params, out)


def test_argument_errors(device: Device) -> None:
    image = device.upload(np.arange(1, 17, dtype=np.uint32))
    params = device.upload(resize_params(2, 2, 2, 2))
    short = device.upload(np.ones(RESIZE_PARAMS_WORDS - 1, np.uint32))
    floats = device.upload(np.ones(16, np.float32))
    out = device.tensor((16,), np.uint32)
    with Recorder(device) as rec:
        with pytest.raises(KernelArgumentError, match="uint32"):
            record_image_resize(rec, floats, params, out)
        with pytest.raises(KernelArgumentError, match=f"needs {RESIZE_PARAMS_WORDS}"):
            record_image_resize(rec, image, short, out)
        with pytest.raises(KernelArgumentError, match="output"):
            record_image_resize(rec, image, params, floats)
        for words in (0, 17):
            with pytest.raises(KernelArgumentError, match="words outside"):
                record_image_resize(rec, image, params, out, words=words)
        assert rec.dispatch_count == 0
    with pytest.raises(KernelArgumentError, match="negative"):
        resize_params(4, 5, 8, 8, pad_top=-1)
    with pytest.raises(KernelArgumentError, match="does not fit"):
        resize_params(4, 5, 8, 8, pad_top=1, out_capacity=10 * 8 * 3 - 1)
    resize_params(4, 5, 8, 8, pad_top=1, out_capacity=10 * 8 * 3)
    with pytest.raises(KernelArgumentError, match="does not fit"):
        resize_params(4, 5, 30000, 30000, pad_top=10000)  # 2^32 bytes or more
    with pytest.raises(KernelArgumentError, match="stride"):
        resize_params(4, 5, 8, 8, row_stride=14)
    with pytest.raises(KernelArgumentError, match="beyond"):
        resize_params(4, 5, 8, 8, capacity=59)
    with pytest.raises(KernelArgumentError, match="outside"):
        resize_params(4, 5, 0, 8)
    with pytest.raises(KernelArgumentError, match="turn 4"):
        resize_params(4, 5, 8, 8, turn=4)
    with pytest.raises(KernelArgumentError, match="stride"):  # turned once, the stored rows are 4 pixels long
        resize_params(4, 5, 8, 8, row_stride=11, turn=1)
    release(device, image, params, short, floats, out)


def test_params_layout() -> None:
    words = resize_params(300, 4000, 160, 1984, pad_top=168, row_stride=12004, offset=8)
    assert words.dtype == np.uint32 and words.size == RESIZE_PARAMS_WORDS
    assert words[:6].tolist() == [4000, 300, 12004, 8, 1984, 160]
    assert words[8:].tolist() == [168, 160 + 2 * 168, 0, 0]
    turned = resize_params(300, 4000, 160, 1984, turn=3)  # stored as 4000 rows of 300 pixels
    assert turned[:3].tolist() == [4000, 300, 900] and turned[10] == 3


# -- the reference against OpenCV ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cv2() -> ModuleType:
    return pytest.importorskip("cv2")


@pytest.mark.parametrize(("h", "w", "out_h", "out_w", "pad_top"), CASES)
def test_reference_matches_cv2(cv2: ModuleType, h: int, w: int, out_h: int, out_w: int, pad_top: int) -> None:
    rng, seed = fresh_rng()
    img = random_image(rng, h, w)
    ref = cv2.copyMakeBorder(cv2.resize(img, (out_w, out_h)), pad_top, pad_top, 0, 0, cv2.BORDER_CONSTANT,
                             value=(0, 0, 0))
    got = resize_letterboxed_u8(img, out_h, out_w, pad_top)
    assert got.shape == ref.shape and np.array_equal(got, ref), f"{h}×{w} → {out_h}×{out_w}; seed {seed}"
