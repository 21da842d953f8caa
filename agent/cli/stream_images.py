"""A varied set of rendered images for `vkocr bench stream`: many sizes and aspect ratios (so every image brings
the pipeline a new det shape), lines of many lengths (so rec batches come in many widths), font sizes 18–60 px,
some lines turned by small angles and a few upside down, on light noisy backgrounds. Deterministic per seed;
image i depends only on (seed, i), so a shorter set is a prefix of a longer one."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vkocr.agent.ocr import fonts

# (width, height): camera frames, screens, portrait phone shots, an A4 page at 150 dpi, wide labels and tall
# strips; all ≤ 2000 px on the long side (RapidOCR caps the long side at 2000, so larger only costs a resize).
SIZES: tuple[tuple[int, int], ...] = (
    (640, 480), (1920, 1080), (1080, 1920), (800, 600), (1240, 1754), (2000, 600), (1024, 768), (600, 2000),
    (1280, 720), (960, 960), (1600, 400), (720, 1280), (1000, 1414), (480, 320), (1366, 768), (1500, 1000),
)

CHINESE = ("生产日期", "批号", "有效期至", "保质期十二个月", "产品名称：工业清洗剂", "执行标准", "上海市浦东新区张江路",
           "请在阴凉干燥处保存", "本产品符合国家标准", "使用前请仔细阅读说明书", "净含量", "合格证", "检验员",
           "注意防潮防晒", "生产厂家：江苏省苏州市工业园区", "客户服务热线", "出厂编号", "额定电压", "危险请勿靠近",
           "仓库三号货架", "质量检验合格", "今天的天气很好我们去公园散步")
LATIN = ("the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "serial", "number", "batch", "store",
         "below", "made", "in", "China", "net", "weight", "rated", "voltage", "warning", "keep", "dry", "handle",
         "with", "care", "this", "side", "up", "inspection", "passed", "model", "order", "shipping", "label")


def find_font() -> tuple[str | None, bool]:
    """The first installed font of FONT_CANDIDATES, and whether it has Chinese glyphs (WenQuanYi does,
    DejaVu does not: with DejaVu only, the set is Latin only rather than boxes of missing glyphs)."""
    path = fonts.find_font()
    return path, fonts.has_cjk(path)


def image_size(index: int, rng: np.random.Generator) -> tuple[int, int]:
    """SIZES in order; past the end, each size again with its sides changed by up to ±15 %, so later images
    still bring new aspects."""
    w, h = SIZES[index % len(SIZES)]
    if index < len(SIZES):
        return w, h
    w, h = (int(side * rng.uniform(0.85, 1.15)) for side in (w, h))
    scale = min(1.0, 2000 / max(w, h))
    return max(32, int(w * scale)), max(32, int(h * scale))


def line_text(rng: np.random.Generator, cjk: bool) -> str:
    """A short code, a date or number, a Chinese phrase or sentence, or a Latin sentence: lengths 3–60."""
    kind = int(rng.integers(0, 5)) if cjk else int(rng.choice([0, 1, 3]))
    if kind == 0:
        letters = "".join(rng.choice(list("ABCDEFGHJKLMNPRSTUVWXYZ"), size=int(rng.integers(1, 4))))
        return str(rng.choice([f"LOT {rng.integers(1, 100)}", f"{letters}-{rng.integers(1, 10000)}",
                               f"No. {rng.integers(100, 100000)}", f"{letters}{rng.integers(10, 1000)}"]))
    if kind == 1:
        return f"{rng.integers(2020, 2031)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}"
    if kind == 2:
        return "，".join(rng.choice(CHINESE, size=int(rng.integers(1, 4)), replace=False))
    if kind == 3:
        sentence = " ".join(rng.choice(LATIN, size=int(rng.integers(2, 11))))
        return sentence[0].upper() + sentence[1:]
    return f"{rng.choice(CHINESE)} {rng.integers(1, 1000)} {rng.choice(LATIN)}"  # mixed


def line_angle(rng: np.random.Generator) -> float:
    """0 for most lines; ±5°…±30° for some; 180° for a few (the direction classifier's case)."""
    roll = rng.random()
    if roll < 0.6:
        return 0.0
    if roll < 0.9:
        return float(rng.uniform(5, 30) * rng.choice([-1, 1]))
    return 180.0


def text_mask(text: str, font: ImageFont.FreeTypeFont | ImageFont.ImageFont, angle: float) -> Image.Image:
    """The text as an 8-bit coverage mask, turned by `angle` degrees (counter-clockwise), tightly framed."""
    left, top, right, bottom = (int(v) for v in font.getbbox(text))
    pad = 4
    mask = Image.new("L", (right - left + 2 * pad, bottom - top + 2 * pad), 0)
    ImageDraw.Draw(mask).text((pad - left, pad - top), text, fill=255, font=font)
    if angle:
        mask = mask.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True)
    return mask


def shortened(text: str) -> str:
    """The text less its last word (Latin) or character (Chinese, codes)."""
    head, _, _ = text.rstrip().rpartition(" ")
    return head if head and len(head) >= 2 else text[:-1]


def render(index: int, seed: int, font_path: str | None, cjk: bool) -> tuple[str, np.ndarray]:
    rng = np.random.default_rng((seed, index))
    w, h = image_size(index, rng)
    background = rng.integers(205, 256, size=3)
    image = Image.new("RGB", (w, h), tuple(int(c) for c in background))
    margin = int(rng.integers(16, 48))
    wanted = int(rng.integers(3, max(4, min(30, w * h // 60000) + 1)))  # several lines; more on big pages
    y, placed, tries = margin, 0, 0
    while placed < wanted and tries < 4 * wanted and y < h - margin:
        tries += 1
        size = int(rng.integers(18, 61))
        font = ImageFont.truetype(font_path, size) if font_path else ImageFont.load_default(size)
        text, angle = line_text(rng, cjk), line_angle(rng)
        mask = text_mask(text, font, angle)
        while mask.width > w - 2 * margin and len(text) > 2:  # shorten until it fits across the image
            text = shortened(text)
            mask = text_mask(text, font, angle)
        if mask.width > w - 2 * margin or y + mask.height > h - margin:
            continue
        x = margin + int(rng.integers(0, w - 2 * margin - mask.width + 1))
        colour = tuple(int(c) for c in rng.integers(0, 70, size=3))
        image.paste(colour, (x, y, x + mask.width, y + mask.height), mask)
        placed += 1
        y += mask.height + int(rng.integers(size // 3, size + 1))  # rows never overlap, however turned
    pixels = np.asarray(image, np.float32)
    # a gentle light gradient and sensor-like noise, over text and background alike
    ramp = np.linspace(-1.0, 1.0, h, dtype=np.float32)[:, None, None] * float(rng.uniform(0, 12))
    noise = rng.normal(0.0, float(rng.uniform(2, 10)), size=pixels.shape).astype(np.float32)
    rgb = np.clip(pixels + ramp + noise, 0, 255).astype(np.uint8)
    return f"varied-{index:02d}-{w}x{h}", rgb


def varied_images(count: int, seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """`count` distinct rendered RGB images (H×W×3 uint8), named "varied-II-WxH"."""
    if count < 0:
        raise ValueError(f"count must be ≥ 0, got {count}")
    font_path, cjk = find_font()
    return [render(i, seed, font_path, cjk) for i in range(count)]
