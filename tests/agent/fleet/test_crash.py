"""An agent killed (SIGKILL) in the middle of an activation restarts on a consistent version: the store's
active pointer names a complete version, the agent serves exactly that one, and its text is that version's.

The agent runs as `vkocr serve --config FILE` in a subprocess; the test follows its JSON log on stderr and kills
it when the activation reaches its self-tests (the new models loaded on their own device, the old ones serving).
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import grpc

from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.conftest import Bundles
from tests.agent.fleet.fleet_agents import MAX_BUNDLE_BYTES, WORD, WORD_SWAPPED, read_word, seed_store
from tests.paths import ROOT
from vkocr.agent.fleet.rollout import upload_bundle
from vkocr.agent.serving.client import OcrClient
from vkocr.v1 import models_pb2

WAIT_S = 180.0


class ServeProcess:
    """`vkocr serve` in a subprocess, with its stdout lines and its JSON log events readable as they come."""

    def __init__(self, config: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "vkocr.agent.cli.main", "serve", "--config", str(config)],
                                     cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.output: list[str] = []
        self._readers = [threading.Thread(target=self._pump, args=(name, stream), daemon=True)
                         for name, stream in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr))]
        for reader in self._readers:
            reader.start()

    def _pump(self, name: str, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self.lines.put((name, line.rstrip("\n")))
        self.lines.put((name, None))

    def _next(self, timeout: float) -> tuple[str, str | None]:
        try:
            name, line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("the agent said nothing for too long:\n" + "\n".join(self.output[-30:])) from None
        if line is not None:
            self.output.append(line)
            if name == "stderr" and line.startswith("{"):
                self.seen.append(json.loads(line))
        return name, line

    def wait_for(self, event: str, **fields: Any) -> dict[str, Any]:
        """The next log event named `event` with these fields (events seen before are searched first)."""
        def matches(e: dict[str, Any]) -> bool:
            return e.get("event") == event and all(e.get(k) == v for k, v in fields.items())

        checked = 0
        ended = 0
        while True:
            for e in self.seen[checked:]:
                if matches(e):
                    return e
            checked = len(self.seen)
            _, line = self._next(WAIT_S)
            if line is None:
                ended += 1
                if ended == 2:
                    raise AssertionError(f"the agent ended before {event} {fields}:\n"
                                         + "\n".join(self.output[-30:]))

    def port(self) -> int:
        while True:
            for line in self.output:
                match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
                if match:
                    return int(match.group(1))
            self._next(WAIT_S)

    def kill(self) -> None:
        """SIGKILL, then read what it wrote before dying."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        for reader in self._readers:
            reader.join(10)
        while not self.lines.empty():
            self._next(0)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@contextmanager
def serving(config: Path) -> Iterator[ServeProcess]:
    process = ServeProcess(config)
    try:
        yield process
    finally:
        process.stop()


def write_config(path: Path, store: Path, key: KeyPair) -> Path:
    path.write_text(f"""\
[server]
listen = "127.0.0.1:0"

[device]
select = "llvmpipe"  # named: lavapipe is never chosen automatically

[models]
store = "{store.name}"
trusted_keys = ["{key.public_path}"]
max_bundle_bytes = {MAX_BUNDLE_BYTES}

[auth]
dev_allow_loopback = true

[plans]
warm_shapes = []  # seconds on lavapipe per model load, for det and cls plans the test never uses

[logging]
level = "info"
json = true
""")
    return path


def test_killed_during_activation_restarts_on_a_consistent_version(tmp_path: Path, release_key: KeyPair,
                                                                  bundles: Bundles) -> None:
    store = seed_store(tmp_path / "store", release_key, bundles.v1)
    config = write_config(tmp_path / "agent.toml", store.root, release_key)  # store path relative to the file

    with serving(config) as first:
        first.wait_for("state", state="SERVING", model_version="1.0.0")
        with OcrClient(f"127.0.0.1:{first.port()}") as client:
            assert upload_bundle(client, bundles.v2).version == "2.0.0"
            outcome: list[object] = []

            def activate() -> None:
                try:
                    outcome.append(client.models.Activate(models_pb2.ActivateRequest(version="2.0.0"), timeout=300))
                except grpc.RpcError as err:
                    outcome.append(err.code())

            caller = threading.Thread(target=activate)
            caller.start()
            first.wait_for("activation_step", step="self_tests", version="2.0.0")
            first.kill()
            caller.join(60)
    assert outcome == [grpc.StatusCode.UNAVAILABLE]  # the agent died under the call
    steps = [e["step"] for e in first.seen if e.get("event") == "activation_step" and e.get("version") == "2.0.0"]
    assert steps[:3] == ["verify", "load", "self_tests"]
    active = (store.root / "active").read_text().strip()
    if "swap" not in steps:  # killed before the swap: the old version is the active one, whole
        assert active == "1.0.0"
    else:  # the kill came later than asked (a very slow machine): either version, as long as it is whole
        assert active in ("1.0.0", "2.0.0")
    assert (store.root / "versions" / active / ".installed.json").is_file()
    expected = (active, WORD if active == "1.0.0" else WORD_SWAPPED)
    with serving(config) as second:
        second.wait_for("state", state="SERVING")
        with OcrClient(f"127.0.0.1:{second.port()}") as client:
            listed = client.models.ListBundles(models_pb2.ListBundlesRequest(), timeout=30)
            assert listed.active_version == expected[0]
            assert sorted(b.version for b in listed.bundles) == ["1.0.0", "2.0.0"]  # the upload survived too
            assert read_word(client, WORD) == (expected[1], expected[0])
            assert client.status(timeout=10).model_version == expected[0]
            # And the interrupted activation can simply be done again.
            done = client.models.Activate(models_pb2.ActivateRequest(version="2.0.0"), timeout=300)
            assert done.active_version == "2.0.0"
            assert read_word(client, WORD) == (WORD_SWAPPED, "2.0.0")
    assert not list((store.root / "staging").iterdir())
    assert os.path.getsize(store.root / "active") > 0
