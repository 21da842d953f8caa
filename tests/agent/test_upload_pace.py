"""An upload that trickles (a few bytes every fraction of its idle limit) is ended once a window of
`[models] upload_idle_s` brought less than `upload_min_bytes_per_s`, and its partial file is removed; a prompt
upload on the same agent is not. A real agent on loopback with an empty model store."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.agent.agents import agent_config
from tests.agent.bundles.conftest import make_keypair
from vkocr.agent.serving.background import BackgroundAgent, start_agent
from vkocr.agent.serving.client import OcrClient
from vkocr.v1 import models_pb2

MIN_RATE = 1000  # bytes/s, over windows of 1 s


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundAgent]:
    root = tmp_path_factory.mktemp("pace")
    key = make_keypair(root, "release")
    config = agent_config(**{"models.store": str(root / "store"), "models.trusted_keys": [str(key.public_path)],
                             "auth.dev_allow_loopback": True, "models.upload_idle_s": 1.0,
                             "models.upload_min_bytes_per_s": MIN_RATE})
    background = start_agent(config, wait_serving=False)
    try:
        yield background
    finally:
        background.stop(5)


def chunks(upload_id: str, data: bytes, size: int, pause_s: float) -> Iterator[models_pb2.UploadBundleRequest]:
    digest = hashlib.sha256(data).hexdigest()
    for offset in range(0, len(data), size):
        yield models_pb2.UploadBundleRequest(upload_id=upload_id, offset=offset, data=data[offset:offset + size],
                                             total_size=len(data) if offset == 0 else 0,
                                             sha256=digest if offset == 0 else "")
        time.sleep(pause_s)


def test_a_trickling_upload_is_ended_and_removed(agent: BackgroundAgent) -> None:
    data = bytes(range(256)) * 64  # 16 KiB: 64 chunks of 256 bytes, one every 0.3 s (about 850 bytes/s)
    uploads = Path(agent.agent.config.models.store) / "uploads"
    with OcrClient(agent.target) as client:
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            client.models.UploadBundle(chunks("trickle", data, 256, 0.3), timeout=30)
        assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED, caught.value.details()
        assert f"less than {MIN_RATE} bytes/s" in (caught.value.details() or "")
        assert time.monotonic() - started < 10  # ended after a window or two, not after the whole bundle (19 s)
        held = client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id="trickle"), timeout=5)
        assert (held.received, held.total_size) == (0, 0)
        assert list(uploads.iterdir()) == []
        # the same number of bytes, sent at a healthy pace, is no trickle (it is then refused as no bundle)
        with pytest.raises(grpc.RpcError) as caught:
            client.models.UploadBundle(chunks("prompt", data, 4096, 0.3), timeout=30)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
