"""The sameness gate on lavapipe, on a small set: the default model set's shipped precision plans (fp16 where
calibration allowed) read the same lines and boxes as fp32 (agent/ocr/sameness.py); and what the pipeline says
of the precision that serves."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import vkocr
from vkocr.agent.cli.stream_images import find_font, render
from vkocr.agent.errors import OptionsError
from vkocr.agent.ocr.precision import shipped_plans
from vkocr.agent.ocr.sameness import Sameness

LAVAPIPE = "llvmpipe"


@pytest.fixture(scope="module")
def images() -> list[tuple[str, np.ndarray]]:
    """One 720×1280 page of 11 lines: on lavapipe a read costs about its det map's size (at least 736 on the short
    side), so a page of many lines judges the most lines per second (the samples and two small pages took 2.3×
    the time for 11 lines). The gate's full sets run on the GPU (scripts/precision_sameness.py)."""
    font, cjk = find_font()
    return [render(11, 4242, font, cjk)]


@pytest.fixture(scope="module")
def answers(images: list[tuple[str, np.ndarray]]) -> Iterator[dict[str, list[vkocr.OcrResult]]]:
    out = {}
    for precision in ("fp32", "fp16"):
        with vkocr.OCR(LAVAPIPE, precision=precision) as ocr:
            assert ocr.precision.precision == precision, ocr.precision.reason
            out[precision] = [ocr.read(image) for _, image in images]
    yield out


def test_the_shipped_fp16_plans_read_what_fp32_reads(images: list, answers: dict) -> None:
    sameness = Sameness()
    for (name, _), ref, got in zip(images, answers["fp32"], answers["fp16"]):
        sameness.add(name, ref, got)
    assert sameness.lines >= 10, "too few lines to judge"
    assert sameness.passed, sameness.report()


def test_the_default_set_ships_plans_for_every_model() -> None:
    shipped = shipped_plans("ppocrv6-small")
    assert shipped is not None and set(shipped.plans) == {"det", "cls", "rec"}


def test_auto_keeps_fp32_on_lavapipe_and_the_cpu_backend_says_why() -> None:
    with vkocr.OCR(LAVAPIPE) as ocr:
        assert ocr.precision.precision == "fp32" and "CPU implementation" in ocr.precision.reason
    with vkocr.OCR("cpu", precision="fp16") as ocr:
        assert ocr.precision.precision == "fp32" and "fp32" in ocr.precision.reason
    with pytest.raises(OptionsError, match="expected one of"):
        vkocr.OCR(LAVAPIPE, precision="half")
