"""The pipeline's contract around the OCR itself: bad input and bad options fail clearly before any GPU work,
plugins add fields, and a plugin that raises does not lose the result."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from vkocr.agent.errors import ImageError, OptionsError
from vkocr.agent.ocr.fonts import find_font
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.ocr.prep import Prepared, preparation, prepared_image
from vkocr.postproc.registry import PluginChain, build_chain
from vkocr.postproc.result import OcrResult


@pytest.fixture(scope="module")
def ocr() -> Iterator[OcrPipeline]:
    with OcrPipeline.open("llvmpipe") as pipeline:
        yield pipeline


def label_image(text: str) -> np.ndarray:
    """One dark line of text on white, in a font the set-up installs."""
    font_path = find_font()
    if font_path is None:
        pytest.skip("no font installed (apt-get install fonts-wqy-microhei)")
    image = Image.new("RGB", (420, 64), "white")
    ImageDraw.Draw(image).text((12, 14), text, fill=(10, 10, 10), font=ImageFont.truetype(font_path, 30))
    return np.asarray(image)


def test_corrupt_bytes_fail_with_a_reason(ocr: OcrPipeline) -> None:
    with pytest.raises(ImageError) as info:
        ocr(b"\x89PNG\r\n\x1a\n this is not a PNG")
    assert info.value.reason == "corrupt"


def test_an_image_over_the_pixel_limit_is_refused(ocr: OcrPipeline) -> None:
    with pytest.raises(ImageError) as info:
        ocr(np.full((300, 400, 3), 255, np.uint8), max_pixels=100_000)
    assert info.value.reason == "too_large"


@pytest.mark.parametrize(("option", "value"), [("no_such_option", 1), ("text_score", 2.0), ("box_thresh", "high"),
                                               ("limit_type", "sideways"), ("use_det", "yes")])
def test_bad_options_name_the_option(ocr: OcrPipeline, option: str, value: object) -> None:
    with pytest.raises(OptionsError, match=option):
        ocr(np.zeros((64, 64, 3), np.uint8), **{option: value})


def test_plugins_add_fields_and_a_raising_one_loses_nothing(ocr: OcrPipeline) -> None:
    def boom(result: OcrResult) -> dict[str, object]:
        raise RuntimeError("plugin bug")

    fields = build_chain(["regex_fields"], {"regex_fields": {"lot": r"LOT\s*(\w+)"}})
    ocr.plugins = PluginChain([*fields.plugins, ("boom", boom)])
    try:
        result = ocr(label_image("LOT A2391"))
    finally:
        ocr.plugins = PluginChain()
    assert [line.text for line in result.lines] == ["LOT A2391"]
    assert result.fields == {"lot": "A2391"}
    assert result.errors == [{"plugin": "boom", "error": "RuntimeError: plugin bug"}]
    assert "plugin.regex_fields" in result.timings_ms


def test_gpu_waits_are_told_apart_per_stage(ocr: OcrPipeline) -> None:
    """Each stage's GPU wait is part of its time, they add up to the device's fence waits, and only the stages
    that submit work wait (the benchmark's Python time per stage is the difference)."""
    waited = ocr.device.wait_seconds
    result = ocr(label_image("LOT A2391"))
    waits = result.gpu_wait_ms
    assert set(waits) <= set(result.timings_ms)
    assert sum(waits.values()) == pytest.approx((ocr.device.wait_seconds - waited) * 1e3, abs=1e-6)
    assert all(0 <= waits[k] <= result.timings_ms[k] for k in waits)
    assert min(waits["det"], waits["cls"], waits["rec"]) > 0
    assert waits["db"] == waits["postproc"] == 0
    assert "gpu_wait_ms" not in result.to_dict()  # not part of the JSON contract


def test_the_agent_keeps_working_after_bad_requests(ocr: OcrPipeline) -> None:
    for bad in (b"", b"garbage", np.zeros((0, 5, 3), np.uint8)):
        with pytest.raises(ImageError):
            ocr(bad)
    assert [line.text for line in ocr(label_image("SERIAL-0042")).lines] == ["SERIAL-0042"]


@pytest.mark.parametrize(("h", "w"), [
    (430, 323),  # used as it is: a copy
    (2036, 834),  # longest side over 2000: resized in the shader (RapidOCR makes it 1984 × 832)
    (54, 1167),  # letterboxed only
    (300, 4100),  # resized, then letterboxed
    (3000, 2100),  # a bigger raw image than the staging buffer held so far: it grows
    (40, 2600),  # resized twice (with min_side_len 64, the shortest side ends under it): prepared on the host
    (431, 323),  # small again, after the growth
])
def test_the_gpu_prepares_the_image_as_the_host_does(ocr: OcrPipeline, h: int, w: int) -> None:
    """The prepared image in device memory, read back, equals prepared_image's bytes (cv2.resize and the
    letterbox, exactly), on a fresh random image, the buffer poisoned first."""
    from vkocr.agent.ocr.gpu_stages import GpuStages

    stages = ocr.stages
    if not isinstance(stages, GpuStages):
        pytest.skip("the GPU stages only")
    image = np.random.default_rng().integers(0, 256, (h, w, 3), dtype=np.uint8)
    prep = assert_prepared_as_the_host_does(stages, image, min_side_len=64)
    if (h, w) == (40, 2600):
        assert len(prep.sizes) == 2


def assert_prepared_as_the_host_does(stages: Any, image: np.ndarray, **options: Any) -> Prepared:
    """Load the image; the device image, read back, must equal prepared_image's bytes (poisoned first)."""
    from vkocr.agent.ocr.image_reference import resize_linear_u8

    opts = OcrOptions()
    settings = {"max_side_len": opts.max_side_len, "min_side_len": opts.min_side_len, "min_height": opts.min_height,
                "width_height_ratio": opts.width_height_ratio, **options}
    prep = preparation(*image.shape[:2], **settings)
    device, tensor = stages.device, stages.image.tensor
    device.write(tensor, np.full(tensor.shape, 0xDEADBEEF, np.uint32))
    stages.load(image, prep)
    stages.image.settle()
    expected = prepared_image(image, prep, resize_linear_u8)
    assert expected.shape[:2] == prep.shape
    got = device.download(tensor).view(np.uint8)[:expected.size].reshape(expected.shape)
    bad = np.argwhere(got != expected)
    assert bad.size == 0, f"{len(bad)} bytes differ, first at {bad[0].tolist()}"
    return prep


def test_an_image_too_big_for_staging_is_prepared_on_the_host(ocr: OcrPipeline) -> None:
    """Past max_staging_bytes (or when host-visible memory runs out) staging does not grow: the image is
    resized on the host instead, with the same bytes, and staging stays as it was."""
    from vkocr.agent.ocr.gpu_stages import GpuStages

    stages = ocr.stages
    if not isinstance(stages, GpuStages):
        pytest.skip("the GPU stages only")
    staging, limit = stages.image.staging, stages.image.max_staging
    stages.image.max_staging = staging.alloc.nbytes  # no growth from here
    try:
        w = 2100
        h = staging.alloc.nbytes // (3 * w) + 1  # one row more than staging holds
        assert_prepared_as_the_host_does(stages, np.random.default_rng().integers(0, 256, (h, w, 3), np.uint8))
    finally:
        stages.image.max_staging = limit
    assert stages.image.staging is staging


def test_an_image_too_thin_to_resize_is_refused(ocr: OcrPipeline) -> None:
    """Its shorter side rounds to 0 pixels in RapidOCR's resize, which RapidOCR refuses too."""
    with pytest.raises(ImageError, match="cannot be resized") as info:
        ocr(np.full((20, 2600, 3), 200, np.uint8))
    assert info.value.reason == "unsupported"
    assert [line.text for line in ocr(label_image("SERIAL-0042")).lines] == ["SERIAL-0042"]
