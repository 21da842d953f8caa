"""PDF pages as images: a document opened with pypdfium2 and one page rendered at a resolution, refused before
rendering when it would have more pixels than the limit. `vkocr ocr` (agent/cli/ocr_inputs.py) and `vkocr.OCR`
(agent/ocr/reader.py) read PDFs through it."""

from __future__ import annotations

import math
import os
from typing import Any, Final

from PIL import Image

from vkocr.agent.errors import ImageError

PDF_SUFFIX: Final = ".pdf"
PDF_MAGIC: Final = b"%PDF-"  # what every PDF starts with, whatever its name
DEFAULT_PDF_DPI: Final = 200.0  # an A4 page is 1654×2339 pixels: above max_side_len (2000), so nothing is lost
POINTS_PER_INCH: Final = 72.0  # PDF page sizes are in points

PdfSource = str | os.PathLike[str] | bytes


def page_name(source: str, page: int) -> str:
    """The name of page `page` (1-based) of a PDF, as a PDF viewer's URL fragment says it."""
    return f"{source}#page={page}"


def is_pdf(data: bytes) -> bool:
    return data.startswith(PDF_MAGIC)


def names_a_pdf(path: str | os.PathLike[str]) -> bool:
    """A path whose name ends in .pdf or whose file starts as every PDF does."""
    if os.fspath(path).lower().endswith(PDF_SUFFIX):
        return True
    try:
        with open(path, "rb") as f:
            return is_pdf(f.read(len(PDF_MAGIC)))
    except OSError:
        return False  # decoding names the problem when the file is read


def open_pdf(name: str, source: PdfSource) -> Any:
    """A pypdfium2.PdfDocument (the caller closes it), or ImageError "not_found" / "corrupt" naming `name`."""
    import pypdfium2

    try:
        return pypdfium2.PdfDocument(source if isinstance(source, bytes) else os.fspath(source))
    except FileNotFoundError:
        raise ImageError("not_found", f"{name}: no such file") from None
    except (pypdfium2.PdfiumError, OSError) as exc:
        raise ImageError("corrupt", f"{name}: not a PDF that can be read ({exc})") from None


def render_page(document: Any, index: int, *, name: str, dpi: float, max_pixels: int,
                dpi_option: str = "dpi") -> Image.Image:
    """Page `index` (0-based) of `document` as an RGB Pillow image at `dpi`, refused (ImageError "too_large",
    saying to lower `dpi_option`) before rendering when it would have more pixels than `max_pixels`."""
    page = document[index]
    try:
        scale = dpi / POINTS_PER_INCH
        width, height = (math.ceil(side * scale) for side in page.get_size())
        if width * height > max_pixels:
            raise ImageError("too_large", f"{page_name(name, index + 1)}: {width}x{height} pixels at {dpi:g} dpi, "
                             f"more than the limit of {max_pixels}; give a lower {dpi_option}")
        bitmap = page.render(scale=scale)
        try:
            return bitmap.to_pil().convert("RGB")
        finally:
            bitmap.close()
    finally:
        page.close()
