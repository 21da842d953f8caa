"""`vkocr ocr --det-model/--cls-model/--rec-model FILE` and `--rec-keys FILE`: the files named are the ones
read. A recogniser (or a dictionary) whose '0' and '1' trade places proves it: the word LOT0042 reads LOT1142.
A dictionary that does not fit the model's output, or a model file that is not there, is refused before any
image is read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest

from tests.agent.fleet.fleet_agents import WORD, WORD_SWAPPED, default_models, swapped_digits_rec
from tests.text_pages import FONT, text_page
from vkocr.agent.cli.main import main
from vkocr.agent.ocr.model_files import PPOCRV6_SMALL, missing_or_bad, models_dir

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

REC_ONLY = ["--no-det", "--no-cls", "--device", "cpu"]  # the whole image is one line: the cheapest real read
V4 = "--models", "ppocrv4"  # the set whose files fleet_agents.default_models() are


@pytest.fixture(scope="module")
def word(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("word") / "lot.png"
    text_page(WORD, width=200).crop((0, 20, 200, 90)).save(path)
    return path


def model_dictionary() -> list[str]:
    """ppocrv4's recogniser's dictionary, from its metadata: one character per line."""
    model = onnx.load(str(default_models()["rec"]), load_external_data=False)
    return next(p.value for p in model.metadata_props if p.key == "character").split("\n")


def read(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    code = main(["ocr", *argv, "--json", *REC_ONLY])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [line["text"] for line in json.loads(out)["lines"]]


def test_the_default_models_read_the_word(word: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert read(capsys, str(word)) == [WORD]


def test_rec_model_names_the_recogniser(word: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    swapped = swapped_digits_rec(tmp_path / "swapped")
    assert read(capsys, str(word), *V4, "--rec-model", str(swapped)) == [WORD_SWAPPED]
    models = default_models()  # det and cls named too: the same files as the defaults, so the same reading
    assert read(capsys, str(word), *V4, "--det-model", str(models["det"]), "--cls-model-path", str(models["cls"]),
                "--rec-model-path", str(swapped)) == [WORD_SWAPPED]


def test_rec_keys_replaces_the_models_dictionary(word: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    chars = model_dictionary()
    i, j = chars.index("0"), chars.index("1")
    chars[i], chars[j] = chars[j], chars[i]
    keys = tmp_path / "swapped_keys.txt"
    keys.write_text("\n".join(chars) + "\n", encoding="utf-8")
    assert read(capsys, str(word), *V4, "--rec-keys", str(keys)) == [WORD_SWAPPED]


def test_a_dictionary_that_does_not_fit_is_refused(word: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    chars = model_dictionary()
    keys = tmp_path / "short_keys.txt"
    keys.write_text("\n".join(chars[:-1]) + "\n", encoding="utf-8")  # one character missing
    code = main(["ocr", str(word), *V4, "--rec-keys", str(keys), *REC_ONLY])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    n = len(chars)
    assert (f"vkocr: error: the keys file {keys} has {n - 1} characters, so {n + 1} classes with the blank and "
            f"the space, but the recognition model outputs {n + 2} classes: it needs a dictionary of {n} "
            "characters") in err


def test_a_model_file_that_is_not_there_is_a_usage_error(word: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--det-model", "--cls-model", "--rec-model", "--rec-keys"):
        with pytest.raises(SystemExit) as stopped:
            main(["ocr", str(word), flag, str(tmp_path / "nothing.onnx")])
        assert stopped.value.code == 2
        assert f"argument {flag}/{flag}-path: {tmp_path / 'nothing.onnx'}: no such file" in capsys.readouterr().err


@pytest.mark.skipif(bool(missing_or_bad(models_dir(), PPOCRV6_SMALL.files)),
                    reason="ppocrv6-small is not installed: scripts/fetch_models.py")
def test_models_names_a_set_and_the_file_flags_replace_one_of_its_files(
        word: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert read(capsys, str(word), "--models", "ppocrv6-small") == [WORD]
    # v6's det and cls with the v4 recogniser whose digits trade places: the flag's file is the one read
    swapped = swapped_digits_rec(tmp_path / "swapped")
    assert read(capsys, str(word), "--models", "ppocrv6-small", "--rec-model", str(swapped)) == [WORD_SWAPPED]


def test_an_unknown_set_is_a_usage_error(word: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ocr", str(word), "--models", "ppocrv5", *REC_ONLY]) == 2
    assert "--models ppocrv5: neither a model set (ppocrv6-small, ppocrv4) nor a folder" in capsys.readouterr().err
