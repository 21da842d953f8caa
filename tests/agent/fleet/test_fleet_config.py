"""The agent's [fleet] section: each mistake is refused at start-up with a ConfigError naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkocr.agent.serving.config import load_config
from vkocr.agent.serving.errors import ConfigError

GOOD = {"fleet.broker": "mqtts://mqtt.example:8883", "fleet.fleet": "plant-7", "fleet.group": "line-a",
        "fleet.board": "b1", "models.store": "/var/lib/vkocr/store"}


def test_a_complete_fleet_section_loads_with_its_password_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "password").write_text("s3cret\n")
    config = load_config(None, env={"VKOCR_FLEET_PASSWORD_FILE": str(tmp_path / "password")}, overrides=GOOD)
    assert (config.fleet.group, config.fleet.secret("password_file"), config.fleet.board_name) == (
        "line-a", "s3cret", "b1")


@pytest.mark.parametrize(("change", "message"), [
    ({"fleet.broker": "http://mqtt.example"}, "broker must be mqtt://HOST:PORT or mqtts://"),
    ({"models.store": ""}, "a fleet client installs through the model store"),
    ({"fleet.group": "line/a"}, "group must be 1-64 letters"),
    ({"fleet.fleet": ""}, "fleet must be 1-64 letters"),
    ({"fleet.board": "#"}, "board '#' must be"),
    ({"fleet.cert": "board.pem"}, "cert and key go together"),
    ({"fleet.report_interval_s": 0.1}, "report_interval_s must be at least 1 s"),
    ({"fleet.registry_password_file": "/nonexistent/pw"}, "registry_password_file /nonexistent/pw: No such file"),
])
def test_a_wrong_fleet_setting_is_refused_naming_the_key(change: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=r"\[fleet\]: " + message):
        load_config(None, env={}, overrides={**GOOD, **change})


def test_without_a_broker_nothing_else_is_checked() -> None:
    assert load_config(None, env={}, overrides={"fleet.group": "not/checked"}).fleet.broker == ""
