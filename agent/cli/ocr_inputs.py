"""What `vkocr ocr` reads: image files, directories (their images and PDFs, sorted by name), `-` (one image or
PDF on standard input), and PDFs, one input per page, each page rendered by pypdfium2 and read as an image.

Every argument becomes its inputs before any is read, so that the count (and the progress bar) is known; an
argument that cannot become inputs (an empty directory, a broken PDF) is one input whose reading fails, reported
in its place as a bad image is.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final, Self

from vkocr.agent.errors import ImageError, OptionsError
from vkocr.agent.ocr.pdf_pages import (
    DEFAULT_PDF_DPI,
    PDF_SUFFIX,
    is_pdf,
    names_a_pdf,
    open_pdf,
    page_name,
    render_page,
)

IMAGE_SUFFIXES: Final = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".gif", ".ppm", ".pgm",
                         ".pbm", ".pnm")
STDIN: Final = "-"
PDF_DPI_RANGE: Final = (36.0, 1200.0)

Readable = Any  # what OcrPipeline reads: a path, encoded bytes or a Pillow image


@dataclass(frozen=True)
class OcrInput:
    """One thing to read: ``name`` is what the output calls it (the path, ``-``, ``file.pdf#page=2``);
    ``read()`` gives what the pipeline takes, or raises ImageError."""

    name: str
    read: Callable[[], Readable]


def _failing(error: ImageError) -> Callable[[], Readable]:
    def read() -> Readable:
        raise error

    return read


class Inputs:
    """The inputs a command line names, in order (`vkocr ocr`, `vkocr client ocr|stream`). PDF pages are rendered
    when read, one document open at a time (a directory of many PDFs opens none of them twice at once); close()
    closes the last. OptionsError when `-` is named more than once."""

    def __init__(self, arguments: Sequence[str], *, dpi: float = DEFAULT_PDF_DPI, max_pixels: int,
                 stdin: BinaryIO | None = None) -> None:
        if list(arguments).count(STDIN) > 1:
            raise OptionsError("- (standard input) can be given once")
        self.dpi = dpi
        self.max_pixels = max_pixels
        self._stdin = stdin if stdin is not None else sys.stdin.buffer
        self._open: tuple[str, Any] | None = None  # (name, pypdfium2.PdfDocument) of the PDF being read
        self.items: list[OcrInput] = []
        for argument in arguments:
            self.items += self._expand(argument)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._open is not None:
            self._open[1].close()
            self._open = None

    # -- arguments → inputs -----------------------------------------------------------------------------------

    def _expand(self, argument: str) -> list[OcrInput]:
        if argument == STDIN:
            data = self._stdin.read()
            return self._pdf(STDIN, data) if is_pdf(data) else [OcrInput(STDIN, lambda: data)]
        path = Path(argument)
        if path.is_dir():
            return self._directory(path)
        if names_a_pdf(path):
            return self._pdf(argument, path)
        return [OcrInput(argument, lambda: argument)]  # decode_image says what is wrong with it, if anything

    def _directory(self, path: Path) -> list[OcrInput]:
        try:
            files = sorted(p for p in path.iterdir()
                           if p.is_file() and p.suffix.lower() in (*IMAGE_SUFFIXES, PDF_SUFFIX))
        except OSError as exc:
            return [OcrInput(str(path), _failing(ImageError("unreadable", f"{path}: cannot list the directory: "
                                                             f"{exc.strerror or exc}")))]
        if not files:
            return [OcrInput(str(path), _failing(ImageError(
                "not_found", f"{path}: a directory without images or PDFs "
                f"({', '.join(s.lstrip('.') for s in (*IMAGE_SUFFIXES, PDF_SUFFIX))})")))]
        out: list[OcrInput] = []
        for file in files:
            out += self._expand(str(file))
        return out

    def _pdf(self, name: str, source: Path | bytes) -> list[OcrInput]:
        try:
            pages = len(open_pdf(name, source))
        except ImageError as exc:
            return [OcrInput(name, _failing(exc))]
        if pages == 0:
            return [OcrInput(name, _failing(ImageError("empty", f"{name}: a PDF without pages")))]
        return [OcrInput(page_name(name, i + 1), self._page_reader(name, source, i)) for i in range(pages)]

    # -- reading a page ---------------------------------------------------------------------------------------

    def _page_reader(self, name: str, source: Path | bytes, index: int) -> Callable[[], Readable]:
        return lambda: self.render(name, source, index)

    def render(self, name: str, source: Path | bytes, index: int) -> Readable:
        """Page `index` (0-based) of the PDF as an RGB Pillow image at self.dpi, refused (ImageError
        "too_large") before rendering when it would have more pixels than self.max_pixels."""
        if self._open is None or self._open[0] != name:
            self.close()
            self._open = (name, open_pdf(name, source))
        return render_page(self._open[1], index, name=name, dpi=self.dpi, max_pixels=self.max_pixels,
                           dpi_option="--pdf-dpi")
