"""`vkocr fleet --fleet` refuses what it cannot do with a line naming the flag, before it changes anything."""

from __future__ import annotations

import pytest

from tests.agent.agents import free_port
from vkocr.agent.cli.main import main


@pytest.mark.parametrize(("args", "code", "says"), [
    (["rollout", "r.example/ocr/labels:1", "--fleet", "f", "--agents", "a:1"], 2, "(--agents) or the fleet"),
    (["rollout", "r.example/ocr/labels:1"], 2, "(--agents) or the fleet"),
    (["rollout", "r.example/ocr/labels:1", "--fleet", "f", "--batch", "0%"], 2, "--batch must be a number of"),
    (["rollout", "r.example/ocr/labels:1", "--fleet", "f", "--batch", "2.5"], 2, "--batch must be a number of"),
    (["rollout", "no-reference", "--fleet", "f", "--group", "g"], 1, "is not an OCI reference"),
    (["rollout", "r.example/ocr/labels:1", "--fleet", "f", "--group", "a/b"], 1, "group 'a/b' must be"),
    (["status", "--fleet", "f"], 1, "--fleet needs --broker"),
    (["rollback", "--fleet", "f", "--group", "g", "--broker", "http://x"], 1, "must be mqtt://HOST"),
])
def test_a_refusal_names_what_is_wrong(args: list[str], code: int, says: str, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("VKOCR_BROKER", raising=False)
    assert main(["fleet", *args]) == code
    assert says in capsys.readouterr().err


def test_a_broker_that_is_not_there_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"mqtt://127.0.0.1:{free_port()}"
    assert main(["fleet", "status", "--fleet", "f", "--broker", url]) == 1
    assert f"cannot reach the broker {url}" in capsys.readouterr().err
