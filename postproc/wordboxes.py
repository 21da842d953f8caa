"""Per-character boxes of a recognised line, as RapidOCR 1.4.4's ``CalRecBoxes`` computes them.

Each kept CTC time step is a column of the recogniser's input; a character's box is centred on its column,
as wide as the mean spacing of the characters of its kind in its word group (Chinese characters and
"English" — everything else — are measured separately), spans the crop's height, is shrunk where neighbours
overlap, and is mapped back through the inverse of the crop's perspective transform into the coordinates of
the detection box. The caller maps them on to the original image as it maps line boxes (RapidOCR then
truncates them to int32).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vkocr.postproc.cell_geometry import separate, to_detection_box
from vkocr.postproc.ctc import CtcText
from vkocr.postproc.result import CharBox


def _is_han(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff"


def word_info(text: str, positions: Sequence[int]) -> tuple[list[list[str]], list[list[int]], list[str]]:
    """RapidOCR's ``get_word_info``: characters grouped into runs of Chinese ("cn") or other ("en&num")
    characters, split where the kind changes or two kept steps are more than 4 columns apart."""
    cols = np.asarray(positions, dtype=np.int64)
    width = np.zeros(cols.shape)
    if cols.size:
        width[1:] = cols[1:] - cols[:-1]
        width[0] = min(3 if _is_han(text[0]) else 2, int(cols[0]))
    words: list[list[str]] = []
    word_cols: list[list[int]] = []
    states: list[str] = []
    state: str | None = None
    chars: list[str] = []
    char_cols: list[int] = []
    for i, ch in enumerate(text):
        kind = "cn" if _is_han(ch) else "en&num"
        if state is None:
            state = kind
        if state != kind or width[i] > 4:
            if chars:
                words.append(chars)
                word_cols.append(char_cols)
                states.append(state)
                chars, char_cols = [], []
            state = kind
        chars.append(ch)
        char_cols.append(int(cols[i]))
    if chars and state is not None:
        words.append(chars)
        word_cols.append(char_cols)
        states.append(state)
    return words, word_cols, states


def _cells(
    text: str, crop_w: int, crop_h: int, columns: float, groups: tuple[list[list[str]], list[list[int]], list[str]]
) -> tuple[list[str], list[list[list[float]]]]:
    """``cal_ocr_word_box`` on the crop rectangle: characters in text order, boxes sorted by left edge."""
    words, word_cols, states = groups
    cell_width = crop_w / columns
    widths: dict[str, list[float]] = {"cn": [], "en": []}
    cols: dict[str, list[int]] = {"cn": [], "en": []}
    contents: list[str] = []
    for word, word_col, state in zip(words, word_cols, states, strict=True):
        kind = "cn" if state == "cn" else "en"
        if len(word_col) > 1:
            widths[kind].append((word_col[-1] - word_col[0]) * cell_width / (len(word_col) - 1))
        cols[kind] += word_col
        contents += word
    boxes: list[list[list[float]]] = []
    for kind in ("cn", "en"):
        if not cols[kind]:
            continue
        avg = np.mean(widths[kind]) if widths[kind] else crop_w / len(text)
        for col in cols[kind]:
            centre = (col + 0.5) * cell_width
            x0 = max(int(centre - avg / 2), 0)
            x1 = min(int(centre + avg / 2), crop_w)
            boxes.append([[x0, 0], [x1, 0], [x1, crop_h], [x0, crop_h]])
    return contents, sorted(boxes, key=lambda b: b[0][0])


def _turned(box: np.ndarray) -> bool:
    """Whether the crop was turned 90° (height/width ≥ 1.5, sides as the crop measured them)."""
    width = int(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))
    height = int(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))
    return height * 1.0 / width >= 1.5


def char_boxes(
    decoded: CtcText, det_box: np.ndarray, crop_w: int, crop_h: int, max_wh_ratio: float
) -> list[CharBox]:
    """Per-character boxes of one line (RapidOCR's ``return_word_box``), in detection-box coordinates.

    ``det_box``: the line's 4×2 detection quad (the one the crop was cut from); ``crop_w``/``crop_h``: the crop
    as the recogniser got it (after any 90° turn); ``max_wh_ratio``: the width/height ratio the recogniser's
    batch was padded to (at least 320/48). Boxes pair with characters in RapidOCR's order: characters in text
    order, boxes by left edge.
    """
    if not decoded.text:
        return []
    columns = decoded.steps * ((crop_w * 1.0 / crop_h) / max_wh_ratio)
    groups = word_info(decoded.text, decoded.positions)
    contents, boxes = _cells(decoded.text, crop_w, crop_h, columns, groups)
    mapped = to_detection_box(np.asarray(det_box), separate(boxes), _turned(np.asarray(det_box)), np.float32)
    return [
        CharBox(ch, [[float(x), float(y)] for x, y in box], float(score))
        for ch, box, score in zip(contents, mapped, decoded.char_scores, strict=False)
    ]
