"""`vkocr fleet rollout` and `vkocr fleet status` against three real agents on loopback, each with its own
store, all serving 1.0.0.

The third agent cannot pass 2.0.0's self-test for a reason of its own: its deployment runs with recognition
off (`[ocr] use_rec = false`, boxes only), and the bundle's options do not turn it on, so the self-test image
reads as nothing. The rollout must switch the canary, then the first batch, fail on the third, and roll the
first two back."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.conftest import Bundles
from tests.agent.fleet.fleet_agents import WORD, WORD_SWAPPED, read_word, seed_store, store_agent, store_config
from vkocr.agent.cli.main import main
from vkocr.agent.serving.background import BackgroundAgent
from vkocr.agent.serving.client import OcrClient


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, release_key: KeyPair,
          bundles: Bundles) -> Iterator[list[BackgroundAgent]]:
    with ExitStack() as stack:
        agents = []
        for i, overrides in enumerate(({}, {}, {"ocr.use_rec": False})):
            root = tmp_path_factory.mktemp(f"agent{i + 1}-store")
            seed_store(root, release_key, bundles.v1)
            agents.append(stack.enter_context(store_agent(store_config(root, release_key, **overrides))))
        yield agents


def table(out: str, columns: int = 4) -> list[list[str]]:
    """The rows of a printed table, split on runs of two or more spaces (the last column may hold them)."""
    lines = out.strip().splitlines()
    header = max(i for i, line in enumerate(lines) if line.startswith("AGENT "))  # agents' own logs come before
    return [re.split(r"\s{2,}", line.strip(), maxsplit=columns - 1) for line in lines[header + 1:]]


def versions_served(agents: list[BackgroundAgent]) -> list[tuple[str, str]]:
    """(store's active version, version the worker serves) per agent."""
    return [((a.agent.store.active() if a.agent.store else None) or "", a.agent.worker.model_version) for a in agents]


def test_third_agent_fails_its_self_test_and_everything_rolls_back(
        fleet: list[BackgroundAgent], bundles: Bundles, capsys: pytest.CaptureFixture[str]) -> None:
    targets = [a.target for a in fleet]
    code = main(["fleet", "rollout", str(bundles.v2), "--agents", ",".join(targets), "--canary", "1",
                 "--batch", "1", "--soak", "1s"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    rows = table(out)
    assert [r[:3] for r in rows] == [[t, "1.0.0", "2.0.0"] for t in targets]
    assert [r[3] for r in rows[:2]] == ["rolled back", "rolled back"]
    assert rows[2][3].startswith("activation failed: FAILED_PRECONDITION: activation of 2.0.0 failed at "
                                 "self_tests: 1 of 1 self-test(s) failed: selftest/lot0042.png: expected "
                                 "'LOT1142', read ''")
    assert "canary: activating 2.0.0 on " + targets[0] in err
    assert f"batch 2: activation failed on {targets[2]}" in err and "rolling back" in err
    assert versions_served(fleet) == [("1.0.0", "1.0.0")] * 3
    for agent in fleet[:2]:
        with OcrClient(agent.target) as client:
            assert read_word(client, WORD) == (WORD, "1.0.0")


def test_rollout_canary_then_batch_succeeds(fleet: list[BackgroundAgent], bundles: Bundles,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    targets = [a.target for a in fleet[:2]]
    code = main(["fleet", "rollout", str(bundles.v2), "--agents", ",".join(targets), "--soak", "1s",
                 "--max-p99-ms", "600000"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert table(out) == [[t, "1.0.0", "2.0.0", "updated"] for t in targets]
    assert versions_served(fleet) == [("2.0.0", "2.0.0")] * 2 + [("1.0.0", "1.0.0")]
    for agent in fleet[:2]:
        with OcrClient(agent.target) as client:
            assert read_word(client, WORD) == (WORD_SWAPPED, "2.0.0")

    again = main(["fleet", "rollout", str(bundles.v2), "--agents", ",".join(targets), "--soak", "1s"])
    out, _ = capsys.readouterr()
    assert again == 0
    assert [r[3] for r in table(out)] == ["unchanged (already active)"] * 2

    assert main(["fleet", "status", "--agents", ",".join(a.target for a in fleet)]) == 0
    out, _ = capsys.readouterr()
    rows = table(out, columns=5)
    assert [r[:3] for r in rows] == [[a.target, "SERVING", v] for a, v in zip(fleet, ["2.0.0", "2.0.0", "1.0.0"])]
    assert [r[4] for r in rows] == ["2.0.0*, 1.0.0", "2.0.0*, 1.0.0", "2.0.0, 1.0.0*"]
    assert all(r[3] == fleet[0].agent.state.get().device for r in rows)


def test_an_unreachable_agent_is_pending_and_the_others_go_on(
        fleet: list[BackgroundAgent], bundles: Bundles, capsys: pytest.CaptureFixture[str]) -> None:
    before = versions_served(fleet)
    code = main(["fleet", "rollout", str(bundles.v1), "--agents", f"{fleet[2].target},127.0.0.1:1",
                 "--soak", "1s"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = table(out)
    assert rows[0][3] == "unchanged (already active)" and rows[1][3].startswith("pending (unreachable or refused:")
    assert "127.0.0.1:1: pending (unreachable" in err and "the others go on" in err
    assert versions_served(fleet) == before
