"""`vkocr fleet status --json` and `vkocr fleet rollout --json` against a real agent with its own store (the CPU
backend) and an address where nothing answers: one JSON object on stdout, the rollout's progress on stderr; the
status table says what the JSON says."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.fleet_agents import WORD, make_bundle, seed_store, store_agent, store_config
from vkocr.agent.cli.main import main
from vkocr.agent.serving.background import BackgroundAgent

NOBODY = "127.0.0.1:1"  # a loopback port nothing listens on


@pytest.fixture(scope="module")
def v1(fleet_dir: Path, release_key: KeyPair, selftest_image: Path) -> Path:
    return make_bundle(fleet_dir / "json" / "labels-1.0.0.vkb", "1.0.0", release_key, selftest_image, WORD)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory, release_key: KeyPair, v1: Path) -> Iterator[BackgroundAgent]:
    root = tmp_path_factory.mktemp("json-store")
    seed_store(root, release_key, v1)
    with store_agent(store_config(root, release_key, **{"device.select": "cpu"})) as background:
        yield background


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_status_json(agent: BackgroundAgent, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = run(capsys, "fleet", "status", "--agents", f"{agent.target},{NOBODY}", "--json")
    assert code == 1  # one agent did not answer
    here, nobody = report["agents"]
    device = agent.agent.state.get().device
    assert here == {"agent": agent.target, "reachable": True, "state": "SERVING", "reason": "",
                    "active_version": "1.0.0", "device": device, "stored": [{"version": "1.0.0", "active": True}],
                    "error": ""}
    assert nobody["agent"] == NOBODY and nobody["reachable"] is False and nobody["stored"] is None
    assert nobody["error"].startswith("UNAVAILABLE")

    assert main(["fleet", "status", "--agents", f"{agent.target},{NOBODY}"]) == 1  # the table says the same
    table = [re.split(r"\s{2,}", line.strip(), maxsplit=4) for line in capsys.readouterr().out.splitlines()]
    assert table[0] == ["AGENT", "STATE", "ACTIVE", "DEVICE", "STORED"]
    assert table[1] == [agent.target, "SERVING", "1.0.0", device, "1.0.0*"]
    assert table[2][0] == NOBODY and table[2][1] == f"UNREACHABLE ({nobody['error']})" and table[2][2:] == ["-"] * 3


def test_rollout_json(agent: BackgroundAgent, v1: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, err = run(capsys, "fleet", "rollout", str(v1), "--agents", agent.target, "--soak", "1s", "--json")
    assert code == 0, err
    assert report == {"version": "1.0.0", "ok": True, "reason": "", "agents": [
        {"agent": agent.target, "old": "1.0.0", "new": "1.0.0", "result": "unchanged (already active)",
         "switched": False}]}
    assert "vkocr fleet: rolling out 1.0.0 to 1 agent(s)" in err  # the progress stays on stderr

    code, report, err = run(capsys, "fleet", "rollout", str(v1), "--agents", f"{agent.target},{NOBODY}",
                            "--soak", "1s", "--json")
    assert code == 0, err  # an agent that does not answer is pending; the others go on
    assert report["ok"] is True and report["reason"] == f"{NOBODY} did not answer: roll out again when back"
    assert [(row["agent"], row["result"].split(":")[0]) for row in report["agents"]] == [
        (agent.target, "unchanged (already active)"), (NOBODY, "pending (unreachable or refused")]
