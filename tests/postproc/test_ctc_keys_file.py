"""A recogniser's dictionary from a keys file (`vkocr ocr --rec-keys`): read as RapidOCR 1.4.4 reads its
rec_keys_path, refused with the file named when it cannot be read, and refused when it does not fit the model's
output width."""

from __future__ import annotations

from pathlib import Path

import pytest
from rapidocr_onnxruntime.ch_ppocr_rec.utils import CTCLabelDecode

from vkocr.postproc.ctc import BLANK, check_classes, load_keys_file
from vkocr.postproc.errors import CharsetError


@pytest.mark.parametrize("content", [
    "a\nb\nc\n",  # the usual file: one character per line, a newline after the last
    "a\r\nb\r\nc",  # Windows line ends, none after the last
    "一\n二\n \n三\n",  # CJK, and a line holding a space: kept as a character
    "x\n\ny\n",  # an empty line is an (empty) class, as RapidOCR counts it
])
def test_keys_are_read_as_rapidocr_reads_them(tmp_path: Path, content: str) -> None:
    path = tmp_path / "keys.txt"
    path.write_bytes(content.encode())
    ours = load_keys_file(path)
    assert ours == CTCLabelDecode(character_path=str(path)).character
    assert ours[0] == BLANK and ours[-1] == " "


def test_an_unreadable_keys_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(CharsetError, match=r"cannot read the keys file .*missing\.txt: No such file"):
        load_keys_file(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(CharsetError, match=r"empty\.txt is empty: it needs one character per line"):
        load_keys_file(empty)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("a\nb\né\n".encode("latin-1"))
    with pytest.raises(CharsetError, match=r"latin1\.txt: line 3 is not UTF-8"):
        load_keys_file(latin1)


def test_a_dictionary_must_fit_the_models_output_width(tmp_path: Path) -> None:
    path = tmp_path / "keys.txt"
    path.write_text("a\nb\nc\n")
    charset = load_keys_file(path)
    check_classes(charset, 5, "the keys file")  # blank, a, b, c, space
    with pytest.raises(CharsetError) as refused:
        check_classes(charset, 6625, f"the keys file {path}")
    assert str(refused.value) == (f"the keys file {path} has 3 characters, so 5 classes with the blank and the "
                                  "space, but the recognition model outputs 6625 classes: it needs a dictionary "
                                  "of 6623 characters, one per line (the one it was trained with)")
