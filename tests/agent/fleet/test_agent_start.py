"""An agent whose store has nothing it can serve stays up, says why, and is fixed remotely: upload and
activate a bundle, and it serves without a restart."""

from __future__ import annotations

import os
from pathlib import Path

import grpc
import pytest

from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.conftest import Bundles
from tests.agent.fleet.fleet_agents import WORD, WORD_SWAPPED, read_word, seed_store, store_agent, store_config
from vkocr.agent.bundles.activation import NO_ACTIVE_VERSION
from vkocr.agent.fleet.rollout import upload_bundle
from vkocr.agent.serving.background import BackgroundAgent
from vkocr.agent.serving.client import OcrClient
from vkocr.agent.serving.state import ServingState
from vkocr.v1 import models_pb2, status_pb2


def wait_loaded(background: BackgroundAgent) -> None:
    assert background.agent.worker.loaded.wait(120), "the start-up load never ended"


def test_no_active_version_stays_up_failed_until_one_is_activated(tmp_path: Path, release_key: KeyPair,
                                                                 bundles: Bundles) -> None:
    with store_agent(store_config(tmp_path / "store", release_key), wait_serving=False) as background, \
            OcrClient(background.target) as client:
        wait_loaded(background)
        status = client.status(timeout=10)
        assert (status.state, status.reason) == (status_pb2.SERVING_STATE_FAILED, NO_ACTIVE_VERSION)
        assert client.health() == "NOT_SERVING"
        # what needs no model answers all the same: the status, and the model service that will fix this
        assert client.health("vkocr.v1.StatusService") == client.health("vkocr.v1.ModelsService") == "SERVING"
        with pytest.raises(grpc.RpcError) as info:
            read_word(client, WORD)
        assert info.value.code() is grpc.StatusCode.UNAVAILABLE

        assert upload_bundle(client, bundles.v1).version == "1.0.0"
        done = client.models.Activate(models_pb2.ActivateRequest(version="1.0.0"), timeout=300)
        assert (done.active_version, done.previous_version, [t.passed for t in done.self_tests]) == \
            ("1.0.0", "", [True])
        assert read_word(client, WORD) == (WORD, "1.0.0")
        assert client.health() == "SERVING"
        assert background.agent.state.get().state is ServingState.SERVING
    assert (tmp_path / "store" / "active").read_text() == "1.0.0\n"


def test_an_active_version_altered_on_disk_is_not_served(tmp_path: Path, release_key: KeyPair,
                                                         bundles: Bundles) -> None:
    """Checked again at every start: a byte changed in the active version's files (a disk fault, or someone
    with access to the board) and the agent refuses to serve it, and says so; another version can be
    activated remotely."""
    store = seed_store(tmp_path / "store", release_key, bundles.v1)
    image = store.versions_dir / "1.0.0" / "selftest" / "lot0042.png"
    os.chmod(image, 0o644)
    data = bytearray(image.read_bytes())
    data[-20] ^= 1
    image.write_bytes(bytes(data))
    with store_agent(store_config(tmp_path / "store", release_key), wait_serving=False) as background, \
            OcrClient(background.target) as client:
        wait_loaded(background)
        status = client.status(timeout=10)
        assert status.state == status_pb2.SERVING_STATE_FAILED
        assert "cannot load active model version 1.0.0: stored version 1.0.0: file selftest/lot0042.png was " \
               "altered on disk" in status.reason
        assert upload_bundle(client, bundles.v2).version == "2.0.0"
        done = client.models.Activate(models_pb2.ActivateRequest(version="2.0.0"), timeout=300)
        assert (done.active_version, done.previous_version) == ("2.0.0", "1.0.0")
        assert read_word(client, WORD) == (WORD_SWAPPED, "2.0.0")
        with pytest.raises(grpc.RpcError) as back:  # to the damaged version: refused at the first step
            client.models.Rollback(models_pb2.RollbackRequest(), timeout=300)
        assert back.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "rollback of 1.0.0 failed at verify: stored version 1.0.0: file selftest/lot0042.png was altered " \
               "on disk; version 2.0.0 is still active" in (back.value.details() or "")
        assert read_word(client, WORD) == (WORD_SWAPPED, "2.0.0")
