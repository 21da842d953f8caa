"""`vkocr ocr --vis`: the image with its boxes, and beside it the recognised text at the same places."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vkocr.log import get_logger
from vkocr.postproc.result import OcrResult

log = get_logger(__name__)

# A CJK-capable font from Debian's fonts-wqy-microhei (installed by the set-up), then DejaVu for Latin only.
FONT_CANDIDATES = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
)


def find_font() -> str | None:
    return next((p for p in FONT_CANDIDATES if Path(p).exists()), None)


def _font(path: str | None, size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.truetype(path, size) if path else ImageFont.load_default()


def draw_result(image: np.ndarray, result: OcrResult, font_path: str | None = None) -> Image.Image:
    """Left: the image with every line's quadrilateral; right: each line's text inside the same quadrilateral."""
    font_path = font_path or find_font()
    if font_path is None:
        log.warning("vis_no_cjk_font", hint="apt-get install fonts-wqy-microhei")
    h, w = image.shape[:2]
    left = Image.fromarray(image).convert("RGB")
    right = Image.new("RGB", (w, h), "white")
    draw_left, draw_right = ImageDraw.Draw(left), ImageDraw.Draw(right)
    palette = [(230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 140, 140)]
    for i, line in enumerate(result.lines):
        colour = palette[i % len(palette)]
        quad = [tuple(p) for p in line.box]
        draw_left.polygon(quad, outline=colour, width=2)
        draw_right.polygon(quad, outline=colour, width=1)
        ys = [p[1] for p in line.box]
        size = max(8, int((max(ys) - min(ys)) * 0.8))
        draw_right.text((line.box[0][0] + 2, line.box[0][1]), line.text, fill=(0, 0, 0), font=_font(font_path, size))
    canvas = Image.new("RGB", (2 * w, h), "white")
    canvas.paste(left, (0, 0))
    canvas.paste(right, (w, 0))
    return canvas
