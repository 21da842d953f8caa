"""The pipeline against RapidOCR 1.4.4 on its own test images (../shared/compat/rapidocr-1.4.4/).

Every assertion of RapidOCR's test suite on these images, and its recorded results (reference.json): the same
number of lines, ≥ 98% of lines with identical text, ≥ 98% of boxes with IoU ≥ 0.9. RapidOCR ignores EXIF
orientation, so these run with apply_exif=False (text_cls.jpg carries a stale orientation tag).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from shapely.geometry import Polygon

from tests.paths import COMPAT, COMPAT_IMAGES
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.postproc.result import OcrResult

IMAGES = COMPAT_IMAGES
pytestmark = pytest.mark.compat
REFERENCE = json.loads((COMPAT / "reference.json").read_text()) if IMAGES.is_dir() else {}  # read at collection
RAPIDOCR = {"apply_exif": False}


# Every comparison runs on lavapipe (the Vulkan stages, named: it is never chosen automatically) and on the CPU
# backend (onnxruntime), which must read the same lines. What happens before the stages (decoding the forms an
# image comes in, a gray input, the text_score filter after them) is the same code on both, so
# those tests run on the CPU only: each full read on lavapipe costs tens of seconds of CI.
BACKENDS = ["llvmpipe", "cpu"]
READS: dict[tuple[int, str], OcrResult] = {}  # full reads, shared by the tests that check the same read


@pytest.fixture(scope="module", params=BACKENDS)
def ocr(request: pytest.FixtureRequest) -> Iterator[OcrPipeline]:
    with OcrPipeline.open(request.param) as pipeline:
        yield pipeline
    READS.clear()


def full_read(ocr: OcrPipeline, name: str) -> OcrResult:
    """The whole pipeline on compat image `name` with RapidOCR's settings, read once per backend."""
    key = (id(ocr), name)
    if key not in READS:
        READS[key] = ocr(source(name), **RAPIDOCR)
    return READS[key]


def on_cpu_only(ocr: OcrPipeline) -> None:
    if ocr.device is not None:
        pytest.skip("the same code before the stages on every backend: checked on the CPU backend")


def source(name: str) -> str | np.ndarray:
    path = IMAGES / name
    return np.load(path) if path.suffix == ".npy" else str(path)


def iou(a: list[list[float]], b: list[list[float]]) -> float:
    pa, pb = Polygon(a).buffer(0), Polygon(b).buffer(0)
    union = pa.union(pb).area
    return pa.intersection(pb).area / union if union else 1.0


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_lines_match_rapidocr(ocr: OcrPipeline, name: str) -> None:
    expected = REFERENCE[name]["full"]
    got = full_read(ocr, name).lines
    assert len(got) == len(expected), [line.text for line in got]
    if not expected:
        return
    same_text = sum(g.text == e["text"] for g, e in zip(got, expected))
    close_box = sum(iou(g.box, e["box"]) >= 0.9 for g, e in zip(got, expected))
    assert same_text >= 0.98 * len(expected), [(g.text, e["text"]) for g, e in zip(got, expected)]
    assert close_box >= 0.98 * len(expected)


def first_text(result: OcrResult) -> str:
    assert result.lines, "no lines"
    return result.lines[0].text


def test_ch_en_num_det_only_gives_18_boxes(ocr: OcrPipeline) -> None:
    result = ocr(source("ch_en_num.jpg"), use_cls=False, use_rec=False, **RAPIDOCR)
    assert len(result.lines) == 18
    expected = REFERENCE["ch_en_num.jpg"]["det_only_boxes"]
    assert sum(iou(g.box, e) >= 0.9 for g, e in zip(result.lines, expected)) >= 0.98 * 18


@pytest.mark.parametrize("use_cls", [False, True])
@pytest.mark.parametrize("form", ["path", "bytes", "array"])
def test_ch_en_num_as_path_bytes_or_array(ocr: OcrPipeline, form: str, use_cls: bool) -> None:
    if (form, use_cls) != ("bytes", False):  # one form on lavapipe; the path with cls is every other test's
        on_cpu_only(ocr)
    path = IMAGES / "ch_en_num.jpg"
    if form == "path":
        src: str | bytes | np.ndarray = str(path)
    elif form == "bytes":
        src = path.read_bytes()
    else:
        from vkocr.agent.ocr.images import decode_image

        src = decode_image(str(path))
    result = ocr(src, use_cls=use_cls, **RAPIDOCR)
    assert len(result.lines) == 18 and first_text(result) == "正品促销"


def test_one_channel_array_reads_at_least_17_lines(ocr: OcrPipeline) -> None:
    on_cpu_only(ocr)
    from PIL import Image

    gray = np.asarray(Image.open(IMAGES / "ch_en_num.jpg").convert("L"))[:, :, None]
    assert len(ocr(gray, **RAPIDOCR).lines) >= 17


def test_rec_only_reads_the_whole_image_as_one_line(ocr: OcrPipeline) -> None:
    result = ocr(source("text_rec.jpg"), use_det=False, use_cls=False, **RAPIDOCR)
    assert [line.text for line in result.lines] == ["韩国小馆"]


def test_cls_only_says_upright(ocr: OcrPipeline) -> None:
    result = ocr(source("text_cls.jpg"), use_det=False, use_rec=False, **RAPIDOCR)
    assert len(result.lines) == 1 and result.lines[0].angle == 0


def test_cls_and_rec(ocr: OcrPipeline) -> None:
    result = ocr(source("text_cls.jpg"), use_det=False, **RAPIDOCR)
    assert first_text(result) == "韩国小馆"


@pytest.mark.parametrize(("name", "first"), [
    ("issue_170.png", "TEST"),
    ("black_font_color_transparent.png", "我是中国人"),
    ("white_font_color_transparent.png", "我是中国人"),
])
def test_first_line(ocr: OcrPipeline, name: str, first: str) -> None:
    assert first_text(full_read(ocr, name)) == first


def test_letterbox_like(ocr: OcrPipeline) -> None:
    result = full_read(ocr, "test_letterbox_like.jpg")
    assert len(result.lines) == 2
    assert first_text(result).lower() == ("A：：取决于所使用的执行提供者，它可能没有完全支持模型中的所有操作。"
                                          "回落到CPU操作可能会导致性能速度的下降。此外，即使一个操作是由CUDAeXecution").lower()


def test_without_det(ocr: OcrPipeline) -> None:
    result = full_read(ocr, "test_without_det.jpg")
    assert [line.text for line in result.lines] == ["在中国作家协会第三届儿童文学"]


def test_two_channel_array(ocr: OcrPipeline) -> None:
    assert [line.text for line in full_read(ocr, "two_dim_image.npy").lines] == ["TREND PLOT REPORT"]


def test_zeros_give_no_result(ocr: OcrPipeline) -> None:
    assert ocr(np.zeros((640, 640, 3), np.uint8)).lines == []


def test_text_score_one_gives_no_result(ocr: OcrPipeline) -> None:
    on_cpu_only(ocr)  # the filter after the stages
    assert ocr(source("ch_en_num.jpg"), text_score=1.0, **RAPIDOCR).lines == []


def test_exif_orientation_is_applied_by_default(ocr: OcrPipeline) -> None:
    """text_cls.jpg's EXIF says 'rotated 180°': applied (DESIGN.md), the classifier sees it upside down."""
    result = ocr(source("text_cls.jpg"), use_det=False, use_rec=False)
    assert len(result.lines) == 1 and result.lines[0].angle == 180


def test_numpy_reference_executor_reads_the_same(tmp_path: Path) -> None:
    with OcrPipeline.open("numpy") as reference:
        assert reference.backend == "numpy (reference executor)" and reference.device_name == "numpy"
        result = reference(source("ch_en_num.jpg"), **RAPIDOCR)
    expected = REFERENCE["ch_en_num.jpg"]["full"]
    assert [line.text for line in result.lines] == [e["text"] for e in expected]


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_cpu_backend_reads_rapidocrs_lines_exactly(name: str, cpu: OcrPipeline) -> None:
    """onnxruntime runs the models RapidOCR runs, after the same preprocessing: every line's text, and the
    boxes, as RapidOCR 1.4.4 recorded them."""
    assert cpu.backend.startswith("cpu (onnxruntime") and cpu.device_name == "cpu"
    expected = REFERENCE[name]["full"]
    got = cpu(source(name), **RAPIDOCR).lines
    assert [g.text for g in got] == [e["text"] for e in expected]
    assert all(iou(g.box, e["box"]) >= 0.9 for g, e in zip(got, expected))


@pytest.fixture(scope="module")
def cpu() -> Iterator[OcrPipeline]:
    with OcrPipeline.open("cpu", cpu_threads=2) as pipeline:
        yield pipeline


def test_vertical_words_with_per_character_boxes(ocr: OcrPipeline) -> None:
    result = ocr(source("text_vertical_words.png"), return_word_box=True, **RAPIDOCR)
    chars = [c.text for line in result.lines for c in (line.chars or ())]
    assert chars[:10] == ["已", "取", "之", "時", "不", "參", "一", "人", "見", "而"]
    for line in result.lines:
        assert line.chars is not None and all(len(c.box) == 4 for c in line.chars)
