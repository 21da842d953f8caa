"""A restart after [models] trusted_keys changed so that the active version's signer is no longer trusted: the
agent serves the newest stored version whose signer is trusted, and says so in its status; with none, it is up
and NOT_SERVING, and its status says why. Real agents on loopback with real bundles (lavapipe)."""

from __future__ import annotations

from pathlib import Path

from grpc_health.v1 import health_pb2

from tests.agent.agents import wait_for
from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.conftest import Bundles
from tests.agent.fleet.fleet_agents import WORD, make_bundle, read_word, store_agent, store_config
from vkocr.agent.bundles.signing import TrustedKeys
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.serving.client import OcrClient
from vkocr.v1 import status_pb2


def store_with_intruders_active(root: Path, release_key: KeyPair, intruder_key: KeyPair, intruders: Path,
                                *trusted: Path) -> None:
    """A store that trusted both keys when `intruders` (signed by `intruder_key`) was activated last."""
    both = TrustedKeys([release_key.private.public_key(), intruder_key.private.public_key()])
    store = ModelStore(root, both)
    for path in trusted:
        store.set_active(store.add(path).version)
    store.set_active(store.add(intruders).version)


def test_the_newest_version_with_a_trusted_signer_serves(tmp_path: Path, release_key: KeyPair,
                                                         intruder_key: KeyPair, bundles: Bundles,
                                                         selftest_image: Path) -> None:
    intruders = make_bundle(tmp_path / "intruders.vkb", "4.0.0", intruder_key, selftest_image, WORD)
    store_with_intruders_active(tmp_path / "store", release_key, intruder_key, intruders, bundles.v1, bundles.v3)
    with store_agent(store_config(tmp_path / "store", release_key)) as agent, OcrClient(agent.target) as client:
        # the reason follows the swap by a moment (the start-up's activation says it once the worker serves)
        wait_for(lambda: "the active version 4.0.0 is no longer signed by" in client.status(timeout=10).reason, 30)
        status = client.status(timeout=10)
        assert status.state == status_pb2.SERVING_STATE_SERVING and status.model_version == "3.0.0"
        assert client.health(timeout=5) == "SERVING"
        assert read_word(client, WORD) == (WORD, "3.0.0")
    assert ModelStore(tmp_path / "store", TrustedKeys()).active() == "3.0.0"  # a restart serves it at once


def test_without_a_trusted_version_the_agent_says_why_it_does_not_serve(
        tmp_path: Path, release_key: KeyPair, intruder_key: KeyPair, selftest_image: Path) -> None:
    intruders = make_bundle(tmp_path / "intruders.vkb", "4.0.0", intruder_key, selftest_image, WORD)
    store_with_intruders_active(tmp_path / "store", release_key, intruder_key, intruders)
    config = store_config(tmp_path / "store", release_key)
    with store_agent(config, wait_serving=False) as agent, OcrClient(agent.target) as client:
        assert agent.agent.worker.loaded.wait(60)
        status = client.status(timeout=10)
        assert status.state == status_pb2.SERVING_STATE_FAILED
        assert "stored version 4.0.0 is no longer signed by a trusted key" in status.reason, status.reason
        assert "no other stored version is signed by a trusted key" in status.reason, status.reason
        assert client.health(timeout=5) == health_pb2.HealthCheckResponse.ServingStatus.Name(
            health_pb2.HealthCheckResponse.NOT_SERVING)
