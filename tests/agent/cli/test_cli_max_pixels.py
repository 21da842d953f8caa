"""`vkocr ocr --max-pixels N` and VKOCR_OCR_MAX_PIXELS (the agent's [ocr] max_pixels): the limit on an input's
pixels, in the agent's range, the flag over the variable; an input over it fails in its place, saying how to
raise the limit; the agent takes the same variable over its [ocr] max_pixels. Recognition only on the CPU
backend: the cheapest real read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

from tests.agent.agents import FONT, word_pixels
from vkocr.agent.cli.main import main
from vkocr.agent.ocr.options import RANGES
from vkocr.agent.serving.config import load_config
from vkocr.agent.serving.errors import ConfigError

pytestmark = pytest.mark.skipif(not os.path.exists(FONT), reason="fonts-dejavu-core renders the test image")

READ = ["--device", "cpu", "--no-det", "--no-cls", "--models", "ppocrv4"]
WORD = "LOT2041"


@pytest.fixture
def word_file(tmp_path: Path) -> Path:
    path = tmp_path / "word.png"
    Image.fromarray(word_pixels(WORD)).save(path)  # 143×40: a few thousand pixels
    return path


def test_the_flag_and_the_variable_set_the_limit_and_the_flag_wins(
        word_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ocr", str(word_file), *READ, "--max-pixels", "1000"]) == 1
    err = capsys.readouterr().err
    assert "more than the limit of 1,000" in err and "--max-pixels (or VKOCR_OCR_MAX_PIXELS) raises" in err
    monkeypatch.setenv("VKOCR_OCR_MAX_PIXELS", "1000")
    assert main(["ocr", str(word_file), *READ]) == 1
    assert "more than the limit of 1,000" in capsys.readouterr().err
    assert main(["ocr", str(word_file), *READ, "--max-pixels", "100000"]) == 0
    assert WORD in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", str(int(RANGES["max_pixels"].high) + 1), "many"])
def test_a_value_out_of_the_agents_range_is_refused_naming_the_flag_or_variable(
        value: str, word_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["ocr", str(word_file), *READ, "--max-pixels", value])
    assert usage.value.code == 2 and "--max-pixels" in capsys.readouterr().err
    monkeypatch.setenv("VKOCR_OCR_MAX_PIXELS", value)
    assert main(["ocr", str(word_file), *READ]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vkocr: error: VKOCR_OCR_MAX_PIXELS: ") and err.count("\n") == 1


def test_the_agent_takes_the_same_variable_over_its_config_file(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text("[ocr]\nmax_pixels = 5000\n")
    assert load_config(config, env={}).ocr_options().max_pixels == 5000
    assert load_config(config, env={"VKOCR_OCR_MAX_PIXELS": "1_000"}).ocr_options().max_pixels == 1000
    with pytest.raises(ConfigError, match="^VKOCR_OCR_MAX_PIXELS: 'many' is not an integer$"):
        load_config(None, env={"VKOCR_OCR_MAX_PIXELS": "many"})
    with pytest.raises(ConfigError, match="max_pixels"):
        load_config(None, env={"VKOCR_OCR_MAX_PIXELS": "0"})
