"""Connections, idle uploads, liveness and the metrics address on a real agent over loopback. The agent's store is
empty, so it stays up in state FAILED without loading a model: readiness ("" and the OCR service) is NOT_SERVING,
liveness (`vkocr.liveness`) SERVING, and the Models service answers. One agent serves the module."""

from __future__ import annotations

import hashlib
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.fleet_agents import store_agent, store_config
from tests.agent.fleet.test_storage_full import random_bundle
from vkocr.agent.cli.main import main
from vkocr.agent.fleet.rollout import upload_bundle
from vkocr.agent.serving.background import BackgroundAgent
from vkocr.agent.serving.client import OcrClient
from vkocr.agent.serving.errors import ConfigError
from vkocr.agent.serving.server import LIVENESS_SERVICE, OCR_SERVICE
from vkocr.v1 import models_pb2, status_pb2

MAX_CONNECTIONS = 8
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory, release_key: KeyPair) -> Iterator[BackgroundAgent]:
    root = tmp_path_factory.mktemp("limits")
    config = store_config(root, release_key, **{"server.max_connections": MAX_CONNECTIONS,
                                                "server.health_listen": "127.0.0.1:0",
                                                "models.upload_idle_s": 1.0})
    with store_agent(config, wait_serving=False) as background:
        background.agent.worker.loaded.wait(30)
        yield background


def own_channel(target: str) -> grpc.Channel:
    """A channel with a TCP connection of its own (channels to one target share one by default)."""
    return grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


def check(channel: grpc.Channel, service: str = "") -> tuple[int, float]:
    started = time.monotonic()
    answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=1)
    return answer.status, time.monotonic() - started


def test_liveness_serves_while_readiness_does_not(agent: BackgroundAgent) -> None:
    with own_channel(agent.target) as channel:
        assert check(channel, LIVENESS_SERVICE)[0] == SERVING
        assert check(channel, "")[0] == NOT_SERVING and check(channel, OCR_SERVICE)[0] == NOT_SERVING
    with own_channel(f"127.0.0.1:{agent.agent.health_port}") as probe:  # the kubelet's port
        assert check(probe, LIVENESS_SERVICE)[0] == SERVING and check(probe, OCR_SERVICE)[0] == NOT_SERVING
    with OcrClient(agent.target) as client:  # the next request: answered, with why it does not serve
        status = client.status(timeout=5)
        assert status.state == status_pb2.SERVING_STATE_FAILED and "no active model version" in status.reason


def test_a_connection_flood_is_cut_at_the_limit_and_health_answers(agent: BackgroundAgent) -> None:
    flood: list[grpc.Channel] = []
    try:
        with own_channel(agent.target) as first:
            assert check(first, LIVENESS_SERVICE)[0] == SERVING
            while len(flood) < MAX_CONNECTIONS - 1:  # up to the limit, `first` included
                flood.append(own_channel(agent.target))
                status, took = check(flood[-1], LIVENESS_SERVICE)
                assert status == SERVING and took < 1.0
            extra = [own_channel(agent.target) for _ in range(4)]
            flood.extend(extra)
            for channel in extra:  # past the limit: closed at once, not left hanging
                started = time.monotonic()
                with pytest.raises(grpc.RpcError) as caught:
                    check(channel)
                assert caught.value.code() is grpc.StatusCode.UNAVAILABLE and time.monotonic() - started < 1.0
            for channel in (first, flood[0]):  # the connections held keep answering within 1 s
                assert check(channel, LIVENESS_SERVICE)[1] < 1.0
            with own_channel(f"127.0.0.1:{agent.agent.health_port}") as probe:  # probes have their own port
                assert check(probe, LIVENESS_SERVICE)[1] < 1.0
    finally:
        for channel in flood:
            channel.close()
    deadline = time.monotonic() + 5
    while True:  # the flood's sockets close: a new client is served again
        try:
            with OcrClient(agent.target) as client:
                listed = client.models.ListBundles(models_pb2.ListBundlesRequest(), timeout=1)
            break
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    assert listed.active_version == "" and list(listed.bundles) == []


def test_an_idle_upload_is_aborted_and_removed(agent: BackgroundAgent, release_key: KeyPair, tmp_path: Path,
                                               selftest_image: Path) -> None:
    path = random_bundle(tmp_path / "b.vkb", "1.0.0", release_key, selftest_image, 90 << 10)
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    hang = threading.Event()

    def stalls() -> Iterator[models_pb2.UploadBundleRequest]:
        yield models_pb2.UploadBundleRequest(upload_id="idle-1", offset=0, data=data[:4096], total_size=len(data),
                                     sha256=digest)
        hang.wait(10)  # then nothing: a client that went quiet

    root = Path(agent.agent.config.models.store)
    with OcrClient(agent.target) as client:
        started = time.monotonic()
        try:
            with pytest.raises(grpc.RpcError) as caught:
                client.models.UploadBundle(stalls(), timeout=10)
        finally:
            hang.set()
        assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert "sent nothing for 1 s" in (caught.value.details() or "") and time.monotonic() - started < 5
        held = client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id="idle-1"), timeout=5)
        assert (held.received, held.total_size) == (0, 0)
        assert list((root / "uploads").iterdir()) == []
        stored = upload_bundle(client, path)  # the next upload, sent promptly, is stored
        assert stored.version == "1.0.0"
        client.models.DeleteBundle(models_pb2.DeleteBundleRequest(version="1.0.0"), timeout=10)


def test_metrics_on_a_public_address_need_to_be_asked_for(release_key: KeyPair, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="metrics.public = true"):
        store_config(tmp_path, release_key, **{"metrics.listen": "0.0.0.0:0"})
    assert main(["serve", "--metrics", "0.0.0.0:9464", "--print-config"]) != 0
    assert "--metrics-public" in capsys.readouterr().err
    assert main(["serve", "--metrics", "0.0.0.0:9464", "--metrics-public", "--print-config"]) == 0
    assert "public = true" in capsys.readouterr().out
    config = store_config(tmp_path, release_key, **{"metrics.listen": "0.0.0.0:0", "metrics.public": True})
    with store_agent(config, wait_serving=False) as background:  # explicitly public: it serves
        port = background.agent.metrics_server.port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert b"vkocr_serving" in reply.read()
