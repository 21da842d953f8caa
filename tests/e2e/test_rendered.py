"""The pipeline against RapidOCR 1.4.4 on text this test renders itself, scored by character error rate.

Each run draws a fresh random set (the seed is printed; VKOCR_RENDER_SEED=<n> replays one): 8 images of 4
lines each, phrases from PHRASES, DejaVu Sans for Latin lines and WenQuanYi Micro Hei for Chinese and mixed
ones, 20–40 px, dark text on a light (sometimes coloured) panel inside white margins. Variants: clean, turned
180°, Gaussian-blurred (radius 1), JPEG-compressed (quality 30–60, decoded again).

Ground truth: the rendered lines top to bottom, joined with "\\n"; for a turned image, top to bottom as the
turned image shows them (the last line rendered comes first), which is the order both systems read them in.
Each system's lines are joined with "\\n" in its output order. CER = total Levenshtein distance / total
ground-truth characters over the whole set, after NFKC normalisation of both sides (so "：" and ":" count as
the same character). Our CER must be within 0.5 percentage points of RapidOCR's, and both under 10% (a
broken renderer fails the test too).
"""

from __future__ import annotations

import io
import os
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from vkocr.agent.ocr.pipeline import OcrPipeline

LATIN_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
pytestmark = pytest.mark.skipif(
    not (LATIN_FONT.is_file() and CJK_FONT.is_file()),
    reason=f"{LATIN_FONT} or {CJK_FONT} is absent (Debian packages fonts-dejavu-core and fonts-wqy-microhei)")

PHRASES = [
    # Latin: product labels, addresses, dates, lot and serial numbers
    "Net Wt. 500 g (17.6 oz)",
    "Best Before: 2025-08-14",
    "LOT No. A23-0917B",
    "Batch 4471-KX / Exp 03/2026",
    "221B Baker Street, London NW1 6XE",
    "Store in a cool, dry place",
    "Ingredients: wheat flour, sugar, salt",
    "Made in China",
    "Invoice #INV-2024-00382",
    "Tel: +86 21 6234 5678",
    "SKU 8801234567890",
    "Total: $128.50",
    "Serial No. SN7F3Q92LM",
    "Keep out of reach of children",
    "Order date 12/03/2024 14:35",
    "1600 Amphitheatre Pkwy, Mountain View",
    "Contains 12 capsules",
    "Shipping weight 2.4 kg",
    "Model: XR-550 Rev. C",
    "Room 1205, Tower B",
    # Chinese, and Chinese mixed with digits and Latin
    "生产日期：2024年3月15日",
    "保质期：12个月",
    "净含量：500克",
    "产品批号：20240315A",
    "上海市浦东新区张江路88号",
    "北京市海淀区中关村大街27号",
    "广州市天河区体育西路103号",
    "有效期至2026年06月30日",
    "配料：小麦粉、白砂糖、食用盐",
    "贮存条件：阴凉干燥处",
    "联系电话：400-820-1234",
    "生产许可证号SC10644011500123",
    "执行标准：GB/T 20977",
    "型号：XR-550 额定电压220V",
    "订单编号：DD20240817093",
    "合计金额：128.50元",
    "深圳市南山区科技园南区",
    "请勿放置于儿童可触及处",
    "原产地：中国浙江省杭州市",
    "快递单号 SF1234567890123",
]
VARIANTS = ("clean", "clean", "rot180", "rot180", "blur", "blur", "jpeg", "jpeg")
LINES_PER_IMAGE = 4
WIDTH, HEIGHT, MARGIN, PAD = 640, 480, 32, 12
BACKGROUNDS = [(255, 255, 255), (250, 246, 228), (232, 242, 252), (238, 238, 238), (255, 236, 236),
               (236, 250, 236)]
INKS = [(0, 0, 0), (20, 30, 90), (110, 10, 10), (10, 70, 30), (60, 60, 60)]
OURS_SLACK = 0.005  # our CER may exceed RapidOCR's by this much
MAX_CER = 0.10


@dataclass
class Rendered:
    variant: str
    image: np.ndarray  # H×W×3 uint8 RGB
    truth: list[str]  # lines in the order they appear top to bottom in the image


def is_latin(text: str) -> bool:
    return all(ord(c) < 128 for c in text)


def font_for(text: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(LATIN_FONT if is_latin(text) else CJK_FONT), size)


def render(rng: np.random.Generator, variant: str) -> Rendered:
    image = Image.new("RGB", (WIDTH, HEIGHT), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.rectangle((MARGIN, MARGIN, WIDTH - MARGIN - 1, HEIGHT - MARGIN - 1),
                   fill=BACKGROUNDS[rng.integers(len(BACKGROUNDS))])
    ink = INKS[rng.integers(len(INKS))]
    phrases = [PHRASES[i] for i in rng.choice(len(PHRASES), LINES_PER_IMAGE, replace=False)]
    inner_w = WIDTH - 2 * (MARGIN + PAD)
    slot_h = (HEIGHT - 2 * (MARGIN + PAD)) // LINES_PER_IMAGE
    for row, text in enumerate(phrases):
        size = int(rng.integers(20, 41))
        font = font_for(text, size)
        while size > 20 and font.getlength(text) > inner_w:
            size -= 1
            font = font_for(text, size)
        left, top, right, bottom = font.getbbox(text)
        text_w, text_h = right - left, bottom - top
        assert text_w <= inner_w, f"{text!r} does not fit {inner_w} px at {size} px"
        x = MARGIN + PAD + int(rng.integers(0, inner_w - text_w + 1)) - left
        spare = slot_h - text_h  # the line sits in the middle half of its slot: rows stay well apart
        y = MARGIN + PAD + row * slot_h + int(rng.integers(spare // 4, 3 * spare // 4 + 1)) - top
        draw.text((x, y), text, font=font, fill=ink)
    if variant == "rot180":
        image = image.transpose(Image.Transpose.ROTATE_180)
        phrases.reverse()
    elif variant == "blur":
        image = image.filter(ImageFilter.GaussianBlur(radius=1))
    elif variant == "jpeg":
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=int(rng.integers(30, 61)))
        image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    return Rendered(variant, np.asarray(image, np.uint8).copy(), phrases)


def levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def normalise(text: str, spaces: bool = True) -> str:
    text = unicodedata.normalize("NFKC", text)
    return text if spaces else text.replace(" ", "")


def cer(outputs: list[str], truths: list[str], spaces: bool = True) -> float:
    """The character error rate; spaces=False leaves spaces out of both sides (PP-OCR drops many)."""
    errors = sum(levenshtein(normalise(o, spaces), normalise(t, spaces)) for o, t in zip(outputs, truths))
    return errors / sum(len(normalise(t, spaces)) for t in truths)


def test_levenshtein() -> None:
    assert levenshtein("", "") == 0
    assert levenshtein("abc", "") == 3
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("生产日期", "生产日明") == 1
    assert levenshtein("ab", "ba") == 2


@pytest.fixture(scope="module")
def ocr() -> Iterator[OcrPipeline]:
    with OcrPipeline.open("llvmpipe") as pipeline:
        yield pipeline


@pytest.fixture(scope="module")
def rapidocr() -> Any:  # RapidOCR 1.4.4, a test-only dependency
    rapidocr_onnxruntime = pytest.importorskip("rapidocr_onnxruntime")
    return rapidocr_onnxruntime.RapidOCR()


def test_cer_matches_rapidocr(ocr: OcrPipeline, rapidocr: Any) -> None:
    seed = int(os.environ.get("VKOCR_RENDER_SEED") or np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    images = [render(rng, variant) for variant in VARIANTS]
    truths, ours, theirs, report = [], [], [], []
    for n, item in enumerate(images):
        our_lines = [line.text for line in ocr(item.image).lines]
        res, _ = rapidocr(np.ascontiguousarray(item.image[..., ::-1]))
        their_lines = [text for _box, text, _score in res or []]
        truths.append("\n".join(item.truth))
        ours.append("\n".join(our_lines))
        theirs.append("\n".join(their_lines))
        if our_lines != their_lines:
            report.append(f"image {n} ({item.variant}):\n  truth: {item.truth}\n  ours:  {our_lines}\n"
                          f"  rapid: {their_lines}")
    our_cer, their_cer = cer(ours, truths), cer(theirs, truths)
    summary = (f"seed {seed}: our CER {our_cer:.2%}, RapidOCR CER {their_cer:.2%} over {len(images)} images, "
               f"{sum(len(normalise(t)) for t in truths)} characters (not counting spaces: ours "
               f"{cer(ours, truths, spaces=False):.2%}, RapidOCR {cer(theirs, truths, spaces=False):.2%})")
    print("\n" + summary)
    print("\n".join(report) if report else "both systems read every image identically")
    detail = summary + ("\n" + "\n".join(report) if report else "")
    assert their_cer < MAX_CER, detail
    assert our_cer < MAX_CER, detail
    assert our_cer <= their_cer + OURS_SLACK, detail
