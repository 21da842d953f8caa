"""image_preprocess.comp and crop_warp.comp against vkocr.agent.ocr.image_reference on fresh random images (outputs
poisoned with NaN), one recording replayed with new images and params, and vkocr.agent.ocr.image_reference against
RapidOCR 1.4.4 and the OpenCV it calls (test-only dependencies).

The kernels reproduce OpenCV's uint8 results exactly (same rounding at every step), so beyond the usual
relative-error bound the tests require the grey levels behind every output value to be identical.
"""

from __future__ import annotations

from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

from tests.engine.kernels.harness import check, fresh_rng, poisoned, release, run
from vkocr.agent.ocr.image_kernels import (
    Crop,
    ImageSource,
    crop_params,
    crop_params_words,
    crop_slot,
    image_params,
    record_crop_warp,
    record_image_preprocess,
    resize_tie,
    rgb_words,
)
from vkocr.agent.ocr.image_reference import (
    crop_geometry,
    det_input_size,
    preprocess_image,
    resize_linear_u8,
    resize_normalize_pad,
    resized_width,
    warp_crop,
    warp_perspective_cubic,
)
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.recorder import Recorder

Quad = np.ndarray


@pytest.fixture(scope="module")
def cv2() -> ModuleType:
    return pytest.importorskip("cv2")


@pytest.fixture(scope="module")
def rapidocr(cv2: ModuleType) -> ModuleType:
    """RapidOCR 1.4.4 (a test dependency), whose preprocessing functions are the references."""
    return pytest.importorskip("rapidocr_onnxruntime")


@pytest.fixture(scope="module")
def cv2_warp(cv2: ModuleType) -> ModuleType:
    """cv2 whose warpPerspective INTER_CUBIC is OpenCV 5's float32 one, which vkocr.agent.ocr.image_reference reproduces
    (OpenCV 4 quantised coordinates to 1/32 pixel with fixed-point tables)."""
    if int(cv2.__version__.split(".")[0]) < 5:
        pytest.skip(f"OpenCV {cv2.__version__}: the cubic warp reference follows OpenCV 5")
    return cv2


def random_image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def grey_levels(x: np.ndarray, mean: float = 0.5, std: float = 0.5) -> np.ndarray:
    """The uint8 values behind normalised model inputs."""
    return np.rint((x.astype(np.float64) * std + mean) * 255).astype(np.int64)


def assert_same_levels(got: np.ndarray, ref: np.ndarray, what: str, seed: int) -> None:
    check(got, ref, what, seed)
    diff = np.abs(grey_levels(got) - grey_levels(ref))
    assert diff.max() == 0, f"{what}: {int((diff != 0).sum())} values differ, by up to {diff.max()} levels; seed {seed}"


def random_quads(rng: np.random.Generator, h: int, w: int, n: int) -> list[Quad]:
    """Rotated rectangles, skewed quads, quads partly outside the image, tall ones (rot90), integer ones."""
    quads = []
    for i in range(n):
        kind = (3, 0, 1, 2, 4)[i % 5]  # a tall one first
        length, height = rng.uniform(8, 0.9 * w), rng.uniform(6, min(60, 0.5 * h))
        if kind == 3:  # tall: the crop is turned by np.rot90
            length, height = height, rng.uniform(1.6, 4) * height
        angle = rng.uniform(-0.5, 0.5) if kind != 4 else 0.0
        u = np.array([np.cos(angle), np.sin(angle)])
        v = np.array([-np.sin(angle), np.cos(angle)])
        corner = rng.uniform([0, 0], [max(w - 0.5 * length, 1), max(h - height, 1)])
        if kind == 2:  # partly outside
            corner = corner + rng.choice([-1, 1], 2) * rng.uniform(0.2, 0.6) * np.array([length, height])
        pts = np.array([corner, corner + length * u, corner + length * u + height * v, corner + height * v])
        if kind == 1:  # skewed, a true perspective
            pts = pts + rng.normal(0, 0.08 * height, (4, 2))
        if kind == 4:
            pts = np.round(pts)
        quads.append(pts.astype(np.float32))
    return quads


# -- GPU against the NumPy reference ------------------------------------------------------------------------------

PREPROCESS_CASES = [
    # (src_h, src_w, out_h, out_w, cap_h, cap_w)
    (37, 53, 64, 96, 64, 96),
    (480, 640, 736, 992, 736, 992),  # RapidOCR's det size for VGA
    (101, 77, 40, 30, 45, 37),  # downscale, output smaller than the tensor
    (1001, 777, 96, 64, 96, 64),  # strong downscale
    (5, 7, 61, 3, 61, 5),
    (1, 1, 3, 5, 3, 5),
    (64, 96, 64, 96, 64, 96),  # same size: cv2 copies
    (3, 4097, 2, 4096, 2, 4096),  # every other column is a float32 halfway case decided by resize_tie
    (4097, 3, 4096, 2, 4096, 2),
    (2, 8191, 2, 2048, 2, 2048),
    (2, 5845, 2, 2048, 2, 2048),  # halfway cases that cv2's double arithmetic does not round to even
    (5917, 2, 2048, 2, 2048, 2),
]


@pytest.mark.parametrize(("src_h", "src_w", "out_h", "out_w", "cap_h", "cap_w"), PREPROCESS_CASES)
def test_image_preprocess_matches_numpy(device: Device, src_h: int, src_w: int, out_h: int, out_w: int,
                                        cap_h: int, cap_w: int) -> None:
    rng, seed = fresh_rng()
    rgb = random_image(rng, src_h, src_w)
    image, params = device.upload(rgb_words(rgb)), device.upload(image_params(src_h, src_w, out_h, out_w))
    out = poisoned(device, (1, 3, cap_h, cap_w))
    run(device, lambda rec: record_image_preprocess(rec, image, params, out))
    got = device.download(out)
    ref = np.zeros((1, 3, cap_h, cap_w), np.float32)
    ref[:, :, :out_h, :out_w] = preprocess_image(rgb, out_h, out_w)
    assert_same_levels(got, ref, f"preprocess {src_h}×{src_w} → {out_h}×{out_w} in {cap_h}×{cap_w}", seed)
    release(device, image, params, out)


def test_image_preprocess_stride_offset_mean_std(device: Device) -> None:
    """An image inside a larger buffer (row padding, byte offset) and per-channel mean / std."""
    rng, seed = fresh_rng()
    h, w, stride, offset = 45, 61, 3 * 61 + 7, 13
    rgb = random_image(rng, h, w)
    buf = rng.integers(0, 256, offset + h * stride + 3, dtype=np.uint8)
    for r in range(h):
        buf[offset + r * stride: offset + r * stride + 3 * w] = rgb[r].reshape(-1)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    image = device.upload(rgb_words(buf))
    params = device.upload(image_params(h, w, 70, 50, row_stride=stride, offset=offset, capacity=buf.size))
    out = poisoned(device, (1, 3, 70, 50))
    run(device, lambda rec: record_image_preprocess(rec, image, params, out, mean=mean, std=std))
    check(device.download(out), preprocess_image(rgb, 70, 50, mean, std), "preprocess with stride/offset", seed)
    release(device, image, params, out)


@pytest.mark.parametrize(("out_h", "out_w", "batch", "n_valid"), [(48, 192, 7, 5), (48, 320, 6, 6), (32, 100, 3, 2)])
def test_crop_warp_matches_numpy(device: Device, out_h: int, out_w: int, batch: int, n_valid: int) -> None:
    rng, seed = fresh_rng()
    h, w = 211, 317
    rgb = random_image(rng, h, w)
    quads = random_quads(rng, h, w, n_valid)
    slots = [crop_slot(q, out_h, out_w, rotate180=bool(rng.integers(2))) for q in quads]
    image = device.upload(rgb_words(rgb))
    params = device.upload(crop_params(h, w, slots, batch, out_h, out_w))
    out = poisoned(device, (batch, 3, out_h, out_w))
    run(device, lambda rec: record_crop_warp(rec, image, params, out))
    got = device.download(out)
    ref = np.zeros_like(got)
    for b, (q, s) in enumerate(zip(quads, slots)):
        ref[b] = resize_normalize_pad(warp_crop(rgb, q, rotate180=s.rotate180), out_h, out_w, s.resized_w)
    assert any(s.rotate90 for s in slots), "the cases should include a turned crop"
    assert_same_levels(got, ref, f"crops into {batch}×3×{out_h}×{out_w}, {n_valid} valid", seed)
    release(device, image, params, out)


def test_crop_warp_cuts_each_crop_from_its_own_image(device: Device) -> None:
    """Crops of three images of different sizes, held one after another in one buffer, interleaved in one batch
    (what batching several requests' lines together does): each crop is its own image's, borders included."""
    rng, seed = fresh_rng()
    sizes = [(211, 317), (64, 90), (150, 149)]
    images = [random_image(rng, h, w) for h, w in sizes]
    offsets = np.cumsum([0] + [4 * -(-(3 * h * w) // 4) for h, w in sizes])[:-1].tolist()  # word-aligned
    buf = np.concatenate([np.pad(im.reshape(-1), (0, 4 * -(-im.size // 4) - im.size)) for im in images])
    crops = [(k, q) for k, (h, w) in enumerate(sizes) for q in random_quads(rng, h, w, 3)]
    order = rng.permutation(len(crops))
    crops = [crops[i] for i in order]
    slots = [crop_slot(q, 48, 320, rotate180=bool(rng.integers(2))) for _, q in crops]
    sources = [ImageSource(*sizes[k], offsets[k]) for k, _ in crops]
    image = device.upload(rgb_words(buf))
    batch = len(slots) + 2
    params = device.upload(crop_params(0, 0, slots, batch, 48, 320, sources=sources, capacity=buf.size))
    out = poisoned(device, (batch, 3, 48, 320))
    run(device, lambda rec: record_crop_warp(rec, image, params, out))
    ref = np.zeros((batch, 3, 48, 320), np.float32)
    for b, ((k, q), s) in enumerate(zip(crops, slots)):
        ref[b] = resize_normalize_pad(warp_crop(images[k], q, rotate180=s.rotate180), 48, 320, s.resized_w)
    assert_same_levels(device.download(out), ref, f"{len(slots)} crops of {len(sizes)} images in one batch", seed)
    with pytest.raises(KernelArgumentError, match="2 image sources for 9 crops"):
        crop_params(0, 0, slots, batch, 48, 320, sources=sources[:2])
    with pytest.raises(KernelArgumentError, match="beyond"):
        crop_params(0, 0, slots[:1], batch, 48, 320, sources=[ImageSource(211, 317, buf.size)], capacity=buf.size)
    release(device, image, params, out)


def test_one_recording_replayed_with_new_images_and_params(device: Device) -> None:
    """Image, det params and crop params are copied from host-visible staging inside the recording; three
    requests with different image sizes, output sizes, crops and counts reuse it unchanged."""
    rng, seed = fresh_rng()
    image_cap, det_shape, crop_shape = 200 * 150 * 3 + 64, (1, 3, 160, 224), (4, 3, 48, 160)
    staging = [device.pool.alloc(n, "upload") for n in (image_cap, 4 * 8, 4 * crop_params_words(crop_shape[0]))]
    image = device.tensor((image_cap // 4,), np.uint32)
    det_params = device.tensor((8,), np.uint32)
    crop_prm = device.tensor((crop_params_words(crop_shape[0]),), np.uint32)
    det_out, crop_out = poisoned(device, det_shape), poisoned(device, crop_shape)
    with Recorder(device) as rec:
        for alloc, tensor in zip(staging, (image, det_params, crop_prm)):
            rec.copy(alloc.view, tensor.view)
        record_image_preprocess(rec, image, det_params, det_out)
        record_crop_warp(rec, image, crop_prm, crop_out)
        rec.end()
        for (h, w, out_h, out_w, n) in [(120, 170, 160, 224, 4), (61, 83, 96, 128, 1), (200, 150, 64, 200, 3)]:
            rgb = random_image(rng, h, w)
            quads = random_quads(rng, h, w, n)
            slots = [crop_slot(q, 48, 160, rotate180=bool(i % 2)) for i, q in enumerate(quads)]
            staging[0].array(np.uint32)[:] = 0
            words = rgb_words(rgb)
            staging[0].array(np.uint32)[:words.size] = words
            staging[1].array(np.uint32)[:] = image_params(h, w, out_h, out_w, capacity=image_cap)
            staging[2].array(np.uint32)[:] = crop_params(h, w, slots, crop_shape[0], 48, 160, capacity=image_cap)
            for alloc in staging:
                alloc.flush()
            rec.run()
            det_ref = np.zeros(det_shape, np.float32)
            det_ref[:, :, :out_h, :out_w] = preprocess_image(rgb, out_h, out_w)
            assert_same_levels(device.download(det_out), det_ref, f"replayed det {h}×{w} → {out_h}×{out_w}", seed)
            crop_ref = np.zeros(crop_shape, np.float32)
            for b, (q, s) in enumerate(zip(quads, slots)):
                crop_ref[b] = resize_normalize_pad(warp_crop(rgb, q, rotate180=s.rotate180), 48, 160, s.resized_w)
            assert_same_levels(device.download(crop_out), crop_ref, f"replayed crops of {h}×{w}, {n} valid", seed)
    for alloc in staging:
        device.pool.free(alloc)
    release(device, image, det_params, crop_prm, det_out, crop_out)


def test_argument_errors(device: Device) -> None:
    image = device.upload(np.zeros(16, np.uint32))
    params = device.upload(np.zeros(8, np.uint32))
    floats = device.upload(np.zeros(16, np.float32))
    out = device.tensor((1, 3, 4, 4))
    crops = device.tensor((2, 3, 4, 4))
    with Recorder(device) as rec:
        with pytest.raises(KernelArgumentError, match="uint32"):
            record_image_preprocess(rec, floats, params, out)
        with pytest.raises(KernelArgumentError, match=r"\(1, 3, H, W\)"):
            record_image_preprocess(rec, image, params, crops)
        with pytest.raises(KernelArgumentError, match="std"):
            record_image_preprocess(rec, image, params, out, std=(0.5, 0.0, 0.5))
        with pytest.raises(KernelArgumentError, match=f"needs {crop_params_words(2)}"):
            record_crop_warp(rec, image, params, crops)
        assert rec.dispatch_count == 0
    with pytest.raises(KernelArgumentError, match="stride"):
        image_params(4, 5, 8, 8, row_stride=14)
    with pytest.raises(KernelArgumentError, match="beyond"):
        image_params(4, 5, 8, 8, capacity=59)
    with pytest.raises(KernelArgumentError, match="outside"):
        image_params(4, 40000, 8, 8)
    slot = Crop(np.eye(3), 10, 5, False, False, 30)
    with pytest.raises(KernelArgumentError, match="resized width"):
        crop_params(20, 20, [slot], 2, 48, 20)
    with pytest.raises(KernelArgumentError, match="3 crops"):
        crop_params(20, 20, [slot] * 3, 2, 48, 40)
    huge = Crop(np.full((3, 3), 1e39), 10, 5, False, False, 30)  # infinite in float32
    with pytest.raises(KernelArgumentError, match="crop 1: matrix .* not finite"):
        crop_params(20, 20, [slot, huge], 2, 48, 40)
    with pytest.raises(KernelArgumentError, match="crop 0 height"):
        crop_params(20, 20, [slot], 2, 0, 40)
    with pytest.raises(ValueError, match="empty"):
        crop_geometry(np.array([[1, 1], [1.5, 1], [1.5, 1.5], [1, 1.5]], np.float32))
    release(device, image, params, floats, out, crops)


def test_resize_tie() -> None:
    assert resize_tie(640, 1280) == 0.0 and resize_tie(96, 48) == 0.0
    assert resize_tie(4097, 4096) == 0.0  # 4097/4096 is a double: its halfway cases round to even
    assert resize_tie(5845, 2048) < 0 < resize_tie(5917, 2048)


# -- the NumPy reference against RapidOCR 1.4.4 and OpenCV ----------------------------------------------------------

RESIZE_CASES = [
    (480, 640, 736, 992), (2000, 1500, 1984, 1504), (37, 53, 736, 1056), (101, 333, 48, 160), (13, 7, 48, 27),
    (96, 384, 48, 192), (64, 96, 64, 96), (1, 1, 5, 7), (5, 5, 1, 1), (300, 400, 1, 2), (61, 45, 48, 35),
    (48, 100, 48, 320),
    (3, 4097, 2, 4096), (2, 8191, 2, 2048), (2, 5845, 2, 2048), (5917, 2, 2048, 2),
    (2036, 834, 2000, 832),  # RapidOCR's max-side resize of text_vertical_words.png: many row blocks
]


@pytest.mark.parametrize(("h", "w", "out_h", "out_w"), RESIZE_CASES)
def test_resize_matches_cv2(cv2: ModuleType, h: int, w: int, out_h: int, out_w: int) -> None:
    rng, seed = fresh_rng()
    img = random_image(rng, h, w)
    diff = np.abs(resize_linear_u8(img, out_h, out_w).astype(int) - cv2.resize(img, (out_w, out_h)))
    assert diff.max() == 0, f"resize {h}×{w} → {out_h}×{out_w}: max diff {diff.max()} levels; seed {seed}"


@pytest.mark.parametrize(("h", "w"), [(480, 640), (2000, 1500), (37, 53), (801, 733), (250, 1000)])
def test_det_preprocess_matches_rapidocr(rapidocr: ModuleType, h: int, w: int) -> None:
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DetPreProcess

    rng, seed = fresh_rng()
    rgb = random_image(rng, h, w)
    ref = DetPreProcess(736, "min", [0.5] * 3, [0.5] * 3)(np.ascontiguousarray(rgb[..., ::-1]))
    got = preprocess_image(rgb, *det_input_size(h, w))
    assert got.shape == ref.shape and np.array_equal(got, ref), f"det preprocess {h}×{w}; seed {seed}"


def test_det_input_size_matches_rapidocr(rapidocr: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from rapidocr_onnxruntime.ch_ppocr_det import utils
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DetPreProcess

    # only the sizes matter: DetPreProcess.resize's cv2.resize returns an empty image of the asked size
    monkeypatch.setattr(utils.cv2, "resize", lambda img, size: np.empty((size[1], size[0]), np.uint8))
    rng, seed = fresh_rng()
    sizes = [(480, 640), (2000, 1500), (736, 736), (735, 2000), (10, 10), (1, 900), (5000, 737), (1023, 48), (3, 3)]
    sizes += [(int(h), int(w)) for h, w in rng.integers(1, 3000, (30, 2))]
    for h, w in sizes:
        for limit, kind in ((736, "min"), (960, "max"), (2000, "max")):
            out = DetPreProcess(limit, kind).resize(np.zeros((h, w, 3), np.uint8))
            got = det_input_size(h, w, limit, kind)
            if out is None:
                assert min(got) <= 0, (h, w, limit, kind, got, seed)
            else:
                assert got == out.shape[:2], (h, w, limit, kind, got, out.shape, seed)


@pytest.mark.parametrize(("h", "w"), [(300, 400), (211, 317), (12, 9)])
def test_warp_matches_cv2(cv2_warp: ModuleType, rapidocr: ModuleType, h: int, w: int) -> None:
    """warpPerspective INTER_CUBIC / BORDER_REPLICATE on rotated, skewed, partly outside and integer quads (a
    source under 16 pixels exercises OpenCV's coordinate clamp); and RapidOCR's get_rotate_crop_image, rot90
    included, on the same quads."""
    from rapidocr_onnxruntime.main import RapidOCR

    cv2 = cv2_warp
    rng, seed = fresh_rng()
    rgb = random_image(rng, h, w)
    bgr = np.ascontiguousarray(rgb[..., ::-1])
    quads = random_quads(rng, h, w, 25) if min(h, w) > 20 else [
        np.array([[-3, -2], [10, 1], [12, 14], [-1, 11]], np.float32),
        np.array([[2, 1], [7, 2], [6, 11], [1, 10]], np.float32)]
    worst = 0
    for q in quads:
        cw, ch, inverse = crop_geometry(q)
        rect = np.array([[0, 0], [cw, 0], [cw, ch], [0, ch]], np.float32)
        ref = cv2.warpPerspective(rgb, cv2.getPerspectiveTransform(q, rect), (cw, ch), flags=cv2.INTER_CUBIC,
                                  borderMode=cv2.BORDER_REPLICATE)
        worst = max(worst, int(np.abs(warp_perspective_cubic(rgb, inverse, cw, ch).astype(int) - ref).max()))
        crop = RapidOCR.get_crop_img_list(None, bgr, [q.copy()])[0]
        got = warp_crop(rgb, q)
        assert got.shape == crop.shape, f"crop shape {got.shape} != {crop.shape}; seed {seed}"
        worst = max(worst, int(np.abs(got[..., ::-1].astype(int) - crop).max()))
        if ch * 1.0 / cw >= 1.5:
            np.testing.assert_array_equal(got, np.rot90(ref))
        flipped = warp_crop(rgb, q, rotate180=True)
        np.testing.assert_array_equal(flipped[..., ::-1], cv2.rotate(np.ascontiguousarray(crop), cv2.ROTATE_180))
    assert worst == 0, f"warp differs from cv2 by up to {worst} levels; seed {seed}"


def test_resize_norm_img_matches_rapidocr(rapidocr: ModuleType) -> None:
    """cls (48×192), rec (48×320) and a wider rec batch (a long line sets max_wh_ratio)."""
    from rapidocr_onnxruntime.ch_ppocr_cls.text_cls import TextClassifier
    from rapidocr_onnxruntime.ch_ppocr_rec.text_recognize import TextRecognizer

    rng, seed = fresh_rng()
    rgb = random_image(rng, 240, 900)
    crops = [warp_crop(rgb, q) for q in random_quads(rng, 240, 900, 12)]
    crops.append(rng.integers(0, 256, (20, 880, 3), dtype=np.uint8))  # a long line: rec batch width 48 · 44
    cls = SimpleNamespace(cls_image_shape=[3, 48, 192])
    rec = SimpleNamespace(rec_image_shape=[3, 48, 320])
    max_ratio = max(320 / 48, *(c.shape[1] / c.shape[0] for c in crops))
    rec_w = int(48 * max_ratio)
    assert rec_w > 320
    for crop in crops:
        bgr = np.ascontiguousarray(crop[..., ::-1])
        got = resize_normalize_pad(crop, 48, 192)
        np.testing.assert_array_equal(got, TextClassifier.resize_norm_img(cls, bgr), err_msg=f"cls; seed {seed}")
        for width, ratio in ((320, 320 / 48), (rec_w, max_ratio)):
            ref = TextRecognizer.resize_norm_img(rec, bgr, ratio)
            got = resize_normalize_pad(crop, 48, width, resized_width(crop.shape[1], crop.shape[0], 48, width))
            np.testing.assert_array_equal(got, ref, err_msg=f"rec width {width}; seed {seed}")


def test_batched_crop_slots_equal_one_at_a_time() -> None:
    from vkocr.agent.ocr.image_kernels import crop_slot, line_crops

    rng = np.random.default_rng()
    centres = rng.uniform(50, 400, (25, 1, 2))
    quads = (centres + rng.uniform(-40, 40, (25, 4, 2)) + np.array([[-60, -9], [60, -9], [60, 9], [-60, 9]]))
    quads = quads.astype(np.float32)
    batched = line_crops(quads, 48, 10**6)
    single = [crop_slot(q, 48, 10**6) for q in quads]
    for a, b in zip(batched, single):
        assert (a.width, a.height, a.rotate90, a.resized_w) == (b.width, b.height, b.rotate90, b.resized_w)
        np.testing.assert_array_equal(a.inverse, b.inverse)
