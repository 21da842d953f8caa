"""A full disk under the model store, for real: the agent runs as `vkocr serve` in a mount namespace of its own
whose store is a 1 MiB tmpfs (`unshare --mount`, with `--map-root-user` when the tests do not run as root, so it
needs no privilege where user namespaces are allowed). Uploads that do not fit are RESOURCE_EXHAUSTED, never
INVALID_ARGUMENT; nothing half-written stays (read through /proc/PID/root, the agent's view of its mounts); a
bundle that fits is stored next."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.agent.bundles.conftest import KeyPair
from vkocr.agent.bundles import bundle
from vkocr.agent.cli.bench_startup import ServeProcess
from vkocr.agent.fleet.rollout import upload_bundle, upload_id_for
from vkocr.agent.serving.client import OcrClient
from vkocr.v1 import models_pb2

STORE_BYTES = 1 << 20
CHUNK = 64 << 10


def unshare_command(mount_point: Path) -> list[str] | None:
    """The prefix that runs a command with a STORE_BYTES tmpfs on `mount_point`, or None when this machine
    cannot (no unshare, or user namespaces refused)."""
    if shutil.which("unshare") is None:
        return None
    prefix = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    script = f'mount -t tmpfs -o size={STORE_BYTES} tmpfs "{mount_point}" && exec "$@"'
    command = [*prefix, "sh", "-c", script, "sh"]
    probe = subprocess.run([*command, "true"], capture_output=True, text=True, timeout=30)
    return command if probe.returncode == 0 else None


def random_bundle(out: Path, version: str, key: KeyPair, image: Path, model_bytes: int) -> Path:
    """A signed bundle of three files of random (incompressible) bytes: storing it costs its full size."""
    rng = np.random.default_rng(len(version) + model_bytes)
    models = {}
    for role in ("det", "cls", "rec"):
        models[role] = out.parent / f"{version}-{role}.onnx"
        models[role].write_bytes(rng.integers(0, 256, model_bytes // 3, dtype=np.uint8).tobytes())
    bundle.create(models, "labels", version, out, self_tests=[(image, "LOT")], private_key=key.private)
    return out


@dataclass
class FullAgent:
    process: ServeProcess
    client: OcrClient
    store: Path  # the store as the agent sees it, through /proc/PID/root

    def leftovers(self) -> list[str]:
        return sorted(str(p.relative_to(self.store)) for d in ("uploads", "staging", "versions")
                      for p in (self.store / d).iterdir())


@pytest.fixture(scope="module")
def full_agent(tmp_path_factory: pytest.TempPathFactory, release_key: KeyPair) -> Iterator[FullAgent]:
    root = tmp_path_factory.mktemp("full-disk")
    store = root / "store"
    store.mkdir()
    prefix = unshare_command(store)
    if prefix is None:
        pytest.skip("cannot mount a tmpfs: needs `unshare` and root or unprivileged user namespaces")
    config = root / "agent.toml"
    config.write_text(f"""
[server]
listen = "127.0.0.1:0"
[device]
select = "llvmpipe"
[models]
store = "{store}"
trusted_keys = ["{release_key.public_path}"]
[auth]
dev_allow_loopback = true
[plans]
warm_shapes = []
[logging]
json = true
""")
    vkocr = Path(sys.executable).with_name("vkocr")
    process = ServeProcess([*prefix, str(vkocr), "serve", "--config", str(config)], dict(os.environ))
    try:
        port = process.port(time.monotonic() + 60)
        with OcrClient(f"127.0.0.1:{port}") as client:
            yield FullAgent(process, client, Path(f"/proc/{process.proc.pid}/root") / str(store).lstrip("/"))
    finally:
        process.stop(10)


def health_answers_fast(agent: FullAgent) -> None:
    started = time.monotonic()
    stub = health_pb2_grpc.HealthStub(agent.client.channel)
    answer = stub.Check(health_pb2.HealthCheckRequest(service="vkocr.liveness"), timeout=1)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING and time.monotonic() - started < 1.0


def test_the_agent_runs_on_the_small_store(full_agent: FullAgent) -> None:
    assert os.statvfs(full_agent.store).f_blocks * os.statvfs(full_agent.store).f_frsize == STORE_BYTES


def test_a_full_disk_while_uploading_is_resource_exhausted_and_leaves_nothing(
        full_agent: FullAgent, release_key: KeyPair, tmp_path: Path, selftest_image: Path) -> None:
    """Larger than the store: the upload itself fills it, and its bytes go (they hold the missing space)."""
    model_bytes = 3 * STORE_BYTES // 2
    path = random_bundle(tmp_path / "big.vkb", f"9.0.{model_bytes}", release_key, selftest_image, model_bytes)
    with pytest.raises(grpc.RpcError) as caught:
        upload_bundle(full_agent.client, path, chunk_bytes=CHUNK)
    err = caught.value
    assert err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, (err.code(), err.details())
    details = err.details() or ""
    assert "disk is full" in details and "writing bytes" in details
    assert "/store" not in details  # the board's paths stay on the board
    assert full_agent.leftovers() == []
    health_answers_fast(full_agent)


def test_a_full_disk_while_unpacking_keeps_the_upload_to_resume(
        full_agent: FullAgent, release_key: KeyPair, tmp_path: Path, selftest_image: Path) -> None:
    """The upload fits beside an operator's other files, its unpacking does not: RESOURCE_EXHAUSTED, nothing
    half-unpacked stays, and the complete upload does, so once space is freed it is stored without being sent
    again."""
    path = random_bundle(tmp_path / "mid.vkb", "9.1.0", release_key, selftest_image, 300 << 10)
    filler = full_agent.store / "filler"  # what an operator frees
    filler.write_bytes(bytes(500 << 10))
    try:
        with pytest.raises(grpc.RpcError) as caught:
            upload_bundle(full_agent.client, path, chunk_bytes=CHUNK)
        err = caught.value
        assert err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, (err.code(), err.details())
        assert "disk is full" in (err.details() or "") and "extracting version" in (err.details() or "")
        upload_id = upload_id_for(hashlib.sha256(path.read_bytes()).hexdigest())
        assert full_agent.leftovers() == [f"uploads/{upload_id}.json", f"uploads/{upload_id}.part"]
        held = full_agent.client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id=upload_id), timeout=5)
        assert held.received == held.total_size == path.stat().st_size
    finally:
        filler.unlink()
    # the bundle's bytes are not sent again: one empty chunk at its end stores what the agent holds
    resumed = full_agent.client.models.UploadBundle(iter([models_pb2.UploadBundleRequest(
        upload_id=upload_id, offset=held.received)]), timeout=60)
    assert resumed.version == "9.1.0"
    assert full_agent.leftovers() == ["versions/9.1.0"]
    full_agent.client.models.DeleteBundle(models_pb2.DeleteBundleRequest(version="9.1.0"), timeout=10)
    assert full_agent.leftovers() == []
    health_answers_fast(full_agent)


def test_after_a_full_disk_a_bundle_that_fits_is_stored(full_agent: FullAgent, release_key: KeyPair,
                                                        tmp_path: Path, selftest_image: Path) -> None:
    path = random_bundle(tmp_path / "small.vkb", "1.0.1", release_key, selftest_image, 90 << 10)
    stored = upload_bundle(full_agent.client, path, chunk_bytes=CHUNK)
    assert (stored.version, stored.sha256) == ("1.0.1", hashlib.sha256(path.read_bytes()).hexdigest())
    listed = full_agent.client.models.ListBundles(models_pb2.ListBundlesRequest(), timeout=10)
    assert [b.version for b in listed.bundles] == ["1.0.1"]
    assert full_agent.leftovers() == ["versions/1.0.1"]
    health_answers_fast(full_agent)
