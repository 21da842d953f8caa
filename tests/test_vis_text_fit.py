"""`--vis` draws every line's text inside its own box: each line is laid out alone (text_fit.text_ink, the
function the drawing uses) and every inked pixel is measured against the box's polygon. The ink must also
fill at least half the box along one of its sides, so shrinking the text to nothing does not pass.

Lines: the CPU backend's real result on ch_en_num.jpg (a wide headline, small price tags, a slanted box);
RapidOCR 1.4.4's results for long Chinese lines (test_letterbox_like.jpg) and vertical columns
(text_vertical_words.png); ch_en_num.jpg's lines turned by 30° and -65° about the image centre.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import cv2
import numpy as np
import pytest

from tests.paths import COMPAT, COMPAT_IMAGES
from vkocr.agent.ocr.fonts import find_font
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.ocr.text_fit import TextInk, box_sides, reads_vertically, text_ink

pytestmark = pytest.mark.compat

Line = tuple[str, np.ndarray]  # text, 4×2 box
FILLED = 0.5  # the ink spans at least this share of the box's width or of its height
INSTALLED = find_font()  # the font the drawing uses


@pytest.fixture(scope="module")
def ch_en_num_lines() -> Iterator[list[Line]]:
    with OcrPipeline.open("cpu", cpu_threads=2) as pipeline:
        result = pipeline(str(COMPAT_IMAGES / "ch_en_num.jpg"))
    yield [(line.text, np.asarray(line.box, np.float64)) for line in result.lines]


def reference_lines(image: str) -> list[Line]:
    reference = json.loads((COMPAT / "reference.json").read_text(encoding="utf-8"))
    return [(line["text"], np.asarray(line["box"], np.float64)) for line in reference[image]["full"]]


def turned(lines: list[Line], degrees: float, centre: tuple[float, float]) -> list[Line]:
    """The boxes turned about `centre` (corner order kept, so each box's text turns with it)."""
    rotation = cv2.getRotationMatrix2D(centre, degrees, 1.0)
    return [(text, box @ rotation[:, :2].T + rotation[:, 2]) for text, box in lines]


def ink_pixels(ink: TextInk) -> np.ndarray:
    """The canvas coordinates (x, y) of every pixel the line inked."""
    ys, xs = np.nonzero(ink.alpha)
    return np.stack([xs + ink.x, ys + ink.y], axis=1).astype(np.float64)


def check_lines(lines: list[Line], canvas: tuple[int, int], font: str | None = INSTALLED) -> None:
    """Every line laid out alone in `font` (a font file, None for Pillow's built-in one), measured."""
    problems = []
    for text, box in lines:
        ink = text_ink(box, text, font, canvas)
        if ink is None:
            problems.append(f"{text!r}: nothing drawn in box {box.tolist()}")
            continue
        pixels = ink_pixels(ink)
        quad = box.astype(np.float32).reshape(-1, 1, 2)
        outside = [p for p in pixels if cv2.pointPolygonTest(quad, (float(p[0]), float(p[1])), False) < 0]
        if outside:
            problems.append(f"{text!r}: {len(outside)} of {len(pixels)} inked pixels outside box {box.tolist()}, "
                            f"e.g. {outside[0].tolist()}")
        # The ink's extent along the box's own axes, against the box's own sides.
        width, height = box_sides(box)
        across, down = (box[1] - box[0]) / np.linalg.norm(box[1] - box[0]), (box[3] - box[0]) / np.linalg.norm(
            box[3] - box[0])
        spans = [np.ptp(pixels @ axis) + 1 for axis in (across, down)]
        if max(spans[0] / width, spans[1] / height) < FILLED:
            problems.append(f"{text!r}: ink spans {spans[0]:.0f}×{spans[1]:.0f} px of a {width:.0f}×{height:.0f} "
                            "box: not fitted to it")
    assert not problems, "\n".join(problems)


def test_the_real_result_on_ch_en_num_stays_inside_its_boxes(ch_en_num_lines: list[Line]) -> None:
    assert any("正品促销" in text for text, _ in ch_en_num_lines)  # the headline that used to run past its box
    check_lines(ch_en_num_lines, (323, 430))


def test_long_chinese_lines_stay_inside_their_boxes() -> None:
    lines = reference_lines("test_letterbox_like.jpg")
    assert max(len(text) for text, _ in lines) > 60
    check_lines(lines, (1167, 54))


def test_vertical_columns_are_stacked_inside_their_boxes() -> None:
    lines = reference_lines("text_vertical_words.png")
    assert all(reads_vertically(box) for _, box in lines)
    check_lines(lines, (834, 2036))


@pytest.mark.parametrize("degrees", [30.0, -65.0])
def test_turned_boxes_keep_their_text_inside(ch_en_num_lines: list[Line], degrees: float) -> None:
    # A canvas big enough for the turned image, the boxes moved into its middle.
    lines = [(text, box + 200) for text, box in turned(ch_en_num_lines, degrees, (161.5, 215.0))]
    check_lines(lines, (723, 830))


def test_pillows_builtin_font_fits_too_when_no_font_is_installed() -> None:
    lines = reference_lines("issue_170.png") + [(t, box + [0, 400]) for t, box in reference_lines("two_dim_image.npy")]
    check_lines(lines, (900, 500), font=None)
