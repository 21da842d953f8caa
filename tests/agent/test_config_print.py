"""`vkocr serve --print-config` prints the configuration in effect: every section, every key with its value,
[ocr]'s every OcrOptions field (the deployment's values over the defaults), each with its comment; what it
prints is a config file that gives the same configuration."""

from __future__ import annotations

import dataclasses
import os
import tomllib
from pathlib import Path

import pytest

from vkocr.agent.cli.main import main
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.serving.config import AgentConfig, load_config
from vkocr.agent.serving.config_sources import OTHER_VARIABLES
from vkocr.agent.serving.config_toml import to_toml


@pytest.fixture
def printed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """--print-config with no file, no config variable (the defaults): its output."""
    for name in os.environ:
        if name.startswith("VKOCR_") and name not in OTHER_VARIABLES:
            monkeypatch.delenv(name)
    assert main(["serve", "--print-config"]) == 0
    return capsys.readouterr().out


def test_what_automatic_resolves_to_comes_first(printed: str) -> None:
    head = printed[:printed.index("[server]")]
    resolved = load_config(None, env={}).resolved().log_fields()
    assert "# " + ", ".join(f"{key} = {value}" for key, value in resolved.items()) in head.splitlines()


def test_every_section_and_key_shows_its_default(printed: str) -> None:
    shown, defaults = tomllib.loads(printed), AgentConfig()
    assert list(shown) == [f.name for f in dataclasses.fields(AgentConfig)]
    for section in shown.keys() - {"ocr"}:
        assert shown[section] == dataclasses.asdict(getattr(defaults, section)), section
    assert list(shown["ocr"]) == [f.name for f in dataclasses.fields(OcrOptions)]
    # what serves: the default model set's options (ppocrv6-small's procedure is RapidOCR 3.10's)
    assert OcrOptions().replace(**shown["ocr"]) == load_config(None, env={}).served_options()
    assert shown["ocr"]["procedure"] == "rapidocr-3.10"
    assert shown["ocr"]["limit_side_len"] == 736 and shown["ocr"]["plugin_options"] == {}


def test_ocr_options_carry_their_comments(printed: str) -> None:
    section = printed[printed.index("[ocr]\n"):].splitlines()
    comment = "# per-character boxes; rapidocr-3.10: per word on lines without Chinese"
    assert f"return_word_box = false  {comment}" in section
    assert section[section.index("max_det_pixels = 8388608") - 1].startswith("# ")  # the comment above it


def test_the_file_shows_over_the_defaults_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[ocr]\ntext_score = 0.6\nlimit_side_len = 960\nplugins = ["merge_lines"]\n')
    out = to_toml(load_config(path, env={}))
    ocr = tomllib.loads(out)["ocr"]
    assert (ocr["text_score"], ocr["limit_side_len"], ocr["plugins"]) == (0.6, 960, ["merge_lines"])
    assert ocr["thresh"] == OcrOptions().thresh and len(ocr) == len(dataclasses.fields(OcrOptions))
    again = tmp_path / "printed.toml"
    again.write_text(out)
    assert to_toml(load_config(again, env={})) == out
