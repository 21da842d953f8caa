"""`vkocr client health --json` against a real agent on a loopback port (the CPU backend): one JSON object per
status, also under --watch, and one that says why when the agent cannot be reached."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.agent.agents import running_agent
from vkocr.agent.cli.logs import configure_logging
from vkocr.agent.cli.main import main
from vkocr.agent.serving.background import BackgroundAgent


@pytest.fixture(scope="module")
def agent() -> Iterator[BackgroundAgent]:
    configure_logging("warning")  # the in-process agent logs on stderr, as `vkocr serve` does, not on stdout
    with running_agent(**{"device.select": "cpu"}) as background:
        yield background


def json_lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


def test_health_json(agent: BackgroundAgent, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["client", "health", "--target", agent.target, "--json"]) == 0
    assert json_lines(capsys.readouterr().out) == [{"target": agent.target, "service": "", "status": "SERVING"}]
    assert main(["client", "health", "--target", agent.target, "--service", "vkocr.v1.OcrService", "--watch",
                 "--count", "1", "--json"]) == 0
    assert json_lines(capsys.readouterr().out) == [
        {"target": agent.target, "service": "vkocr.v1.OcrService", "status": "SERVING"}]


def test_health_json_of_an_agent_that_does_not_answer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["client", "health", "--target", "127.0.0.1:1", "--timeout", "3s", "--json"]) == 1
    out, err = capsys.readouterr()
    [record] = json_lines(out)
    assert record["status"] is None and str(record["error"]).startswith(("UNAVAILABLE", "DEADLINE_EXCEEDED"))
    assert f"vkocr client: {record['error']}" in err
