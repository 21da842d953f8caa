"""RapidOCR 3.10's procedure variants (agent/ocr/procedures.py) against RapidOCR 3.10's own functions, on fresh
random inputs: box order, CTC scores, the RGBA rule; and that 1.4.4's stay 1.4.4's."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng
from vkocr.agent.ocr.images import decode_image
from vkocr.postproc.ctc import ctc_decode
from vkocr.postproc.order import sort_boxes, sort_boxes_in_lines

rapidocr = pytest.importorskip("rapidocr")
from rapidocr.ch_ppocr_det import TextDetector  # noqa: E402 - after the skip: a test-only dependency
from rapidocr.ch_ppocr_rec.utils import CTCLabelDecode  # noqa: E402
from rapidocr.utils.load_image import LoadImage  # noqa: E402


def random_boxes(rng: np.random.Generator, n: int) -> np.ndarray:
    """n axis-aligned boxes whose top-left corners crowd a few rows: successive y often < 10 px apart."""
    x = rng.integers(0, 600, n)
    y = rng.integers(0, 4, n) * 25 + rng.integers(0, 14, n)
    w, h = rng.integers(5, 80, n), rng.integers(5, 30, n)
    return np.stack([np.stack([x, y], 1), np.stack([x + w, y], 1), np.stack([x + w, y + h], 1),
                     np.stack([x, y + h], 1)], 1).astype(np.float32)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 40])
def test_line_order_is_rapidocr_310s(n: int) -> None:
    rng, seed = fresh_rng()
    for _ in range(20):
        boxes = random_boxes(rng, n)
        theirs = TextDetector.sorted_boxes(boxes)
        ours = np.array(sort_boxes_in_lines(list(boxes))).reshape(-1, 4, 2)
        assert np.array_equal(ours, np.asarray(theirs).reshape(-1, 4, 2)), f"seed {seed}"


def test_the_two_orders_differ_on_a_creeping_run() -> None:
    # each box 6 px below the last: 3.10 reads one line (sorted by x), 1.4.4 swaps only neighbours
    boxes = [np.array([[x, y], [x + 10, y], [x + 10, y + 5], [x, y + 5]], np.float32)
             for x, y in ((300, 0), (200, 6), (100, 12), (0, 18))]
    assert [b[0][0] for b in sort_boxes_in_lines(boxes)] == [0, 100, 200, 300]
    assert [b[0][0] for b in sort_boxes(boxes)] != [0, 100, 200, 300]


def test_ctc_scores_round_as_rapidocr_310() -> None:
    rng, seed = fresh_rng()
    charset = ["blank", *"abcdefghij", " "]
    decoder = CTCLabelDecode(character=charset[1:-1])
    for _ in range(10):
        indices = rng.integers(0, len(charset), (6, 40))
        indices[0] = 0  # a line with nothing kept
        probs = rng.uniform(0.3, 1.0, (6, 40)).astype(np.float32)
        onehot = np.full((6, 40, len(charset)), 0.0, np.float32)  # its input: probabilities per class
        onehot[np.arange(6)[:, None], np.arange(40)[None, :], indices] = probs
        theirs, _ = decoder(onehot, return_word_box=False)
        ours = [(t.text, t.score) for t in ctc_decode(indices, probs, charset, decimals=5)]
        assert ours == [(text, score) for text, score in theirs], f"seed {seed}"
        unrounded = ctc_decode(indices, probs, charset)
        assert [t.text for t in unrounded] == [t for t, _ in ours]


def test_rgba_blend_is_rapidocr_310s() -> None:
    rng, seed = fresh_rng()
    for ink in (20, 235):  # dark text (blended over white) and light text (over black)
        rgba = rng.integers(0, 256, (37, 53, 4), dtype=np.uint8)
        rgba[..., :3] = np.clip(rgba[..., :3] // 8 + ink - 16, 0, 255)
        rgba[rng.random((37, 53)) < 0.3, 3] = 0
        theirs_bgr = LoadImage.cvt_four_to_three(rgba)
        ours = decode_image(rgba, rgba="blend")
        assert np.array_equal(ours, theirs_bgr[..., ::-1]), f"seed {seed}"
        assert not np.array_equal(ours, decode_image(rgba)), "the 1.4.4 rule is another rule"
    transparent = np.zeros((9, 9, 4), np.uint8)
    assert np.array_equal(decode_image(transparent, rgba="blend"), LoadImage.cvt_four_to_three(transparent))


def test_an_unknown_rgba_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="rgba"):
        decode_image(np.zeros((4, 4, 4), np.uint8), rgba="median")
