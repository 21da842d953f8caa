"""Anti-rollback on a real agent over loopback: the store's high-water mark (the newest version ever activated)
refuses older signed bundles with FAILED_PRECONDITION until an operator asks for the downgrade (Activate with
allow_downgrade, `vkocr fleet rollout --allow-downgrade`; Rollback in tests/agent/bundles/test_high_water.py), and it
survives a restart. One agent per module; its store starts with 3.0.0 active (mark 3.0.0) and 1.0.0, 2.0.0
stored. The tests run in order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest

from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.conftest import Bundles
from tests.agent.fleet.fleet_agents import FAST, WORD, WORD_SWAPPED, default_models, read_word, seed_store, store_config
from vkocr.agent.bundles import bundle
from vkocr.agent.cli.main import main
from vkocr.agent.fleet.rollout import upload_bundle
from vkocr.agent.serving.background import BackgroundAgent, start_agent
from vkocr.agent.serving.client import OcrClient
from vkocr.agent.serving.config import AgentConfig
from vkocr.v1 import models_pb2


@dataclass
class Board:
    config: AgentConfig
    root: Path
    agent: BackgroundAgent
    client: OcrClient

    def restart(self) -> None:
        self.client.close()
        self.agent.stop(5)
        self.agent = start_agent(self.config)
        self.client = OcrClient(self.agent.target)

    def mark(self) -> str:
        return str(json.loads((self.root / "high_water.json").read_text())["version"])

    def activate(self, version: str, *, allow_downgrade: bool = False) -> models_pb2.ActivateResponse:
        request = models_pb2.ActivateRequest(version=version, allow_downgrade=allow_downgrade)
        response: models_pb2.ActivateResponse = self.client.models.Activate(request, timeout=300)
        return response

    def refused(self, version: str) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as caught:
            self.activate(version)
        return caught.value


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory, release_key: KeyPair, bundles: Bundles) -> Iterator[Board]:
    root = tmp_path_factory.mktemp("anti-rollback")
    seed_store(root, release_key, bundles.v3, bundles.v1, bundles.v2)  # 3.0.0 active
    config = store_config(root, release_key, **{"models.keep": 6})
    agent = start_agent(config)
    held = Board(config, root, agent, OcrClient(agent.target))
    try:
        yield held
    finally:
        held.client.close()
        held.agent.stop(5)


def test_a_signed_old_bundle_is_refused_then_activated_with_an_explicit_downgrade(
        board: Board, release_key: KeyPair, selftest_image: Path, tmp_path: Path) -> None:
    assert read_word(board.client, WORD) == (WORD, "3.0.0") and board.mark() == "3.0.0"
    old = bundle.create(default_models(), "labels", "0.9.0", tmp_path / "old.vkb", options=FAST,
                        self_tests=[(selftest_image, WORD)], private_key=release_key.private,
                        created=datetime(2019, 3, 1, tzinfo=UTC))
    assert upload_bundle(board.client, tmp_path / "old.vkb").version == old.version  # storing is no activation

    err = board.refused("0.9.0")
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "0.9.0 (created 2019-03-01T00:00:00Z) is older than 3.0.0" in (err.details() or "")
    assert read_word(board.client, WORD) == (WORD, "3.0.0")  # the next good request: the old model, whole
    assert (board.root / "active").read_text() == "3.0.0\n"

    done = board.activate("0.9.0", allow_downgrade=True)
    assert (done.active_version, done.previous_version) == ("0.9.0", "3.0.0")
    assert read_word(board.client, WORD) == (WORD, "0.9.0")
    assert board.mark() == "3.0.0"  # an allowed downgrade does not lower the mark


def test_reactivating_the_active_version_is_no_downgrade(board: Board) -> None:
    done = board.activate("0.9.0")  # older than the mark, but it is what serves: nothing changes
    assert (done.active_version, len(done.self_tests)) == ("0.9.0", 0)
    assert read_word(board.client, WORD) == (WORD, "0.9.0")


def test_the_mark_survives_a_restart(board: Board) -> None:
    board.restart()
    assert read_word(board.client, WORD) == (WORD, "0.9.0")  # the active pointer, as before the restart
    err = board.refused("1.0.0")  # newer than what serves, older than the mark: the mark was kept
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION and "older than 3.0.0" in (err.details() or "")
    assert read_word(board.client, WORD) == (WORD, "0.9.0")


def test_fleet_rollout_needs_allow_downgrade(board: Board, bundles: Bundles,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    command = ["fleet", "rollout", str(bundles.v2), "--agents", board.agent.target, "--soak", "1s"]
    assert main(command) == 1
    assert "FAILED_PRECONDITION" in capsys.readouterr().out
    assert read_word(board.client, WORD) == (WORD, "0.9.0")

    assert main([*command, "--allow-downgrade"]) == 0
    assert read_word(board.client, WORD) == (WORD_SWAPPED, "2.0.0")

