"""The agent's [fleet] section: each mistake is refused at start-up with a ConfigError naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from vkocr.agent.serving.config import load_config
from vkocr.agent.serving.errors import ConfigError

GOOD = {"fleet.broker": "mqtts://mqtt.example:8883", "fleet.fleet": "plant-7", "fleet.group": "line-a",
        "fleet.board": "b1", "models.store": "/var/lib/vkocr/store"}


def test_a_complete_fleet_section_loads(tmp_path: Path) -> None:
    config = load_config(None, env={"VKOCR_FLEET_PASSWORD": "s3cret"}, overrides=GOOD)
    assert (config.fleet.group, config.fleet.password, config.fleet.board_name) == ("line-a", "s3cret", "b1")


@pytest.mark.parametrize(("change", "message"), [
    ({"fleet.broker": "http://mqtt.example"}, "broker must be mqtt://HOST:PORT or mqtts://"),
    ({"models.store": ""}, "a fleet client installs through the model store"),
    ({"fleet.group": "line/a"}, "group must be 1-64 letters"),
    ({"fleet.fleet": ""}, "fleet must be 1-64 letters"),
    ({"fleet.board": "#"}, "board '#' must be"),
    ({"fleet.cert": "board.pem"}, "cert and key go together"),
    ({"fleet.report_interval_s": 0.1}, "report_interval_s must be at least 1 s"),
])
def test_a_wrong_fleet_setting_is_refused_naming_the_key(change: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=r"\[fleet\]: " + message):
        load_config(None, env={}, overrides={**GOOD, **change})


def test_without_a_broker_nothing_else_is_checked() -> None:
    assert load_config(None, env={}, overrides={"fleet.group": "not/checked"}).fleet.broker == ""
