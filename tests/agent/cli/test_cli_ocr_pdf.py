"""`vkocr ocr FILE.pdf`: a PDF made here (Pillow saves two rendered pages of text), each page rendered and read
as an image on the CPU backend, named file.pdf#page=N in the output, drawn with --vis like an image."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PIL import Image

from tests.text_pages import FONT, text_page, write_pdf
from vkocr.agent.cli.main import main

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

CHEAP_DET = ["--det-limit-type", "max", "--det-limit-side-len", "960"]  # detection at the page's own size


def test_each_page_is_read_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pdf = write_pdf(tmp_path / "labels.pdf", [text_page("LOT4821", "EXP2027"), text_page("LOT0042")])
    vis = tmp_path / "drawn.png"
    code = main(["ocr", str(pdf), "--json", "--device", "cpu", "--pdf-dpi", "72", "--vis", str(vis), *CHEAP_DET])
    out, err = capsys.readouterr()
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["image"], [line["text"] for line in r["lines"]]) for r in records] == [
        (f"{pdf}#page=1", ["LOT4821", "EXP2027"]), (f"{pdf}#page=2", ["LOT0042"])]
    # boxes are in the rendered page's pixels: at 72 dpi, the page image's own
    first_box = records[0]["lines"][0]["box"]
    assert 10 <= first_box[0][0] <= 40 and 20 <= first_box[0][1] <= 50
    for n, page in ((1, text_page("LOT4821", "EXP2027")), (2, text_page("LOT0042"))):
        drawn = Image.open(tmp_path / f"drawn-{n}.png")
        assert drawn.height == page.height  # the page beside its text, as --vis draws an image


def test_a_broken_pdf_fails_in_its_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\nnot really")
    good = write_pdf(tmp_path / "good.pdf", [text_page("LOT0042")])
    code = main(["ocr", str(broken), str(good), "--device", "cpu", "--pdf-dpi", "72", *CHEAP_DET])
    out, err = capsys.readouterr()
    assert code == 1
    assert f"{broken}: error: {broken}: not a PDF that can be read" in err
    assert f"{good}#page=1: 1 line (" in out and "LOT0042" in out
