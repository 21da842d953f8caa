"""`vkocr bench agent`: the agent as its clients see it, on a stream of distinct images. An in-process agent on a
loopback port; its clients in another process (one channel each, so their Python does not share the agent's
GIL). After one warm-up pass over every image (which records the plans and gives each image's expected
texts), every level sends every image exactly once, no image twice, from N clients: unary Recognize calls, or
one RecognizeStream per client with one frame in flight (a camera that sends the next frame once it has the
answer). Per level: answered images per second, the clients' p50/p99 latency, errors by status code, answers
whose texts are not their image's (mixed up), a stream's answers that carry another frame's request id
(reordered) and requests that got nothing back, the GPU's busy fraction (its timestamps over the
level's wall time, every stream's work counted once), the agent process's CPU time over wall time (cores in
use), and how many requests and crops each reading lane's batch held.

The runs: the default deployment; the same with cross-request batching off (`throughput.batch_requests = 1`:
each read holds one request), and with the overlap off (`experimental.overlap = false`: one lane runs each
request's every step, one request at a time, as the agent did before: what the lanes and the batching buy
together); with decode processes (`experimental.decode_processes`, half the cores up to 8: what decoding off the
agent's GIL buys); and with a
plugin chain (regex_fields, merge_lines). `runs` picks some of them. The images go as the files' bytes and PNGs
of the rendered ones, or, with `raw`, as decoded RGB pixels (a camera's frames: no decoding in the agent).
"""

from __future__ import annotations

import datetime as dt
import io
import multiprocessing
import os
import pickle
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vkocr.agent.cli.bench_agent_report import describe_flow, flow_keys, gain
from vkocr.agent.cli.bench_clients import client_process
from vkocr.agent.cli.bench_words import on_gpu
from vkocr.agent.cli.workspace import compat_images
from vkocr.agent.errors import AgentError

if TYPE_CHECKING:
    from vkocr.agent.serving.background import BackgroundAgent
    from vkocr.v1 import ocr_pb2

DEFAULT_CLIENTS = (1, 4, 16, 64)
MODES = ("unary", "stream")
MISMATCH = "WRONG_TEXTS"  # an answer whose texts are not its image's: counted with the errors
UNANSWERED = "NO_ANSWER"  # a request the clients sent (or meant to) that got neither an answer nor an error
MAX_PASSES = 10
CLIENT_START_S = 120.0  # the client process imports gRPC and connects every channel within this
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
    """One agent configuration whose levels are measured: the keys it changes ("section.key")."""

    name: str
    plugins: bool = False
    keys: tuple[tuple[str, Any], ...] = ()


RUNS = (
    AgentRun("default"),
    AgentRun("no batching", keys=(("throughput.batch_requests", 1),)),
    AgentRun("no overlap", keys=(("experimental.overlap", False),)),
    AgentRun("decode processes", keys=(("experimental.decode_processes", max(1, min(8, (os.cpu_count() or 2) // 2))),
                                       )),
    AgentRun("plugins", plugins=True),
)
RUN_KEYS = {"default": "default", "no-batching": "no batching", "no-overlap": "no overlap",
            "decode-processes": "decode processes", "plugins": "plugins"}  # --runs' names
RUN_NAMES = tuple(run.name for run in RUNS)


@dataclass(frozen=True)
class BenchImage:
    name: str
    data: bytes  # what a client sends: the file's bytes, or a PNG of a rendered image
    width: int
    height: int
    raw: bytes = b""  # with --raw, what a client sends instead: the decoded pixels, RGB8


def parse_clients(text: str) -> tuple[int, ...]:
    """``"1,4,16"`` → ``(1, 4, 16)``; argparse type of ``--clients``."""
    import argparse

    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected client counts such as 1,4,16") from None
    if not levels or min(levels) < 1 or max(levels) > 1024:
        raise argparse.ArgumentTypeError(f"{text!r}: client counts must be 1..1024")
    return levels


def parse_runs(text: str) -> tuple[str, ...]:
    """``"default,two-lanes"`` → those runs' names; argparse type of ``--runs``."""
    import argparse

    keys = tuple(part.strip() for part in text.split(",") if part.strip())
    if not keys or any(k not in RUN_KEYS for k in keys) or len(set(keys)) != len(keys):
        raise argparse.ArgumentTypeError(f"{text!r}: expected some of {', '.join(RUN_KEYS)}, comma-separated")
    return tuple(RUN_KEYS[k] for k in keys)


def parse_modes(text: str) -> tuple[str, ...]:
    """``"unary,stream"`` → ``("unary", "stream")``; argparse type of ``--modes``."""
    import argparse

    modes = tuple(part.strip() for part in text.split(",") if part.strip())
    if not modes or any(m not in MODES for m in modes) or len(set(modes)) != len(modes):
        raise argparse.ArgumentTypeError(f"{text!r}: expected {', '.join(MODES)} or both, comma-separated")
    return modes


def load_images(items: list[str], rendered: int, seed: int = 0, raw: bool = False) -> list[BenchImage]:
    """The stream `vkocr bench stream` reads: the files and folders given (none: RapidOCR's compat images),
    then `rendered` images of the varied set, each sent as a PNG, or with `raw` every image as its decoded RGB
    pixels."""
    from PIL import Image

    from vkocr.agent.cli.bench_stream import stream_paths
    from vkocr.agent.cli.stream_images import varied_images
    from vkocr.agent.ocr.images import decode_image

    compat = compat_images()
    paths = stream_paths(items if items else ([str(compat)] if compat.is_dir() else []))
    images = []
    for path in paths:
        data = Path(path).read_bytes()
        decoded = decode_image(data)
        height, width = decoded.shape[:2]
        images.append(BenchImage(Path(path).name, data, width, height, decoded.tobytes() if raw else b""))
    for name, pixels in varied_images(rendered, seed):
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, format="PNG")
        images.append(BenchImage(name, out.getvalue(), pixels.shape[1], pixels.shape[0],
                                 pixels.tobytes() if raw else b""))
    if not images:
        raise AgentError("no images: give IMAGE files or folders, or --rendered N")
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


def note(progress: bool, message: str) -> None:
    if progress:
        print(f"bench agent: {message}", file=sys.stderr, flush=True)


def run_agent_bench(device: str | None, images: list[BenchImage], *, clients: tuple[int, ...] = DEFAULT_CLIENTS,
                    modes: tuple[str, ...] = MODES, request_options: dict[str, Any] | None = None,
                    progress: bool = True, reference: bool = False, runs: tuple[str, ...] = RUN_NAMES,
                    passes: int = 1, precision: str | None = None) -> dict[str, Any]:
    """The runs of RUNS named in `runs`, in every mode, at every client count; each level sends every image once
    per pass, `passes` (1..10) passes. `precision`: the agents' device.precision (None: the configuration's).
    With `reference`, then the default model set's reference (RapidOCR, CPU) once over the same images in this
    process, one at a time: the single-process images/s an agent on the CPU backend is measured against."""
    from vkocr.agent.serving.background import start_agent
    from vkocr.agent.serving.config import load_config
    from vkocr.agent.serving.wire import options_to_proto

    if max(clients) > len(images):
        raise AgentError(f"{max(clients)} clients need at least as many distinct images, got {len(images)}: add "
                         "--rendered N")
    if not 1 <= passes <= MAX_PASSES:
        raise AgentError(f"passes must be 1..{MAX_PASSES}, got {passes}")
    request_options = dict(request_options or {})
    options = options_to_proto(**request_options) if request_options else None
    machine = machine_info()
    rows: list[dict[str, Any]] = []
    texts: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="vkocr-bench-agent-") as scratch:
        requests = Path(scratch) / "requests.pickle"  # what the client process sends, written once
        requests.write_bytes(pickle.dumps([request_for(image, str(k), options).SerializeToString()
                                           for k, image in enumerate(images)]))
        for run in (r for r in RUNS if r.name in runs):
            # no warm start: the warm-up below records the plans these images need, and no others
            # room for every client's channel beside the bench's own (the default, 64, refuses the 65th)
            overrides: dict[str, Any] = {"server.listen": "127.0.0.1:0", "plans.warm_shapes": [],
                                         "server.max_connections": max(clients) + 64}
            overrides.update(dict(run.keys))
            if device:
                overrides["device.select"] = device
            if precision is not None:
                overrides["device.precision"] = precision
            if run.plugins:
                overrides["ocr.plugins"] = list(PLUGINS)
                overrides["ocr.plugin_options"] = PLUGIN_OPTIONS
            config = load_config(None, env={}, overrides=overrides)
            note(progress, f"{run.name}: starting an agent ({describe_flow(config)})")
            background = start_agent(config)
            try:
                snapshot = background.agent.state.get()
                machine.update(device=snapshot.device, backend=snapshot.backend, precision=snapshot.precision,
                               precision_reason=snapshot.precision_reason)
                expected = warm_up(background, images, options, run.name, progress)
                texts.update({image.name: expected[k] for k, image in enumerate(images)})
                for mode in modes:
                    levels = []
                    for count in clients:
                        level = measure_level(background, requests, expected, count, mode, passes)
                        note(progress, f"{run.name}, {mode}: {count} clients: {level['ok']}/{level['requests']} "
                             f"answered, {level['images_per_s']:.2f} images/s, p50 {level['p50_ms']:.1f} ms, p99 "
                             f"{level['p99_ms']:.1f} ms" + (f", GPU busy {100 * level['gpu_busy_fraction']:.0f}%"
                                                             if on_gpu(machine.get("backend", "")) else ""))
                        levels.append(level)
                    rows.append({"name": f"{run.name}, {mode}", "run": run.name, "mode": mode,
                                 "server": flow_keys(config),
                                 "plugins": list(PLUGINS) if run.plugins else [], "levels": levels})
            finally:
                background.stop()
    baseline = reference_rate(images, progress) if reference else None
    if baseline is not None:
        for row in rows:
            for level in row["levels"]:
                level["ratio_to_reference"] = level["images_per_s"] / baseline["images_per_s"]
    headline = rows[0]["levels"]
    at_16 = [level for level in headline if level["clients"] == 16] or headline[-1:]
    return {
        "date": dt.date.today().isoformat(),
        "machine": machine,
        "images": len(images),
        "passes": passes,
        "image_list": [{"image": i.name, "size": f"{i.width}x{i.height}", "bytes": len(i.data),
                        "lines": len(texts.get(i.name, []))} for i in images],
        "request_options": request_options,
        "clients": list(clients),
        "modes": list(modes),
        "plugin_options": PLUGIN_OPTIONS,
        "levels": headline,  # the default deployment, the first mode: the headline figures
        "gpu_busy_fraction": at_16[0]["gpu_busy_fraction"],
        "runs": rows,
        "sent_as": "raw RGB8 pixels" if images and images[0].raw else "encoded files (PNG for the rendered)",
        "batching": gain(rows, "default", "no batching"),
        "overlap": gain(rows, "default", "no overlap"),
        "decode_processes": gain(rows, "decode processes", "default"),
        "reference": baseline,
    }


def reference_rate(images: list[BenchImage], progress: bool) -> dict[str, Any] | None:
    """The default model set's reference over `images` (decoded beforehand, not timed), one after another
    after one warm-up call: images per second over the whole set, and the median per image. None when its
    package is not installed (`pip install -e '.[test]'` brings it)."""
    from vkocr.agent.cli.bench_stream import run_reference, warm_image
    from vkocr.agent.cli.reference_ocr import reference_for
    from vkocr.agent.ocr.images import decode_image
    from vkocr.agent.ocr.model_sets import choose_models

    chosen = choose_models(None)
    found = reference_for(chosen.procedure, chosen.paths)
    if found is None:
        note(progress, f"no reference: the package for {chosen.procedure} is not installed")
        return None
    rows = run_reference(found, [(i.name, decode_image(i.data)) for i in images], warm_image(), progress)
    walls = [wall for wall, _ in rows]
    return {"label": found.label, "images_per_s": len(walls) / (sum(walls) / 1e3),
            "median_ms": statistics.median(walls)}


def request_for(image: BenchImage, request_id: str, options: ocr_pb2.Options | None) -> ocr_pb2.RecognizeRequest:
    from vkocr.v1 import ocr_pb2

    if image.raw:
        raw = ocr_pb2.RawImage(data=image.raw, height=image.height, width=image.width,
                               layout=ocr_pb2.PIXEL_LAYOUT_RGB8)
        return ocr_pb2.RecognizeRequest(request_id=request_id, raw=raw, options=options)
    return ocr_pb2.RecognizeRequest(request_id=request_id, encoded=image.data, options=options)


def warm_up(background: BackgroundAgent, images: list[BenchImage], options: ocr_pb2.Options | None, name: str,
            progress: bool) -> list[list[str]]:
    """Every detection lane records the det plans of every image's size (the worker held meanwhile), then one
    call per image, one at a time: the rest of the plans, and each image's texts (what every later answer for
    it must say); then, with several reading lanes, the same again from as many clients at once, so that each
    reading lane meets the line widths (the answers must agree). A failure stops the bench."""
    from vkocr.agent.serving.client import OcrClient
    from vkocr.agent.serving.plans import warm_pipeline

    worker = background.agent.worker
    sizes = sorted({(image.width, image.height) for image in images if image.width > 0 and image.height > 0})
    with worker.held():
        if worker.pipeline is not None and sizes:
            note(progress, f"{name}: recording the plans of {len(sizes)} image sizes on every lane")
            warm_pipeline(worker.pipeline, sizes)
    texts: list[list[str]] = []
    with OcrClient(background.target) as client:
        for k, image in enumerate(images, start=1):
            note(progress, f"{name}: warm-up {k}/{len(images)} {image.name}")
            response = client.ocr_stub.Recognize(request_for(image, f"warm-{k}", options))
            texts.append([line.text for line in response.lines])
    from vkocr.agent.serving.flow import lanes_for

    readers = lanes_for(worker.flow_settings, worker.pipeline)[1] if worker.pipeline is not None else 0
    if readers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with OcrClient(background.target) as client, ThreadPoolExecutor(readers) as pool:
            def again(k: int) -> list[str]:
                response = client.ocr_stub.Recognize(request_for(images[k], f"warm-again-{k}", options))
                return [line.text for line in response.lines]

            for k, read in enumerate(pool.map(again, range(len(images)))):
                if read != texts[k]:
                    raise AgentError(f"{images[k].name} read {read} in the concurrent warm-up, {texts[k]} before")
    return texts


def measure_level(background: BackgroundAgent, requests: Path, expected: list[list[str]], clients: int,
                  mode: str, passes: int = 1) -> dict[str, Any]:
    """One level: the client process connects, then sends every request once per pass (the passes follow one
    another, the clients' requests of one pass overlapping the next's start); meanwhile this process reads the
    GPU's busy time and its own CPU time."""
    from vkocr.agent.cli.bench_pipeline import percentile

    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no agent, no Vulkan, its own GIL
    ours, theirs = context.Pipe()
    process = context.Process(target=client_process,
                              args=(theirs, background.target, str(requests), clients, mode, passes),
                              name="vkocr-bench-clients", daemon=True)
    process.start()
    theirs.close()
    try:
        if not ours.poll(CLIENT_START_S) or ours.recv() != "ready":
            raise AgentError(f"the client process did not connect within {CLIENT_START_S:.0f} s")
        worker = background.agent.worker
        busy = worker.gpu_busy_seconds()
        batches = worker.read_batches()
        cpu = sum(os.times()[:2])
        # the busy and CPU times are over this process's own interval, which holds the clients' wall
        measured = time.perf_counter()
        ours.send("go")
        answers, wall = ours.recv()
        measured = time.perf_counter() - measured
        cpu = sum(os.times()[:2]) - cpu
        busy = worker.gpu_busy_seconds() - busy
        reads, requests_read, lines_read = (b - a for a, b in zip(batches, worker.read_batches(), strict=True))
    finally:
        ours.close()
        process.join(30)
        if process.is_alive():
            process.kill()
    expected = expected * passes  # an answer's index counts across the passes
    latencies: list[float] = []
    stages: list[dict[str, float]] = []
    errors: Counter[str] = Counter()
    error_messages: dict[str, str] = {}  # the first message of each code
    if len({a[0] for a in answers}) < len(expected):
        errors[UNANSWERED] = len(expected) - len({a[0] for a in answers})
    for index, took_ms, code, texts, timings in answers:
        if code is not None:
            errors[code] += 1
            error_messages.setdefault(code, (texts or [""])[0])
        elif texts != expected[index]:
            errors[MISMATCH] += 1
        else:
            latencies.append(took_ms)
            stages.append(timings)
    keys = sorted({key for s in stages for key in s}, key=lambda k: (k == "total", k))
    return {
        "clients": clients, "mode": mode, "passes": passes, "requests": len(expected), "ok": len(latencies),
        "errors": dict(errors), "error_messages": error_messages,
        "wall_s": wall, "images_per_s": len(latencies) / wall if wall > 0 else 0.0,
        "p50_ms": percentile(latencies, 50) if latencies else 0.0,
        "p99_ms": percentile(latencies, 99) if latencies else 0.0,
        "gpu_busy_fraction": busy / measured,
        "agent_cpu_cores": cpu / measured,
        "reads": reads, "requests_per_read": requests_read / reads if reads else 0.0,
        "lines_per_read": lines_read / reads if reads else 0.0,
        "server_median_ms": {k: statistics.median(s.get(k, 0.0) for s in stages) for k in keys},
    }
