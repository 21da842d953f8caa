"""`vkocr.OCR` at its edges, as a new user meets them: a device given as an int index, a float array in 0..1,
PDFs (path, bytes, file object; one page through read, several through read_pdf), open files and BytesIO,
and use after close(). On lavapipe, chosen by its index (0: this machine's only Vulkan device) and by name."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import vkocr
from tests.agent.agents import word_pixels
from tests.text_pages import FONT, write_pdf

pytestmark = pytest.mark.skipif(not os.path.exists(FONT), reason="DejaVu Sans is not installed")

REC_ONLY = {"use_det": False, "use_cls": False}  # the whole image is one line: the cheapest real read
WORDS = ("LOT2041", "LOT0042")


def lavapipe_index() -> int:
    from vkocr.engine.devices import survey

    devices, _ = survey()
    (index,) = [d.index for d in devices if "llvmpipe" in d.name]
    return int(index)


@pytest.fixture(scope="module")
def ocr() -> Iterator[vkocr.OCR]:
    with vkocr.OCR(lavapipe_index(), models="ppocrv4", **REC_ONLY) as engine:  # an int, as RapidOCR users pass
        yield engine


def word(text: str = WORDS[0]) -> Image.Image:
    return Image.fromarray(word_pixels(text))


def png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def texts(result: vkocr.OcrResult) -> list[str]:
    return [line.text for line in result.lines]


def test_an_int_index_chooses_that_device(ocr: vkocr.OCR) -> None:
    assert "llvmpipe" in ocr.device_name
    assert texts(ocr(np.asarray(word()))) == [WORDS[0]]
    with pytest.raises(vkocr.OptionsError, match="device"):
        vkocr.OCR(True)  # type: ignore[arg-type]  # a bool is no index, though Python's bool is an int


def test_a_float_array_in_0_to_1_is_refused_saying_what_to_do(ocr: vkocr.OCR) -> None:
    unit = np.asarray(word(), dtype=np.float32) / 255.0  # scikit-image's convention: reads as black otherwise
    with pytest.raises(vkocr.ImageError, match="multiply by 255"):
        ocr(unit)
    assert texts(ocr(unit * 255.0)) == [WORDS[0]]  # what the message says to do reads the word


def test_file_objects_are_read_like_paths(ocr: vkocr.OCR, tmp_path: Path) -> None:
    path = tmp_path / "word.png"
    word().save(path)
    with open(path, "rb") as f:
        assert texts(ocr.read(f)) == [WORDS[0]]
    assert texts(ocr.read(io.BytesIO(png(word())))) == [WORDS[0]]
    with open(path, encoding="latin-1") as text_mode, pytest.raises(vkocr.ImageError, match="binary mode"):
        ocr.read(text_mode)  # type: ignore[arg-type]


def test_pdfs_are_read_like_the_cli_reads_them(ocr: vkocr.OCR, tmp_path: Path) -> None:
    one = write_pdf(tmp_path / "one.pdf", [word(WORDS[0])])
    two = write_pdf(tmp_path / "two.pdf", [word(w) for w in WORDS])
    assert texts(ocr.read(one)) == [WORDS[0]]  # a one-page PDF is an image (rendered at 200 dpi, as the CLI)
    assert texts(ocr.read(one.read_bytes())) == [WORDS[0]]
    with pytest.raises(vkocr.ImageError, match="2 pages: OCR.read_pdf"):
        ocr.read(str(two))
    for source in (two, io.BytesIO(two.read_bytes())):  # a path, a file object (bytes: as read's above)
        assert [texts(page) for page in ocr.read_pdf(source, dpi=72)] == [[w] for w in WORDS]
    with pytest.raises(vkocr.ImageError, match="not a PDF"):
        ocr.read_pdf(png(word()))


def test_use_after_close_is_a_vkocr_error() -> None:
    engine = vkocr.OCR("llvmpipe", models="ppocrv4", **REC_ONLY)
    engine.close()
    with pytest.raises(vkocr.EngineClosed, match="closed") as closed:
        engine.read(np.asarray(word()))
    assert isinstance(closed.value, vkocr.VkocrError) and isinstance(closed.value, ValueError)
    with pytest.raises(vkocr.EngineClosed):
        engine.read_pdf(b"%PDF-")
