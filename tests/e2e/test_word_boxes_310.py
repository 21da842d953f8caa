"""Word boxes of the rapidocr-3.10 procedure (postproc/wordboxes_310.py) against RapidOCR 3.10.0 itself: its
CTCLabelDecode and CalRecBoxes on fresh random lines, then the whole pipeline (CPU backend, ppocrv6-small)
against RapidOCR 3.10 with return_word_box=True on a few compat images and a rendered English page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from tests.e2e.test_rendered import LATIN_FONT, PHRASES, is_latin
from tests.engine.kernels.harness import fresh_rng
from tests.paths import COMPAT_IMAGES
from tests.postproc.test_cell_geometry import random_quad
from tests.rapidocr310 import rapidocr_310
from vkocr.agent.ocr.model_sets import choose_models
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.serving.wire import result_from_proto, result_to_proto
from vkocr.postproc.ctc import CtcText, ctc_decode
from vkocr.postproc.wordboxes import char_boxes
from vkocr.postproc.wordboxes_310 import word_boxes, word_info

rapidocr = pytest.importorskip("rapidocr")
from rapidocr.cal_rec_boxes import CalRecBoxes  # noqa: E402 - after the skip: a test-only dependency
from rapidocr.ch_ppocr_rec.typings import TextRecOutput  # noqa: E402
from rapidocr.ch_ppocr_rec.utils import CTCLabelDecode  # noqa: E402
from rapidocr.utils.process_img import map_img_to_original  # noqa: E402

# Latin, digits, punctuation, Chinese, CJK punctuation, full-width forms, the ideographic space (a space that
# is also "Chinese"); CTCLabelDecode adds the blank (class 0) and the space (the last class)
DICT = list("abcXYZ0127-.:/") + list("中国人民小馆正品") + list("。、《》") + list("，！（Ａ１") + ["\u3000"]
CHARSET = ["blank", *DICT, " "]
SPACE = len(CHARSET) - 1


def random_steps(rng: np.random.Generator, steps: int, chinese: bool) -> np.ndarray:
    """One line's argmax classes: blanks, repeats, spaces, gaps of every width around the 5-column rule."""
    latin = [i for i, c in enumerate(CHARSET) if c.isascii() and c not in ("blank", " ")]
    pool = list(range(1, len(CHARSET))) if chinese else [*latin, SPACE]
    out = np.zeros(steps, np.int64)
    blank_p = rng.uniform(0.2, 0.8)
    for t in range(steps):
        r = rng.random()
        if r < blank_p:
            continue
        if t and out[t - 1] and r < blank_p + 0.1:
            out[t] = out[t - 1]  # a repeat: CTC keeps only the first
        elif r < blank_p + 0.2:
            out[t] = SPACE
        else:
            out[t] = rng.choice(pool)
    return out


def upright_tall_box(rng: np.random.Generator) -> np.ndarray:
    """A vertical line's box on whole pixels, not turned."""
    x, y = rng.integers(0, 500, 2)
    w = int(rng.integers(8, 60))
    h = w * float(rng.uniform(1.6, 8))
    return np.array([[x, y], [x + w, y], [x + w, y + h], [x, y + h]]).round().astype(np.float32)


def crop_size(box: np.ndarray) -> tuple[int, int]:
    """(width, height) of the crop RapidOCR cuts for the box, after its 90° turn of tall crops."""
    w = int(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))
    h = int(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))
    return (h, w) if h * 1.0 / w >= 1.5 else (w, h)


def test_matches_rapidocr_310_cal_rec_boxes() -> None:
    """Random lines through 3.10's decoder and CalRecBoxes, and through ours: words, scores, boxes identical."""
    rng, seed = fresh_rng()
    decoder = CTCLabelDecode(character=DICT)
    assert decoder.character == CHARSET
    kinds = {"words": 0, "chars": 0}
    for case in range(600):
        # in prepared-image pixels, as the crop is cut; a third upright on whole pixels, unscaled: there the
        # float64 of 3.10's mapped points (1.4.4: float32) decides some truncations
        exact = case % 3 == 0
        box = upright_tall_box(rng) if exact else random_quad(rng)
        crop_w, crop_h = crop_size(box)
        if min(crop_w, crop_h) < 4:
            continue
        ratio_w, ratio_h = (1.0, 1.0) if exact or rng.random() < 0.3 else tuple(rng.uniform(0.5, 2.0, 2).tolist())
        det_box = (box * np.array([ratio_w, ratio_h])).astype(np.float32)  # mapped back to the original
        steps = int(rng.integers(10, 120))
        indices = random_steps(rng, steps, chinese=rng.random() < 0.5)
        probs = rng.uniform(0.3, 1.0, steps).astype(np.float32)
        max_ratio = max(320 / 48, crop_w / crop_h * (1.0 if rng.random() < 0.3 else rng.uniform(1, 2)))
        single = bool(rng.random() < 0.2)

        onehot = np.zeros((1, steps, len(CHARSET)), np.float32)
        onehot[0, np.arange(steps), indices] = probs
        lines, infos = decoder(onehot, return_word_box=True, wh_ratio_list=[crop_w * 1.0 / crop_h],
                               max_wh_ratio=max_ratio)
        text = lines[0][0]
        crop = map_img_to_original([np.zeros((crop_h, crop_w, 3), np.uint8)], ratio_h, ratio_w)
        rec = TextRecOutput(txts=(text,), word_results=(infos[0],))
        theirs = CalRecBoxes()(crop, np.stack([det_box]), rec, single).word_results[0]

        decoded = ctc_decode(indices[None], probs[None], CHARSET, decimals=5)[0]
        assert decoded.text == text, f"seed {seed}, case {case}"
        words, cols, word_kinds = word_info(decoded.text, decoded.positions)
        info = infos[0]
        assert (words, cols, word_kinds) == (info.words, info.word_cols, [k.value for k in info.word_types]), \
            f"seed {seed}, case {case}"
        ours = word_boxes(decoded, det_box, crop_w, crop_h, max_ratio, ratio_w=ratio_w, ratio_h=ratio_h,
                          single_chars=single)
        expected = [(t, s, [[float(x), float(y)] for x, y in b]) for t, s, b in theirs]
        assert [(c.text, c.score, c.box) for c in ours] == expected, f"seed {seed}, case {case}: {text!r}"
        if ours:
            kinds["words" if all(k == "en&num" for k in word_kinds) and not single else "chars"] += 1
    assert min(kinds.values()) >= 50, f"seed {seed}: too few lines of one kind: {kinds}"


def test_latin_lines_get_word_boxes_and_the_zipped_scores() -> None:
    """"ab cd": one box per word (1.4.4: per character), scored with the first two kept steps' probabilities,
    as 3.10 zips them (the second word gets "b"'s, not its own)."""
    positions, scores = (2, 5, 9, 12, 15), (0.9, 0.8, 0.7, 0.6, 0.5)
    decoded = CtcText("ab cd", 0.7, positions, scores, 40)
    box = np.array([[10, 20], [110, 20], [110, 40], [10, 40]], np.float32)
    words = word_boxes(decoded, box, 100, 20, 100 / 20)
    assert [(w.text, w.score) for w in words] == [("ab", 0.9), ("cd", 0.8)]
    assert words[0].box[0][0] < words[0].box[1][0] <= words[1].box[0][0] < words[1].box[1][0]
    assert [c.text for c in char_boxes(decoded, box, 100, 20, 100 / 20)] == list("ab cd")


# --- the whole pipeline against RapidOCR 3.10 -------------------------------------------------------------

# Chinese with digits (18 lines), vertical Chinese on an image resized to max_side_len (ratios ≠ 1), two long
# letterboxed lines of Chinese mixed with Latin words
COMPAT = ("ch_en_num.jpg", "text_vertical_words.png", "test_letterbox_like.jpg")


@pytest.fixture(scope="module")
def ocr() -> Iterator[OcrPipeline]:
    chosen = choose_models("ppocrv6-small")
    if chosen.missing():
        pytest.skip("ppocrv6-small is not installed: scripts/fetch_models.py --all")
    with OcrPipeline.open("cpu", options=chosen.ocr_options(), model_paths=chosen.paths) as pipeline:
        assert pipeline.options.procedure == "rapidocr-3.10"
        yield pipeline


@pytest.fixture(scope="module")
def reference() -> Any:
    return rapidocr_310()


def english_page(rng: np.random.Generator) -> np.ndarray:
    """Six Latin phrases on a white page 2100 px wide (over max_side_len: resized, so ratios ≠ 1)."""
    phrases = [p for p in PHRASES if is_latin(p)]
    image = Image.new("RGB", (2100, 620), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for row, i in enumerate(rng.choice(len(phrases), 6, replace=False)):
        font = ImageFont.truetype(str(LATIN_FONT), int(rng.integers(40, 60)))
        draw.text((int(rng.integers(20, 400)), 20 + 100 * row), phrases[i], font=font, fill=(0, 0, 0))
    return np.asarray(image, np.uint8).copy()


def compare(ours: Any, theirs: Any, what: str) -> int:
    """Asserts the same lines and, per line, the same word results; the number of words."""
    assert [line.text for line in ours.lines] == list(theirs.txts or ()), what
    ref_words = theirs.word_results if theirs.txts else ()
    assert len(ours.lines) == len(ref_words), what
    count = 0
    for n, (line, ref) in enumerate(zip(ours.lines, ref_words, strict=True)):
        mine = [(c.text, c.score, c.box) for c in line.chars or ()]
        expected = [(t, s, [[float(x), float(y)] for x, y in b]) for t, s, b in ref]
        assert mine == expected, f"{what}, line {n} {line.text!r}"
        count += len(mine)
    return count


@pytest.mark.compat
def test_compat_images_match_rapidocr_310(ocr: OcrPipeline, reference: Any) -> None:
    words = 0
    for name in COMPAT:
        path = str(COMPAT_IMAGES / name)
        words += compare(ocr(path, return_word_box=True), reference(path, return_word_box=True), name)
    assert words >= 200, f"only {words} word results: the comparison would say little"


@pytest.mark.skipif(not LATIN_FONT.is_file(), reason=f"{LATIN_FONT} is absent (Debian package fonts-dejavu-core)")
def test_rendered_english_page_matches_rapidocr_310(ocr: OcrPipeline, reference: Any) -> None:
    rng, seed = fresh_rng()
    page = english_page(rng)
    result = ocr(page, return_word_box=True)
    theirs = reference(np.ascontiguousarray(page[..., ::-1]), return_word_box=True)  # it takes arrays as BGR
    words = compare(result, theirs, f"seed {seed}")
    assert words >= 18 and all(" " not in c.text for line in result.lines for c in line.chars or ()), f"seed {seed}"
    # the word results survive the JSON and the wire
    assert json.loads(result.to_json())["lines"][0]["chars"][0]["text"] == result.lines[0].chars[0].text
    back = result_from_proto(result_to_proto(result, "r", "m", "cpu", (page.shape[1], page.shape[0])))
    assert [[c.text for c in line.chars or ()] for line in back.lines] == \
        [[c.text for c in line.chars or ()] for line in result.lines]
    assert [c.box for c in back.lines[0].chars or ()] == [c.box for c in result.lines[0].chars or ()]
