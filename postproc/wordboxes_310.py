"""Word boxes of a recognised line, as RapidOCR 3.10.0's ``CalRecBoxes`` computes them (``return_word_box``).

As 1.4.4's (postproc/wordboxes.py), each kept CTC time step is a column of the recogniser's input, a cell is
centred on its column and spans the crop's height, overlaps are halved and the cells mapped back through the
inverse of the crop's perspective transform (postproc/cell_geometry.py). Where 3.10 differs:

- words (``get_word_info``): a space ends a word and is dropped; a gap of more than 5 columns (1.4.4: 4) or a
  change of kind starts one; "Chinese" also takes CJK punctuation (U+3000–303F) and full-width forms
  (U+FF00–FFEF).
- a line with no Chinese word gets one box per word (the bounds of its characters' cells); any other line
  one per character, spaces left out. Every cell has one width: the mean spacing over all words of two or
  more characters (1.4.4 measures Chinese and the rest apart).
- pixels: 3.10 first maps the detection box to the original image and resizes the crop by the preparation's
  ratios (Python's round), so cells are laid out on the resized crop and land in original pixels directly;
  the 90° rule is round(height / width, 2) ≥ 1.5 on the box's float sides; points are multiplied in float64.
- scores: RapidOCR zips the boxes with the line's kept-step probabilities (spaces included), so the n-th box
  scores the n-th kept character's probability, not its own characters'.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vkocr.postproc.cell_geometry import separate, to_detection_box
from vkocr.postproc.ctc import CtcText
from vkocr.postproc.result import CharBox

CN = "cn"
EN_NUM = "en&num"
Cell = list[list[float]]


def is_chinese(ch: str) -> bool:
    """3.10's ``is_chinese_char``: CJK ideographs, CJK punctuation, full-width forms."""
    return "\u4e00" <= ch <= "\u9fff" or "\u3000" <= ch <= "\u303f" or "\uff00" <= ch <= "\uffef"


def word_info(text: str, positions: Sequence[int]) -> tuple[list[list[str]], list[list[int]], list[str]]:
    """3.10's ``get_word_info``: (words as character lists, their columns, their kinds "cn" or "en&num")."""
    cols = np.asarray(positions, dtype=np.int64)
    if cols.size == 0:
        return [], [], []
    width = np.zeros(cols.shape)
    width[1:] = cols[1:] - cols[:-1]
    width[0] = min(3 if is_chinese(text[0]) else 2, int(cols[0]))
    words: list[list[str]] = []
    word_cols: list[list[int]] = []
    kinds: list[str] = []
    kind: str | None = None
    chars: list[str] = []
    char_cols: list[int] = []

    def close() -> None:
        nonlocal chars, char_cols
        if chars and kind is not None:
            words.append(chars)
            word_cols.append(char_cols)
            kinds.append(kind)
        chars, char_cols = [], []

    for i, ch in enumerate(text):
        if ch.isspace():
            close()
            continue
        this = CN if is_chinese(ch) else EN_NUM
        if kind is None:
            kind = this
        if kind != this or width[i] > 5:
            close()
            kind = this
        chars.append(ch)
        char_cols.append(int(cols[i]))
    close()
    return words, word_cols, kinds


def _row(cols: Sequence[int], char_width: float, col_width: float, bounds: tuple[float, float, float, float]
         ) -> list[Cell]:
    """``calc_box``: one cell per column, sorted by left edge."""
    x0, y0, x1, y1 = bounds
    cells = []
    for col in cols:
        centre = (col + 0.5) * col_width
        left = max(int(centre - char_width / 2), 0) + x0
        right = min(int(centre + char_width / 2), x1 - x0) + x0
        cells.append([[left, y0], [right, y0], [right, y1], [left, y1]])
    return sorted(cells, key=lambda c: c[0][0])


def _cells(text: str, groups: tuple[list[list[str]], list[list[int]], list[str]], crop_w: int, crop_h: int,
           line_len: float, single_chars: bool) -> tuple[list[str], list[Cell]]:
    """``cal_ocr_word_box`` on the (resized) crop: the contents and their cells, in crop pixels."""
    words, word_cols, kinds = groups
    if not text or line_len == 0:
        return [], []
    bounds = (0.0, 0.0, float(crop_w), float(crop_h))  # quads_to_rect_bbox of the crop: floats
    col_width = (bounds[2] - bounds[0]) / line_len
    per_word = all(k == EN_NUM for k in kinds) and not single_chars
    widths = [(c[-1] - c[0]) * col_width / (len(c) - 1) for c in word_cols if len(c) > 1]
    # a plain sum, as RapidOCR's (np.mean's pairwise sum can differ in the last bit)
    char_width = sum(widths) / len(widths) if widths else (bounds[2] - bounds[0]) / len(text)
    if not per_word:
        return [ch for w in words for ch in w], _row([c for cols in word_cols for c in cols], char_width,
                                                     col_width, bounds)
    cells = []
    for cols in word_cols:
        pts = np.array(_row(cols, char_width, col_width, bounds)).reshape(-1, 2)
        x0, y0 = float(np.min(pts[:, 0])), float(np.min(pts[:, 1]))
        x1, y1 = float(np.max(pts[:, 0])), float(np.max(pts[:, 1]))
        cells.append([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
    return ["".join(w) for w in words], cells


def _vertical(box: np.ndarray) -> bool:
    """``get_box_direction``: the crop was turned 90° by this rule (float sides, the ratio to 2 decimals)."""
    top, right = float(np.linalg.norm(box[0] - box[1])), float(np.linalg.norm(box[1] - box[2]))
    bottom, left = float(np.linalg.norm(box[2] - box[3])), float(np.linalg.norm(box[3] - box[0]))
    width, height = max(top, bottom), max(right, left)
    return width < 1e-6 or round(height / width, 2) >= 1.5


def word_boxes(decoded: CtcText, det_box: np.ndarray, crop_w: int, crop_h: int, max_wh_ratio: float, *,
               ratio_w: float = 1.0, ratio_h: float = 1.0, single_chars: bool = False) -> list[CharBox]:
    """RapidOCR 3.10's word results of one line: (word or character, score, box), in original-image pixels.

    ``det_box``: the line's 4×2 box already mapped to the original image (float32, as RapidOCR's);
    ``crop_w``/``crop_h``: the crop as the recogniser got it (after any 90° turn); ``max_wh_ratio``: the
    width/height ratio its batch was padded to; ``ratio_w``/``ratio_h``: original pixels per prepared pixel;
    ``single_chars``: 3.10's ``return_single_char_box`` (off by default), one box per character on every line.
    """
    # line_txt_len, as RapidOCR orders the product; the crop as map_img_to_original resizes it
    line_len = decoded.steps * (crop_w * 1.0 / crop_h) / max_wh_ratio
    img_w, img_h = round(crop_w * ratio_w), round(crop_h * ratio_h)
    if not decoded.text or img_w == 0 or img_h == 0:  # RapidOCR skips an empty crop
        return []
    groups = word_info(decoded.text, decoded.positions)
    contents, cells = _cells(decoded.text, groups, img_w, img_h, line_len, single_chars)
    box = np.asarray(det_box, np.float32)
    mapped = to_detection_box(box, separate(cells), _vertical(box), np.float64)
    return [CharBox(text, [[float(x), float(y)] for x, y in quad], float(score))
            for text, score, quad in zip(contents, decoded.char_scores, mapped, strict=False)]
