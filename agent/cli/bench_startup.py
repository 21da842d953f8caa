"""`vkocr bench startup`: how long `vkocr serve` takes from process start to SERVING, and to its first answer.

Each run spawns `python -m vkocr.agent.cli.main serve --listen 127.0.0.1:0` as a fresh process with the Vulkan
pipeline cache in a given folder (VKOCR_CACHE_DIR, vk/pipeline_cache.py), reads the port from its first line of
output, polls grpc.health.v1 until SERVING, sends one Recognize of the image with the real client
(agent/serving/client.py), then a second of the same image, and stops the agent with SIGTERM (the cache is
saved when the device closes). Two runs: `cold` with an empty cache folder (every compute pipeline compiled),
then `cached` with the cache the first run left. What `[plans] warm_shapes` records before SERVING shows in
the `plans_warmed` event each run reports.

Times are from just before the process is spawned: Python's start-up and imports, the device, the models,
pipeline creation and warm-up, and for the answer the plans its shapes still needed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from vkocr.agent.cli.errors import StartupBenchError

RUNS = ("cold", "cached")
LISTENING = re.compile(r"^vkocr agent listening on (\S+):(\d+) \(([^)]*)\)")
POLL_S = 0.02
EVENTS = ("device_opened", "pipeline_cache_rejected", "plans_warmed", "plan_warm_failed", "plan_warm_stopped")


class ServeProcess:
    """`vkocr serve` as a child process, its stdout lines and its JSON log events collected as they come."""

    def __init__(self, command: list[str], env: dict[str, str], *, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, encoding="utf-8", errors="replace")
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True)
                         for stream, lines in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str] | None, lines: list[str]) -> None:
        assert stream is not None
        for line in stream:
            lines.append(line.rstrip("\n"))

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines on stderr so far (the agent logs one JSON object per line)."""
        found = []
        for line in list(self.stderr):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                found.append(event)
        return found

    def port(self, deadline: float) -> int:
        """The port of the `listening on HOST:PORT (plaintext)` line; StartupBenchError for TLS or no line."""
        while time.monotonic() < deadline:
            for line in list(self.stdout):
                match = LISTENING.match(line)
                if match:
                    if match[3] != "plaintext":
                        raise StartupBenchError(f"the agent listens with {match[3]}; the startup bench speaks "
                                                "plaintext on loopback only (a config without [tls])")
                    return int(match[2])
            if self.proc.poll() is not None:
                break
            time.sleep(POLL_S)
        raise StartupBenchError(f"the agent did not say where it listens (exit status {self.proc.poll()}): "
                                + self.tail())

    def tail(self) -> str:
        return " | ".join((self.stdout + self.stderr)[-12:])

    def stop(self, timeout: float) -> int:
        """SIGTERM (it drains, closes the device and saves the pipeline cache), then wait; kill after timeout."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(30)
        for reader in self._readers:
            reader.join(5)
        return code


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def serve_command(config: Path | None, device: str | None) -> list[str]:
    command = [sys.executable, "-m", "vkocr.agent.cli.main", "serve", "--listen", "127.0.0.1:0"]
    if config is not None:
        command += ["--config", str(config)]
    if device:
        command += ["--device", device]
    return command


def startup_run(name: str, image: Path, cache_dir: Path, *, config: Path | None, device: str | None,
                warm_shapes: str | None, timeout_s: float) -> dict[str, Any]:
    """One fresh agent process: ms to listening, to SERVING, to the first and the second answer."""
    from vkocr.agent.serving.client import OcrClient
    from vkocr.agent.serving.proto_enums import shown_name
    from vkocr.v1 import status_pb2

    env = {**os.environ, "VKOCR_CACHE_DIR": str(cache_dir), "VKOCR_LOGGING_JSON": "true",
           "VKOCR_LOGGING_LEVEL": "info"}  # the JSON events this bench reads
    if warm_shapes is not None:
        env["VKOCR_PLANS_WARM_SHAPES"] = warm_shapes
    cache_before = folder_bytes(cache_dir)
    started = time.perf_counter()
    deadline = time.monotonic() + timeout_s

    def ms() -> float:
        return round((time.perf_counter() - started) * 1e3, 1)

    process = ServeProcess(serve_command(config, device), env)
    result: dict[str, Any] = {"name": name, "cache_bytes_before": cache_before}
    try:
        port = process.port(deadline)
        result["listening_ms"] = ms()
        with OcrClient(f"127.0.0.1:{port}") as client:
            while True:
                try:
                    if client.health(timeout=1.0) == "SERVING":
                        break
                except Exception:  # noqa: BLE001 - not answering yet is what is being waited for
                    pass
                if process.proc.poll() is not None or time.monotonic() > deadline:
                    raise StartupBenchError(f"{name}: the agent did not reach SERVING within {timeout_s:.0f} s "
                                            f"(exit status {process.proc.poll()}): {process.tail()}")
                time.sleep(POLL_S)
            result["serving_ms"] = ms()
            left = max(1.0, deadline - time.monotonic())
            first = client.recognize(image, request_id="first", timeout=left)
            result["first_answer_ms"] = ms()
            result["first_request_ms"] = round(result["first_answer_ms"] - result["serving_ms"], 1)
            clock = time.perf_counter()
            client.recognize(image, request_id="second", timeout=left)
            result["second_request_ms"] = round((time.perf_counter() - clock) * 1e3, 1)
            result["lines"] = len(first.lines)
            result["device"] = first.device
            status = client.status(timeout=5.0)
            result["plans"] = {shown_name(status_pb2.ModelKind, m.model): {
                "plans": m.plans, "recorded_total": m.recorded_total, "plan_memory_bytes": m.plan_memory_bytes,
            } for m in status.plans}
    finally:
        result["exit_status"] = process.stop(60.0)
    result["cache_bytes_after"] = folder_bytes(cache_dir)
    result["events"] = [{k: v for k, v in e.items() if k not in ("logger", "level", "timestamp")}
                        for e in process.events() if e.get("event") in EVENTS]
    return result


def run_startup_bench(image: Path, *, cache_dir: Path | None = None, config: Path | None = None,
                      device: str | None = None, warm_shapes: str | None = None, timeout_s: float = 600.0,
                      progress: bool = True) -> dict[str, Any]:
    """The cold run (empty `cache_dir`; default: a new temporary folder) and the run with its cache."""
    if not image.is_file():
        raise StartupBenchError(f"no image file {image}")
    with tempfile.TemporaryDirectory(prefix="vkocr-startup-") as scratch:
        folder = cache_dir or Path(scratch) / "pipeline-cache"
        if folder.exists() and any(folder.iterdir()):
            raise StartupBenchError(f"{folder} is not empty: the cold run needs an empty pipeline-cache folder")
        folder.mkdir(parents=True, exist_ok=True)
        runs = []
        for name in RUNS:
            note(progress, f"{name}: starting `vkocr serve` (pipeline cache {folder}, "
                 f"{folder_bytes(folder)} bytes)")
            run = startup_run(name, image, folder, config=config, device=device, warm_shapes=warm_shapes,
                              timeout_s=timeout_s)
            note(progress, f"{name}: SERVING after {run['serving_ms']:.0f} ms, first answer after "
                 f"{run['first_answer_ms']:.0f} ms")
            runs.append(run)
    return {"date": dt.date.today().isoformat(), "image": str(image), "config": str(config) if config else None,
            "warm_shapes": warm_shapes, "cache_dir": str(cache_dir) if cache_dir else "(temporary)", "runs": runs}


def format_startup_results(results: dict[str, Any]) -> str:
    shapes = results["warm_shapes"]
    rows = [f"image {results['image']}  warm_shapes "
            f"{'(as configured)' if shapes is None else shapes or '[] (no warm-up)'}"]
    for run in results["runs"]:
        warmed = next((e for e in run["events"] if e.get("event") == "plans_warmed"), None)
        warm = f"  warm-up {warmed['count']} plans in {warmed['ms']:.0f} ms" if warmed else "  no warm-up"
        rows.append(f"{run['name']:>6}: listening {run['listening_ms']:.0f} ms  SERVING {run['serving_ms']:.0f} ms  "
                    f"first answer {run['first_answer_ms']:.0f} ms (request {run['first_request_ms']:.0f} ms, "
                    f"second {run['second_request_ms']:.0f} ms){warm}  cache {run['cache_bytes_before']} → "
                    f"{run['cache_bytes_after']} bytes")
    return "\n".join(rows)


def note(progress: bool, message: str) -> None:
    if progress:
        print(f"bench startup: {message}", file=sys.stderr, flush=True)
