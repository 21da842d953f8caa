"""`[plans] warm_shapes`: the image sizes whose plans the agent records before it serves. Parsed from a file, the
environment and overrides; every bad entry is refused naming the key and the entry; `--print-config` shows it
with its comment."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from vkocr.agent.cli.main import main
from vkocr.agent.serving.config import DEFAULT_WARM_SHAPES, MAX_WARM_SHAPES, load_config
from vkocr.agent.serving.config_toml import to_toml
from vkocr.agent.serving.errors import ConfigError


def from_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(body)
    return path


def test_the_defaults_are_camera_frames_and_a4_pages() -> None:
    config = load_config(None, env={})
    assert config.plans.warm_shapes == list(DEFAULT_WARM_SHAPES)
    assert config.warm_sizes() == [(640, 480), (1280, 720), (1920, 1080), (1080, 1920), (1240, 1754), (2480, 3508)]


def test_a_file_sets_the_sizes_and_an_empty_list_turns_warm_up_off(tmp_path: Path) -> None:
    config = load_config(from_file(tmp_path, '[plans]\nwarm_shapes = ["320x240", "1x1", "20000x20000"]\n'), env={})
    assert config.warm_sizes() == [(320, 240), (1, 1), (20000, 20000)]
    assert load_config(from_file(tmp_path, "[plans]\nwarm_shapes = []\n"), env={}).warm_sizes() == []


@pytest.mark.parametrize("entry", ["320", "320x", "x240", "0x240", "320x0", "20001x10", "10x20001", "320X240",
                                   " 320x240", "320x240 ", "-1x5", "1e3x10", "320*240", "3２0x240", "",
                                   "1" * 5000 + "x1", 640])
def test_a_bad_entry_is_refused_naming_the_key_and_the_entry(tmp_path: Path, entry: object) -> None:
    value = f'"{entry}"' if isinstance(entry, str) else str(entry)
    path = from_file(tmp_path, f'[plans]\nwarm_shapes = ["640x480", {value}]\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert "warm_shapes" in str(info.value) and repr(entry) in str(info.value)


def test_at_most_64_entries() -> None:
    sizes = [f"{w}x100" for w in range(1, MAX_WARM_SHAPES + 2)]
    assert len(load_config(None, env={}, overrides={"plans.warm_shapes": sizes[:-1]}).warm_sizes()) == 64
    with pytest.raises(ConfigError, match=r"warm_shapes has 65 entries; at most 64"):
        load_config(None, env={}, overrides={"plans.warm_shapes": sizes})


def test_a_list_is_required() -> None:
    with pytest.raises(ConfigError, match="plans.warm_shapes must be list"):
        load_config(None, env={}, overrides={"plans.warm_shapes": "320x240"})


def test_the_environment_overrides_the_file_as_other_list_keys_do(tmp_path: Path) -> None:
    path = from_file(tmp_path, '[plans]\nwarm_shapes = ["640x480"]\n')
    assert load_config(path, env={"VKOCR_PLANS_WARM_SHAPES": "320x240, 64x48"}).warm_sizes() == [(320, 240),
                                                                                                  (64, 48)]
    assert load_config(path, env={"VKOCR_PLANS_WARM_SHAPES": ""}).warm_sizes() == []
    with pytest.raises(ConfigError, match=r"warm_shapes entry 'big'"):
        load_config(path, env={"VKOCR_PLANS_WARM_SHAPES": "320x240,big"})


def test_print_config_shows_the_key_with_its_comment_and_reads_back(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VKOCR_PLANS_WARM_SHAPES", "1280x720,2480x3508")
    assert main(["serve", "--print-config"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("[plans]"):].split("\n\n")[0].splitlines()
    assert section[0] == "[plans]" and section[-1] == 'warm_shapes = ["1280x720", "2480x3508"]'
    assert all(line.startswith("# ") for line in section[1:-1]) and len(section) > 2
    assert "WIDTHxHEIGHT" in " ".join(section[1:-1]) and "SERVING" in " ".join(section[1:-1])
    assert tomllib.loads(out)["plans"] == {"warm_shapes": ["1280x720", "2480x3508"]}
    printed = tmp_path / "printed.toml"  # what it prints is a config file, with the same result
    printed.write_text(out)
    assert to_toml(load_config(printed, env={})) == out


def test_a_bad_entry_from_the_environment_exits_2(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VKOCR_PLANS_WARM_SHAPES", "640x480,640x0")
    assert main(["serve", "--print-config"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "warm_shapes" in err and "'640x0'" in err
