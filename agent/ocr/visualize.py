"""`vkocr ocr --vis`: side by side, the image with every line's box filled translucently and outlined, and a
white page with the same boxes and each line's recognised text fitted inside its box (text_fit); with
`scores`, each box on the image carries a tag with its recognition score."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from vkocr.agent.ocr.fonts import CJK_FONT_PACKAGE, find_font, has_cjk, load_font
from vkocr.agent.ocr.text_fit import text_ink
from vkocr.log import get_logger
from vkocr.postproc.result import OcrLine, OcrResult

log = get_logger(__name__)

PALETTE = ((230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 160, 160),
           (240, 50, 230), (128, 128, 0), (170, 110, 40), (0, 0, 128))
IMAGE_FILL = 0.35  # alpha of a box's fill over the image: the text under it still shows
PAGE_FILL = 0.12  # alpha of a box's fill on the white page: the box is visible, the black text stays legible
INK = np.array([20, 20, 20], np.float32)


def draw_result(image: np.ndarray, result: OcrResult, font_path: str | None = None, *,
                scores: bool = False) -> Image.Image:
    """The drawing of `result` on `image` (H×W×3 RGB, or H×W grey): image left, text right, 2W × H."""
    if font_path is None:
        font_path = find_font()
        warn_about_font(font_path, result)
    picture = Image.fromarray(image).convert("RGB")
    w, h = picture.size
    outline = max(1, round(max(w, h) / 600))  # about 1 px on a phone photo's crop, 3 px on a 2000 px page
    left = boxes_over(picture, result.lines, IMAGE_FILL, outline + 1)
    right = boxes_over(Image.new("RGB", (w, h), "white"), result.lines, PAGE_FILL, outline)
    right = Image.fromarray(texts_on(np.asarray(right), result.lines, font_path))
    if scores:
        score_tags(left, result.lines, font_path)
    canvas = Image.new("RGB", (2 * w, h), "white")
    canvas.paste(left, (0, 0))
    canvas.paste(right, (w, 0))
    return canvas


def colour(index: int) -> tuple[int, int, int]:
    return PALETTE[index % len(PALETTE)]


def boxes_over(picture: Image.Image, lines: list[OcrLine], fill_alpha: float, outline: int) -> Image.Image:
    """`picture` with each line's quad filled in its colour at `fill_alpha`, then outlined opaquely."""
    overlay = Image.new("RGBA", picture.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    for i, line in enumerate(lines):
        draw.polygon([tuple(p) for p in line.box], fill=(*colour(i), round(255 * fill_alpha)))
    out = Image.alpha_composite(picture.convert("RGBA"), overlay).convert("RGB")
    draw_out = ImageDraw.Draw(out)
    for i, line in enumerate(lines):
        draw_out.polygon([tuple(p) for p in line.box], outline=colour(i), width=outline)
    return out


def texts_on(page: np.ndarray, lines: list[OcrLine], font_path: str | None) -> np.ndarray:
    """`page` (H×W×3 uint8) with each line's text, fitted inside its box, blended in dark ink."""
    out = page.astype(np.float32)
    h, w = page.shape[:2]
    for line in lines:
        ink = text_ink(np.asarray(line.box), line.text, font_path, (w, h))
        if ink is None:
            continue
        ph, pw = ink.alpha.shape
        a = (ink.alpha.astype(np.float32) / 255)[..., None]
        patch = out[ink.y:ink.y + ph, ink.x:ink.x + pw]
        patch[:] = patch * (1 - a) + INK * a
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def score_tags(picture: Image.Image, lines: list[OcrLine], font_path: str | None) -> None:
    """A tag in each box's colour with its score, just above the box's top-left corner (inside the box when
    that would leave the image)."""
    w, h = picture.size
    font = load_font(font_path, int(np.clip(round(max(w, h) / 45), 10, 28)))
    draw = ImageDraw.Draw(picture)
    for i, line in enumerate(lines):
        label = f"{line.score:.3f}"
        left, top, right, bottom = font.getbbox(label)
        tw, th = int(right - left) + 4, int(bottom - top) + 4
        x = int(min(max(0, line.box[0][0]), max(0, w - tw)))
        y = int(line.box[0][1]) - th
        if y < 0:
            y = max(0, int(line.box[0][1]))
        r, g, b = colour(i)
        text_fill = (0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b > 150 else (255, 255, 255)
        draw.rectangle((x, y, x + tw - 1, y + th - 1), fill=colour(i))
        draw.text((x + 2 - left, y + 2 - top), label, fill=text_fill, font=font)


def warn_about_font(font_path: str | None, result: OcrResult) -> None:
    """Say once per drawing when the text needs CJK glyphs that the font in use lacks."""
    if has_cjk(font_path) or not any(ord(c) >= 0x2E80 for line in result.lines for c in line.text):
        return
    log.warning("vis_font_lacks_cjk", font=font_path or "Pillow's built-in font",
                hint=f"apt-get install {CJK_FONT_PACKAGE} (Chinese is drawn as empty boxes until then)")
