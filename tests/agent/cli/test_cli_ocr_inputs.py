"""What `vkocr ocr` reads besides image files: directories (their images and PDFs, sorted by name), `-` (an
image or a PDF on stdin), PDFs by name or by content; an argument that cannot become inputs fails in its place.
Real files, real PDFs (Pillow writes them, pypdfium2 renders them), and once the real command in a subprocess
with bytes on its stdin."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.paths import ROOT
from tests.text_pages import FONT, text_page, write_pdf
from vkocr.agent.cli.ocr_inputs import Inputs
from vkocr.agent.errors import ImageError

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

LIMIT = 40_000_000


def png_bytes(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def failure(inputs: Inputs, index: int = 0) -> ImageError:
    with pytest.raises(ImageError) as raised:
        inputs.items[index].read()
    return raised.value


def test_a_directory_gives_its_images_and_pdf_pages_sorted_by_name(tmp_path: Path) -> None:
    text_page("B").save(tmp_path / "b.png")
    text_page("A").save(tmp_path / "a.JPG")
    write_pdf(tmp_path / "c.pdf", [text_page("C1"), text_page("C2")])
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / "z.png.d").mkdir()  # a directory inside: not read (not recursive)
    with Inputs([str(tmp_path)], max_pixels=LIMIT) as inputs:
        assert [item.name for item in inputs.items] == [
            str(tmp_path / "a.JPG"), str(tmp_path / "b.png"), f"{tmp_path / 'c.pdf'}#page=1",
            f"{tmp_path / 'c.pdf'}#page=2"]
        assert inputs.items[0].read() == str(tmp_path / "a.JPG")  # a path: decode_image reads it


def test_a_pdf_page_renders_at_the_dpi_asked(tmp_path: Path) -> None:
    page = text_page("LOT4821")
    pdf = write_pdf(tmp_path / "one.pdf", [page])
    with Inputs([str(pdf)], dpi=72, max_pixels=LIMIT) as inputs:
        rendered = inputs.items[0].read()
    assert rendered.mode == "RGB" and rendered.size == page.size
    difference = np.abs(np.asarray(rendered, np.int16) - np.asarray(page, np.int16))
    assert difference.mean() < 2  # the same pixels, but for the PDF's JPEG compression
    with Inputs([str(pdf)], dpi=144, max_pixels=LIMIT) as inputs:
        assert inputs.items[0].read().size == (2 * page.width, 2 * page.height)


def test_a_pdf_is_known_by_its_content_whatever_its_name(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "scan.bin", [text_page("X"), text_page("Y"), text_page("Z")])
    with Inputs([str(pdf)], max_pixels=LIMIT) as inputs:
        assert [item.name for item in inputs.items] == [f"{pdf}#page={n}" for n in (1, 2, 3)]


def test_stdin_gives_one_image_or_the_pages_of_a_pdf(tmp_path: Path) -> None:
    data = png_bytes(text_page("A"))
    with Inputs(["-"], max_pixels=LIMIT, stdin=io.BytesIO(data)) as inputs:
        assert [item.name for item in inputs.items] == ["-"] and inputs.items[0].read() == data
    pdf = write_pdf(tmp_path / "in.pdf", [text_page("A"), text_page("B")]).read_bytes()
    with Inputs(["-"], max_pixels=LIMIT, stdin=io.BytesIO(pdf)) as inputs:
        assert [item.name for item in inputs.items] == ["-#page=1", "-#page=2"]
        assert inputs.items[1].read().size == (1112, 306)  # 400×110 points at the default 200 dpi


def test_what_cannot_become_inputs_fails_in_its_place(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 and then nothing a PDF has")
    text_page("A").save(tmp_path / "a.png")
    arguments = [str(empty), str(broken), str(tmp_path / "a.png"), str(tmp_path / "missing.pdf")]
    with Inputs(arguments, max_pixels=LIMIT) as inputs:
        assert [item.name for item in inputs.items] == arguments  # one each, in order
        assert failure(inputs, 0).reason == "not_found" and "a directory without images or PDFs" in str(
            failure(inputs, 0))
        assert failure(inputs, 1).reason == "corrupt" and "broken.pdf: not a PDF that can be read" in str(
            failure(inputs, 1))
        assert inputs.items[2].read() == str(tmp_path / "a.png")
        assert failure(inputs, 3).reason == "not_found"


def test_a_page_over_the_pixel_limit_is_refused_before_rendering(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "big.pdf", [text_page("A")])
    with Inputs([str(pdf)], dpi=600, max_pixels=1_000_000) as inputs:
        refused = failure(inputs)
    assert refused.reason == "too_large"
    assert str(refused) == (f"{pdf}#page=1: 3334x917 pixels at 600 dpi, more than the limit of 1000000; give a "
                            "lower --pdf-dpi")


def test_the_command_reads_stdin_and_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "shots"
    folder.mkdir()
    text_page("EXP2027").save(folder / "2.png")
    text_page("LOT4821").save(folder / "1.png")
    out = subprocess.run([sys.executable, "-m", "vkocr.agent.cli.main", "ocr", "-", str(folder), "--json",
                          "--device", "cpu", "--det-limit-type", "max", "--det-limit-side-len", "960"],
                         input=png_bytes(text_page("LOT0042")), capture_output=True, cwd=ROOT, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr.decode()
    records = [json.loads(line) for line in out.stdout.decode().splitlines()]
    assert [(r["image"], [line["text"] for line in r["lines"]]) for r in records] == [
        ("-", ["LOT0042"]), (str(folder / "1.png"), ["LOT4821"]), (str(folder / "2.png"), ["EXP2027"])]


def test_stdin_can_be_named_once(capsys: pytest.CaptureFixture[str]) -> None:
    from vkocr.agent.cli.main import main

    assert main(["ocr", "-", "-", "--device", "cpu"]) == 2  # refused before stdin is read or a model loads
    assert "vkocr: error: - (standard input) can be given once" in capsys.readouterr().err
