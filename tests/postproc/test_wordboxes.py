"""Per-character boxes against RapidOCR's CalRecBoxes."""

from __future__ import annotations

import copy

import numpy as np
from rapidocr_onnxruntime.cal_rec_boxes import CalRecBoxes
from rapidocr_onnxruntime.ch_ppocr_rec.utils import CTCLabelDecode

from vkocr.postproc.ctc import CtcText
from vkocr.postproc.wordboxes import char_boxes, word_info

CHARS = list("abcXYZ012-.") + list("中国人民小馆正品促销")


def _quad(rng: np.random.Generator, vertical: bool) -> np.ndarray:
    centre = rng.uniform(20, 500, 2)
    angle = rng.uniform(-0.3, 0.3) + (np.pi / 2 if vertical else 0.0)
    length, thickness = rng.uniform(10, 300), rng.uniform(8, 60)
    u = np.array([np.cos(angle), np.sin(angle)]) * length
    v = np.array([-np.sin(angle), np.cos(angle)]) * thickness
    quad = np.array([centre, centre + u, centre + u + v, centre + v])
    return (np.round(quad) if rng.random() < 0.5 else quad).astype(np.float32)


def _crop_size(box: np.ndarray) -> tuple[int, int]:
    """The crop RapidOCR cuts for the box, after its 90° turn of tall crops."""
    w = int(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))
    h = int(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))
    return (h, w) if h / w >= 1.5 else (w, h)


def test_matches_rapidocr_cal_rec_boxes(rng: np.random.Generator) -> None:
    checked = 0
    for case in range(400):
        box = _quad(rng, vertical=case % 3 == 0)
        crop_w, crop_h = _crop_size(box)
        steps = int(rng.integers(20, 100))
        k = int(rng.integers(1, min(steps, 25)))
        positions = np.sort(rng.choice(steps, k, replace=False))
        text = "".join(rng.choice(CHARS, k))
        conf = rng.uniform(0.3, 1, k).astype(np.float32).tolist()
        max_ratio = max(320 / 48, crop_w / crop_h * rng.uniform(1, 2))
        selection = np.zeros(steps, dtype=bool)
        selection[positions] = True
        words = CTCLabelDecode.get_word_info(text, selection)
        assert word_info(text, positions.tolist()) == words
        rec = [text, 0.9, [steps * ((crop_w * 1.0 / crop_h) / max_ratio), *words, conf]]
        ref = CalRecBoxes()([np.zeros((crop_h, crop_w, 3), np.uint8)], [box.copy()], [copy.deepcopy(rec)])[0]
        ours = char_boxes(CtcText(text, 0.9, tuple(positions.tolist()), tuple(conf), steps), box, crop_w, crop_h,
                          max_ratio)
        assert [c.box for c in ours] == [[[float(x), float(y)] for x, y in b] for b in ref[2]], f"case {case}"
        assert [c.text for c in ours] == ref[3] and [c.score for c in ours] == ref[4]
        checked += 1
    assert checked == 400


def test_empty_line_has_no_boxes() -> None:
    box = np.array([[0, 0], [50, 0], [50, 10], [0, 10]], np.float32)
    assert char_boxes(CtcText("", 0.0, (), (), 40), box, 50, 10, 320 / 48) == []
