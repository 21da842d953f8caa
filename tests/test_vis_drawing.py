"""What `vkocr ocr --vis` draws, on RapidOCR 1.4.4's result for ch_en_num.jpg: the image with each box filled
translucently (the picture still shows through), a white page with the text inside the boxes, and with
`scores` a tag in the box's colour at each box's top-left corner."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from tests.paths import COMPAT, COMPAT_IMAGES
from vkocr.agent.ocr.images import decode_image
from vkocr.agent.ocr.visualize import IMAGE_FILL, colour, draw_result
from vkocr.postproc.result import OcrLine, OcrResult

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    return decode_image(COMPAT_IMAGES / "ch_en_num.jpg")


@pytest.fixture(scope="module")
def result() -> OcrResult:
    reference = json.loads((COMPAT / "reference.json").read_text(encoding="utf-8"))["ch_en_num.jpg"]["full"]
    return OcrResult(lines=[OcrLine(line["text"], line["score"], line["box"]) for line in reference])


def box_masks(lines: list[OcrLine], shape: tuple[int, ...], shrink: int = 0) -> list[np.ndarray]:
    """Each box as a filled mask; `shrink` px eroded, to stay clear of the outlines."""
    masks = []
    for line in lines:
        mask = np.zeros(shape[:2], np.uint8)
        cv2.fillPoly(mask, [np.rint(np.asarray(line.box)).astype(np.int32)], 1)
        kernel = np.ones((2 * shrink + 1,) * 2, np.uint8)
        masks.append(cv2.erode(mask, kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0) if shrink else mask)
    return masks


def test_boxes_are_filled_translucently_over_the_image(image: np.ndarray, result: OcrResult) -> None:
    drawn = np.asarray(draw_result(image, result)).astype(np.float64)
    h, w = image.shape[:2]
    assert drawn.shape == (h, 2 * w, 3)
    left = drawn[:, :w]
    inner = box_masks(result.lines, image.shape, shrink=4)
    anywhere = np.any(box_masks(result.lines, image.shape), axis=0)
    # Outside every box (and its outline) the picture is untouched.
    clear = ~cv2.dilate(anywhere.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool)
    assert np.array_equal(left[clear], image[clear])
    full = box_masks(result.lines, image.shape)
    checked = 0
    for i, mask in enumerate(inner):
        others = np.any([m for j, m in enumerate(full) if j != i], axis=0).astype(np.uint8)
        alone = mask.astype(bool) & ~cv2.dilate(others, np.ones((9, 9), np.uint8)).astype(bool)  # no other box near
        if not alone.any():  # a thin box next to another (the 9 px price tags): nothing clear of outlines
            continue
        checked += 1
        expected = image[alone] * (1 - IMAGE_FILL) + np.array(colour(i)) * IMAGE_FILL
        assert np.abs(left[alone] - expected).max() <= 2, result.lines[i].text
    assert checked >= len(inner) // 2


def test_the_text_page_has_ink_in_every_box_and_nowhere_else(image: np.ndarray, result: OcrResult) -> None:
    w = image.shape[1]
    page = np.asarray(draw_result(image, result))[:, w:]
    # The text's ink: dark grey. The fills are light (over 220) and every outline colour far from grey.
    page16 = page.astype(np.int16)
    dark = (page16.max(axis=2) < 160) & (np.ptp(page16, axis=2) < 60)
    masks = box_masks(result.lines, image.shape)
    assert not (dark & ~np.any(masks, axis=0)).any()
    for line, mask in zip(result.lines, masks):
        assert (dark & mask.astype(bool)).sum() >= 5, f"no text drawn for {line.text!r}"
    assert (page[~np.any(masks, axis=0)] == 255).mean() > 0.97  # white, bar the outlines' antialiasing


def test_scores_tag_each_box_in_its_colour(image: np.ndarray, result: OcrResult) -> None:
    # Four lines far apart, so no tag covers another: the headline at the top edge gets its tag inside the box.
    lines = [line for line in result.lines if line.text in ("正品促销", "强力去污符合国标", "5.8", "假一赔十")]
    assert len(lines) == 4
    shown = OcrResult(lines=lines)
    plain = np.asarray(draw_result(image, shown))
    tagged = np.asarray(draw_result(image, shown, scores=True))
    w = image.shape[1]
    assert np.array_equal(plain[:, w:], tagged[:, w:])  # the text page carries no tags
    changed = np.any(plain != tagged, axis=2)
    near_corners = np.zeros_like(changed)
    for i, line in enumerate(lines):
        x, y = int(line.box[0][0]), int(line.box[0][1])
        window = (slice(max(0, y - 20), y + 20), slice(max(0, x - 2), x + 45))
        near_corners[window] = True
        tag = tagged[window][changed[window]].astype(int)
        in_colour = np.all(tag == colour(i), axis=1)
        assert len(tag) >= 100 and in_colour.mean() > 0.4, f"no tag in {line.text!r}'s colour at its corner"
        assert (np.abs(tag - colour(i)).sum(axis=1) > 200).sum() >= 10, f"no digits on {line.text!r}'s tag"
    assert not (changed & ~near_corners).any()  # the tags change nothing else
