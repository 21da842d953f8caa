"""Pages of text rendered here, as images and as PDFs, for the `vkocr ocr` tests: words the recogniser reads
reliably, black on white, one per line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PIL import Image

from tests.agent.agents import FONT, word_pixels

__all__ = ["FONT", "text_page", "write_pdf"]

LINE_PX = 70  # between the tops of two lines: enough white between them for DB to keep them apart


def text_page(*words: str, width: int = 400, size: int = 30) -> Image.Image:
    """`words` one below the other on a white page `width` pixels wide."""
    page = Image.new("RGB", (width, 40 + LINE_PX * len(words)), "white")
    for i, word in enumerate(words):
        page.paste(Image.fromarray(word_pixels(word, size)), (20, 30 + LINE_PX * i))
    return page


def write_pdf(path: Path, pages: Sequence[Image.Image]) -> Path:
    """A PDF with one page per image, each page as many points as the image has pixels (72 dpi): rendered at
    --pdf-dpi 72 it gives the image back."""
    pages[0].save(path, format="PDF", save_all=True, append_images=list(pages[1:]), resolution=72.0)
    return path
