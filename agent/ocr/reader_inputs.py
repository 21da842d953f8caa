"""What `vkocr.OCR` reads beyond decode_image's sources, as `vkocr ocr` reads them: open binary files (an open
file, ``io.BytesIO``) and PDFs (a path or bytes), each page rendered as an image (agent/ocr/pdf_pages.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import IO, cast

import numpy as np
from PIL import Image

from vkocr.agent.errors import ImageError
from vkocr.agent.ocr.images import ImageSource
from vkocr.agent.ocr.pdf_pages import PdfSource, is_pdf, names_a_pdf, open_pdf, render_page

ReaderSource = ImageSource | IO[bytes]


def without_file_object(source: ReaderSource) -> ImageSource:
    """The bytes of a file object (read from where it stands), else `source` itself."""
    read = getattr(source, "read", None)
    if isinstance(source, np.ndarray | Image.Image) or not callable(read):
        return cast(ImageSource, source)  # decode_image names what it cannot take
    data = read()
    if isinstance(data, str):
        raise ImageError("unsupported", "a file opened in text mode: open it in binary mode ('rb')")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ImageError("unsupported", f"{type(source).__name__}.read() gave a {type(data).__name__}, not bytes")
    return bytes(data)


def pdf_in(source: ImageSource) -> tuple[str, PdfSource] | None:
    """(name for messages, what pypdfium2 opens) when `source` is a PDF: bytes that start as one, or a path
    whose name ends in .pdf or whose file starts as a PDF."""
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        return ("PDF data", data) if is_pdf(data) else None
    if isinstance(source, str | os.PathLike) and names_a_pdf(source):
        return os.fspath(source), source
    return None


def pdf_pages(name: str, source: PdfSource, *, dpi: float, max_pixels: int) -> Iterator[Image.Image]:
    """Every page of the PDF, rendered at `dpi`, one at a time; ImageError "empty" for a PDF without pages."""
    document = open_pdf(name, source)
    try:
        if len(document) == 0:
            raise ImageError("empty", f"{name}: a PDF without pages")
        for index in range(len(document)):
            yield render_page(document, index, name=name, dpi=dpi, max_pixels=max_pixels)
    finally:
        document.close()


def one_image(source: ReaderSource, *, dpi: float, max_pixels: int) -> ImageSource:
    """What `OCR.read` decodes: a file object's bytes, a one-page PDF's page, any other source as it is. A PDF
    of several pages raises ImageError "unsupported" pointing at `OCR.read_pdf`."""
    image = without_file_object(source)
    pdf = pdf_in(image)
    if pdf is None:
        return image
    name, pdf_source = pdf
    document = open_pdf(name, pdf_source)
    try:
        if len(document) == 0:
            raise ImageError("empty", f"{name}: a PDF without pages")
        if len(document) > 1:
            raise ImageError("unsupported", f"{name} has {len(document)} pages: OCR.read_pdf() reads each")
        return render_page(document, 0, name=name, dpi=dpi, max_pixels=max_pixels)
    finally:
        document.close()
