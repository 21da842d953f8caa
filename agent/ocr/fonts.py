"""The fonts vkocr draws text in (`--vis`, rendered test and benchmark images): Debian's WenQuanYi Micro Hei
for Chinese and Latin alike (fonts-wqy-microhei, which scripts/setup.sh installs), else DejaVu for Latin only."""

from __future__ import annotations

import functools
from pathlib import Path

from PIL import ImageFont

CJK_FONTS = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
)
FONT_CANDIDATES = (*CJK_FONTS, "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
CJK_FONT_PACKAGE = "fonts-wqy-microhei"

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


def find_font() -> str | None:
    """The first installed font of FONT_CANDIDATES, or None."""
    return next((p for p in FONT_CANDIDATES if Path(p).exists()), None)


def has_cjk(font_path: str | None) -> bool:
    """Whether the font is one of the CJK-capable ones (DejaVu and Pillow's default draw Chinese as boxes)."""
    return font_path in CJK_FONTS


@functools.lru_cache(maxsize=512)
def load_font(font_path: str | None, size: int) -> Font:
    """The font at `size` pixels; with no font file, Pillow's built-in one (Latin only, still scalable)."""
    return ImageFont.truetype(font_path, size) if font_path else ImageFont.load_default(size)
