"""`vkocr bench agent`: the agent as its clients see it. An in-process agent on a loopback port, N concurrent
gRPC clients (one channel each) sending unary Recognize calls: throughput (answered images per second) and the
clients' p50/p99 latency at each client count, after one warm-up pass over every image (which records the
plans).

Then what the CPU/GPU overlap buys: the same levels against an agent whose deployment runs a plugin chain
(regex_fields, merge_lines), once with `server.overlap = true` (plugins on the postprocessing threads, beside
the next request's device stages) and once with `false` (plugins on the GPU worker). The default deployment
has no plugins, so there the switch changes nothing.

The clients share the agent's process (and its GIL); the numbers are the agent's plus that client cost.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vkocr.agent.cli.workspace import compat_images
from vkocr.agent.errors import AgentError

if TYPE_CHECKING:
    from vkocr.agent.serving.client import OcrClient
    from vkocr.agent.serving.server import BackgroundAgent
    from vkocr.v1 import ocr_pb2

DEFAULT_CLIENTS = (1, 4, 16)
PLUGINS = ("regex_fields", "merge_lines")
PLUGIN_OPTIONS: dict[str, Any] = {  # fields a label reader would pull out of the lines, then paragraphs
    "regex_fields": {
        "lot": r"(?:LOT|批号)\s*([A-Z0-9][A-Z0-9-]*)",
        "dates": {"pattern": r"(\d{4}-\d{2}-\d{2})", "type": "date", "all": True},
        "weights": {"pattern": r"(\d+(?:[.,]\d+)?)\s*k?g\b", "type": "float", "all": True,
                    "ignore_case": True},
        "serial": r"Serial No\.?\s*([\d-]+)",
    },
    "merge_lines": {},
}


@dataclass(frozen=True)
class AgentRun:
    """One agent configuration whose levels are measured."""

    name: str
    overlap: bool
    plugins: bool


RUNS = (
    AgentRun("default", overlap=True, plugins=False),
    AgentRun("plugins, overlap on", overlap=True, plugins=True),
    AgentRun("plugins, overlap off", overlap=False, plugins=True),
)


@dataclass(frozen=True)
class BenchImage:
    name: str
    data: bytes  # what a client sends: the file's bytes, or a PNG of a rendered page
    width: int
    height: int


def parse_clients(text: str) -> tuple[int, ...]:
    """``"1,4,16"`` → ``(1, 4, 16)``; argparse type of ``--clients``."""
    import argparse

    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected client counts such as 1,4,16") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: client counts must be positive")
    return levels


def load_images(paths: list[str], pages: int) -> list[BenchImage]:
    """The given files (default: RapidOCR's compat images) plus `pages` rendered A4 pages."""
    from PIL import Image

    from vkocr.agent.cli.bench_pipeline import rendered_pages
    from vkocr.agent.ocr.images import decode_image

    compat = compat_images()
    if not paths and compat.is_dir():
        paths = sorted(str(p) for p in compat.iterdir() if p.suffix.lower() in (".jpg", ".png"))
    images = []
    for path in paths:
        data = Path(path).read_bytes()
        height, width = decode_image(data).shape[:2]
        images.append(BenchImage(Path(path).name, data, width, height))
    for name, pixels in rendered_pages(pages):
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, format="PNG")
        images.append(BenchImage(name, out.getvalue(), pixels.shape[1], pixels.shape[0]))
    if not images:
        raise AgentError(f"no images: give IMAGE files or --pages N ({compat} has none)")
    return images


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import grpc

    return {"cpu": cpu, "cores": os.cpu_count(), "os": platform.platform(),
            "python": platform.python_version(), "grpc": grpc.__version__}


def run_agent_bench(device: str | None, images: list[BenchImage], *,
                    clients: tuple[int, ...] = DEFAULT_CLIENTS, requests: int = 64,
                    request_options: dict[str, Any] | None = None, progress: bool = True) -> dict[str, Any]:
    """Every run of RUNS at every client count; `requests` calls per count (at least one per client)."""
    from vkocr.agent.serving.config import load_config
    from vkocr.agent.serving.server import start_agent
    from vkocr.agent.serving.wire import options_to_proto

    request_options = dict(request_options or {})
    options = options_to_proto(**request_options) if request_options else None
    machine = machine_info()
    rows: list[dict[str, Any]] = []
    lines: dict[str, int] = {}
    for run in RUNS:
        # no warm start: the warm-up pass below records the plans these images need, and no others
        overrides: dict[str, Any] = {"server.listen": "127.0.0.1:0", "server.overlap": run.overlap,
                                     "plans.warm_shapes": []}
        if device:
            overrides["device.select"] = device
        if run.plugins:
            overrides["ocr.plugins"] = list(PLUGINS)
            overrides["ocr.plugin_options"] = PLUGIN_OPTIONS
        note(progress, f"{run.name}: starting an agent (overlap {'on' if run.overlap else 'off'})")
        background = start_agent(load_config(None, env={}, overrides=overrides))
        try:
            snapshot = background.agent.state.get()
            machine.update(device=snapshot.device, backend=snapshot.backend)
            lines.update(warm_up(background, images, options, run.name, progress))
            levels = []
            for count in clients:
                level = measure_level(background.target, images, options, count, max(requests, count))
                note(progress, f"{run.name}: {count} clients: {level['ok']}/{level['requests']} answered, "
                     f"{level['images_per_s']:.2f} images/s, p50 {level['p50_ms']:.1f} ms, "
                     f"p99 {level['p99_ms']:.1f} ms")
                levels.append(level)
        finally:
            background.stop()
        rows.append({"name": run.name, "overlap": run.overlap,
                     "plugins": list(PLUGINS) if run.plugins else [], "levels": levels})
    return {
        "date": dt.date.today().isoformat(),
        "machine": machine,
        "images": [{"image": i.name, "size": f"{i.width}x{i.height}", "bytes": len(i.data),
                    "lines": lines.get(i.name)} for i in images],
        "request_options": request_options,
        "requests_per_level": requests,
        "clients": list(clients),
        "plugin_options": PLUGIN_OPTIONS,
        "runs": rows,
        "overlap": overlap_gain(rows),
    }


def note(progress: bool, message: str) -> None:
    if progress:
        print(f"bench agent: {message}", file=sys.stderr, flush=True)


def request_for(image: BenchImage, request_id: str,
                options: ocr_pb2.Options | None) -> ocr_pb2.RecognizeRequest:
    from vkocr.v1 import ocr_pb2

    return ocr_pb2.RecognizeRequest(request_id=request_id, encoded=image.data, options=options)


def warm_up(background: BackgroundAgent, images: list[BenchImage], options: ocr_pb2.Options | None, name: str,
            progress: bool) -> dict[str, int]:
    """One call per image, one at a time: plans recorded, line counts known. A failure stops the bench."""
    from vkocr.agent.serving.client import OcrClient

    lines = {}
    with OcrClient(background.target) as client:
        for k, image in enumerate(images, start=1):
            note(progress, f"{name}: warm-up {k}/{len(images)} {image.name}")
            response = client.ocr_stub.Recognize(request_for(image, f"warm-{k}", options))
            lines[image.name] = len(response.lines)
    return lines


def measure_level(target: str, images: list[BenchImage], options: ocr_pb2.Options | None, clients: int,
                  requests: int) -> dict[str, Any]:
    """`clients` threads, one channel each, take the next of `requests` calls (images in turn) until none is
    left. Latency is each call's wall time at its client; throughput is answered calls over the level's wall
    time, from a common start."""
    import grpc

    from vkocr.agent.cli.bench_pipeline import percentile
    from vkocr.agent.serving.client import OcrClient
    from vkocr.agent.serving.durations import ms_of

    prepared = [request_for(images[k % len(images)], f"r{k}", options) for k in range(requests)]
    order = itertools.count()
    take = threading.Lock()
    start = threading.Barrier(clients + 1)
    latencies: list[float] = []
    stages: list[dict[str, float]] = []
    errors: dict[str, int] = {}
    record = threading.Lock()

    def client_loop(client: OcrClient) -> None:
        start.wait()
        while True:
            with take:
                k = next(order)
            if k >= requests:
                return
            began = time.perf_counter()
            try:
                response = client.ocr_stub.Recognize(prepared[k])
            except grpc.RpcError as err:
                with record:
                    name = err.code().name if isinstance(err, grpc.Call) else "UNKNOWN"
                    errors[name] = errors.get(name, 0) + 1
                continue
            took = (time.perf_counter() - began) * 1e3
            with record:
                latencies.append(took)
                stages.append({stage: ms_of(spent) for stage, spent in response.timings.items()})

    channels = [OcrClient(target) for _ in range(clients)]
    try:
        for client in channels:
            client.health(timeout=60)  # connected before the clock starts
        wall = run_clients(channels, client_loop, start)
    finally:
        for client in channels:
            client.close()
    keys = sorted({key for s in stages for key in s}, key=lambda k: (k == "total", k))
    return {
        "clients": clients, "requests": requests, "ok": len(latencies), "errors": errors, "wall_s": wall,
        "images_per_s": len(latencies) / wall if wall > 0 else 0.0,
        "p50_ms": percentile(latencies, 50) if latencies else 0.0,
        "p99_ms": percentile(latencies, 99) if latencies else 0.0,
        "server_median_ms": {k: statistics.median(s.get(k, 0.0) for s in stages) for k in keys},
    }


def run_clients(channels: list[OcrClient], loop: Callable[[OcrClient], None], start: threading.Barrier) -> float:
    """One thread per client, released together; the seconds until the last one is done."""
    threads = [threading.Thread(target=loop, args=(c,), daemon=True) for c in channels]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began


def overlap_gain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Throughput with the overlap on against off, per client count (the plugin-chain runs)."""
    by_name = {row["name"]: row for row in rows}
    on, off = by_name.get("plugins, overlap on"), by_name.get("plugins, overlap off")
    if on is None or off is None:
        return []
    out = []
    for a, b in zip(on["levels"], off["levels"], strict=True):
        ratio = a["images_per_s"] / b["images_per_s"] if b["images_per_s"] else None
        out.append({"clients": a["clients"], "on_images_per_s": a["images_per_s"],
                    "off_images_per_s": b["images_per_s"], "on_p50_ms": a["p50_ms"],
                    "off_p50_ms": b["p50_ms"], "throughput_ratio": ratio})
    return out


def format_agent_results(r: dict[str, Any]) -> str:
    m = r["machine"]
    what = ", ".join(f"{k}={v}" for k, v in r["request_options"].items()) or "whole pipeline"
    header = (f"{'run':<22} {'clients':>7} {'answered':>8} {'errors':>6} {'images/s':>9} {'p50 ms':>9} "
              f"{'p99 ms':>9} {'queue ms':>9} {'plugins ms':>10}")
    device = f"{m.get('device', '?')} ({m.get('backend', '?')})"
    lines = [f"machine: {m['cpu']} ({m['cores']} cores); device: {device}",
             (f"images: {len(r['images'])} ({', '.join(i['image'] for i in r['images'])}); {what}; "
              f"{r['requests_per_level']} requests per level"),
             header]
    for row in r["runs"]:
        for level in row["levels"]:
            server = level["server_median_ms"]
            errors = sum(level["errors"].values())
            lines.append(
                f"{row['name']:<22} {level['clients']:>7} {level['ok']:>8} {errors:>6} "
                f"{level['images_per_s']:>9.2f} {level['p50_ms']:>9.1f} {level['p99_ms']:>9.1f} "
                f"{server.get('queue', 0.0):>9.1f} {server.get('plugins', 0.0):>10.2f}")
    if r["overlap"]:
        lines.append(f"overlap with plugins {', '.join(PLUGINS)} (throughput, on ÷ off):")
        for g in r["overlap"]:
            head = f"  {g['clients']:>3} clients: "
            lines.append(head + (f"{g['on_images_per_s']:.2f} vs {g['off_images_per_s']:.2f} images/s = "
                                 f"{g['throughput_ratio']:.2f}x" if g["throughput_ratio"] else
                                 "no answers with the overlap off"))
    return "\n".join(lines)
