"""VKOCR_ environment variables: a config key's (VKOCR_<SECTION>_<KEY>) overrides it; a misspelt one is an error
naming the closest key instead of being ignored; the few variables that are no config keys (OTHER_VARIABLES)
pass, and every VKOCR_ name the checkout uses is one or the other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.paths import ROOT
from vkocr.agent.cli.main import main
from vkocr.agent.serving.config import AgentConfig, load_config
from vkocr.agent.serving.config_sources import (
    OCR_MAX_PIXELS_VARIABLE,
    OTHER_VARIABLES,
    env_name,
    moved_keys,
    settable_keys,
)
from vkocr.agent.serving.errors import ConfigError

KEYS = {env_name(section, key) for section, key in settable_keys(AgentConfig())} | {OCR_MAX_PIXELS_VARIABLE}
KEYS |= {env_name(old, key) for old, key, _new in moved_keys()}  # still taken, with a warning
VKOCR_NAME = re.compile(r"\bVKOCR_[A-Z0-9]+(?:_[A-Z0-9]+)*\b")
CODE_FILES = {".py", ".sh", ".yaml", ".yml", ".service"}  # and Containerfile: where a variable is read or set
TEXT_FILES = {*CODE_FILES, ".md", ".toml", ".cfg", ".txt", ".ini"}


@pytest.mark.parametrize(("name", "closest"), [
    ("VKOCR_SERVER_GRACE", "VKOCR_SERVER_GRACE_S"),  # a unit left out
    ("VKOCR_SEVRER_GRACE_S", "VKOCR_SERVER_GRACE_S"),  # letters swapped
    ("VKOCR_TLS_CLIENTCA", "VKOCR_TLS_CLIENT_CA"),
    ("VKOCR_PLANS_WARM_SHAPE", "VKOCR_PLANS_WARM_SHAPES"),
    ("VKOCR_LOG_LEVEL", "VKOCR_LOGGING_LEVEL"),
    ("VKOCR_CACHEDIR", "VKOCR_CACHE_DIR"),  # close to a variable that is no key
])
def test_a_misspelt_variable_is_an_error_naming_the_closest_key(name: str, closest: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, env={name: "3"})
    assert str(info.value).startswith(f"{name} is neither a configuration key")
    assert str(info.value).endswith(f"did you mean {closest}?")


def test_a_name_close_to_nothing_points_at_the_keys() -> None:
    with pytest.raises(ConfigError, match=r"^VKOCR_ZQX is neither a configuration key.*--print-config` shows every "
                       r"key$"):
        load_config(None, env={"VKOCR_ZQX": "1"})


def test_ocr_options_are_not_read_from_the_environment() -> None:
    with pytest.raises(ConfigError, match=r"^VKOCR_OCR_TEXT_SCORE: \[ocr\] options come from the config file"):
        load_config(None, env={"VKOCR_OCR_TEXT_SCORE": "0.6"})


def test_keys_and_the_other_variables_pass() -> None:
    env = {name: "anything" for name in OTHER_VARIABLES}
    env |= {"VKOCR_SERVER_GRACE_S": "3", "VKOCR_DEVICE_SELECT": "cpu", "PATH": "/usr/bin", "vkocr_server": "x"}
    config = load_config(None, env=env)
    assert config.server.grace_s == 3.0 and config.device.select == "cpu"


def test_serve_exits_2_on_a_misspelt_variable(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VKOCR_SERVER_GRACE", "3")
    assert main(["serve", "--print-config"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "VKOCR_SERVER_GRACE " in err and "did you mean VKOCR_SERVER_GRACE_S?" in err


def checkout_files() -> list[Path]:
    """The checkout's text files: sources, scripts, docs, deployment files (no virtual environment, no build)."""
    return [path for path in ROOT.rglob("*")
            if path.is_file() and (path.suffix in TEXT_FILES or path.name == "Containerfile")
            and not any(part.startswith(".") or part in ("build", "__pycache__") or part.endswith(".egg-info")
                        for part in path.relative_to(ROOT).parts)]


def test_every_vkocr_variable_in_the_checkout_is_a_key_or_a_known_other() -> None:
    named: dict[str, str] = {}  # name → a file that names it
    in_code: set[str] = set()
    for path in checkout_files():
        if path.resolve() == Path(__file__).resolve():  # this file names misspelt ones on purpose
            continue
        names = set(VKOCR_NAME.findall(path.read_text()))
        named |= {name: str(path.relative_to(ROOT)) for name in names}
        if (path.suffix in CODE_FILES or path.name == "Containerfile") and path.name != "config.py":
            in_code |= names  # config.py only lists them
    unknown = {name: where for name, where in named.items() if name not in KEYS and name not in OTHER_VARIABLES}
    assert unknown == {}, "add each to config.OTHER_VARIABLES (who reads it), or make it a config key"
    assert sorted(set(OTHER_VARIABLES) - in_code) == [], "OTHER_VARIABLES names a variable no code uses any more"


def test_a_variable_of_the_wrong_type_is_named_in_good_english() -> None:
    with pytest.raises(ConfigError, match=r"^VKOCR_SERVER_QUEUE_SIZE: 'many' is not an int$"):
        load_config(None, env={"VKOCR_SERVER_QUEUE_SIZE": "many"})
    with pytest.raises(ConfigError, match=r"^VKOCR_SERVER_GRACE_S: 'soon' is not a float$"):
        load_config(None, env={"VKOCR_SERVER_GRACE_S": "soon"})
