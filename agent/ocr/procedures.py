"""The procedures the pipeline follows between the networks: RapidOCR 1.4.4's (the `ppocrv4` set's) and RapidOCR
3.10.0's (the `ppocrv6-small` set's), each as the named variants where their code differs.

Their parameters (resize, DB thresholds, unclip ratio, min box size, crop, cls and rec shapes, batch sizes,
text_score) are the same numbers in both configs; what differs is code, read from each release's source:

- box order: 1.4.4 sorts by the first corner's (y, x) and then runs one insertion pass that swaps neighbours
  less than 10 px apart vertically; 3.10 sorts by y (stable), cuts lines where two successive y differ by
  ≥ 10 px (so a run of boxes each < 10 px below the last is one line however tall), and sorts each line by x.
- blank lines: 3.10 drops lines whose text is empty or only spaces (det and rec both on); 1.4.4 keeps them
  (and then text_score drops most: an empty line scores 0).
- scores: 3.10 rounds each kept step's probability to 5 decimals (Python's round) and the line's mean to 5
  (NumPy's); 1.4.4 keeps them as computed.
- RGBA images: 1.4.4 masks colour by alpha and inverts by the mean; 3.10 alpha-blends over white or black
  (whichever contrasts with the mean luminance of the opaque pixels).
- word boxes (return_word_box): 1.4.4 gives one box per character (postproc/wordboxes.py); 3.10 one per word
  on lines without Chinese, one per character on the others, laid out in original pixels
  (postproc/wordboxes_310.py).

The same in both (so no variant): the image preprocessing and letterbox, DB itself and its box filter, the
perspective crop and its 90° turn, cls (48×192, batches of 6 sorted by aspect, label 180 above 0.9), rec
(48×320 minimum, batch width from the widest ratio, batches of 6), CTC, text_score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Procedure:
    """One reference's steps, as the variants the pipeline switches on."""

    name: str  # OcrOptions.procedure
    reference: str  # the pip requirement whose answers the pipeline matches
    box_order: str  # "insertion" (1.4.4) or "lines" (3.10): postproc/order.py
    drop_blank_text: bool  # drop lines whose text is only whitespace
    score_decimals: int | None  # CTC scores rounded to this many decimals; None: not rounded
    rgba: str  # "mask" (1.4.4) or "blend" (3.10): agent/ocr/images.py
    word_boxes: str  # "chars" (1.4.4: postproc/wordboxes.py) or "words" (3.10: postproc/wordboxes_310.py)


RAPIDOCR_1_4_4: Final = Procedure("rapidocr-1.4.4", "rapidocr-onnxruntime==1.4.4", box_order="insertion",
                                  drop_blank_text=False, score_decimals=None, rgba="mask", word_boxes="chars")
RAPIDOCR_3_10: Final = Procedure("rapidocr-3.10", "rapidocr==3.10.0", box_order="lines", drop_blank_text=True,
                                 score_decimals=5, rgba="blend", word_boxes="words")
PROCEDURES: Final = {p.name: p for p in (RAPIDOCR_1_4_4, RAPIDOCR_3_10)}
