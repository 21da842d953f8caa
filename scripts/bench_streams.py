"""How much GPU work of one device context runs at once on several streams (vk/streams.py), and how fast the host
decodes the stream's PNGs on several threads: the two figures the agent's throughput design rests on.

For each model (det, rec, cls of the default set) and each stream count S: S threads, each replaying its own
plan of the model (its own sibling model on its own stream: vk/graph/model.py on_stream) back to back for a
fixed time; replays per second in all, the median replay's wall time, and the GPU busy fraction (the union of
the recordings' timestamps over wall time). Then S det and S rec threads at once. Then PNG decoding (Pillow) of
the varied rendered set on T threads: images per second.

    python scripts/bench_streams.py [--device SEL] [--seconds 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

SHAPES = {"det": (1, 3, 736, 1024), "rec": (8, 3, 48, 320), "cls": (16, 3, 48, 192)}


def replay_loop(plan: Any, x: np.ndarray, stop: threading.Event, times: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        plan.submit(x)
        plan.wait()
        times.append(time.perf_counter() - started)


def concurrent(device: Any, work: list[tuple[Any, np.ndarray]], seconds: float) -> dict[str, Any]:
    """Replay every (plan, input) on its own thread for `seconds`."""
    stop = threading.Event()
    times: list[list[float]] = [[] for _ in work]
    threads = [threading.Thread(target=replay_loop, args=(plan, x, stop, t)) for (plan, x), t in zip(work, times)]
    busy = device.gpu_busy_seconds
    started = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    every = [x for t in times for x in t]
    return {"replays_per_s": round(len(every) / wall, 1), "median_ms": round(statistics.median(every) * 1e3, 3),
            "per_thread": [len(t) for t in times],
            "gpu_busy_fraction": round((device.gpu_busy_seconds - busy) / wall, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--streams", default="1,2,3,4,6")
    parser.add_argument("--decode-threads", default="1,4,8,12,16")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.engine.device import Device
    from vkocr.engine.graph.model import Model

    counts = [int(s) for s in args.streams.split(",")]
    device = Device(args.device, queues=max(counts) * 2)
    print(f"device {device.info.name}: {device.queue_count} queues in family {device.queue_family}")
    paths = choose_models(None, None).paths
    rng = np.random.default_rng(0)
    results: dict[str, Any] = {"device": device.info.name, "queues": device.queue_count, "models": {}}
    models = {role: Model.load(paths[role], device) for role in SHAPES}
    siblings = {role: [m] + [m.on_stream(device.stream(k)) for k in range(1, 2 * max(counts))]
                for role, m in models.items()}
    inputs = {role: rng.standard_normal(shape).astype(np.float32) for role, shape in SHAPES.items()}
    for role, shape in SHAPES.items():
        rows = {}
        for s in counts:
            work = [(m.plan(shape), inputs[role]) for m in siblings[role][:s]]
            for plan, x in work:
                plan.run(x)
            concurrent(device, work, 0.3)  # clocks up
            rows[s] = concurrent(device, work, args.seconds)
            print(f"{role} {shape}: {s} streams {rows[s]}")
        results["models"][role] = rows
    mixed = {}
    for s in counts:
        work = ([(m.plan(SHAPES["det"]), inputs["det"]) for m in siblings["det"][:s]]
                + [(m.plan(SHAPES["rec"]), inputs["rec"]) for m in siblings["rec"][s:2 * s]])
        concurrent(device, work, 0.3)
        mixed[s] = concurrent(device, work, args.seconds)
        print(f"det+rec: {s}+{s} streams {mixed[s]}")
    results["det_and_rec"] = mixed
    for role in SHAPES:
        for m in reversed(siblings[role]):
            m.close()
    device.close()

    from PIL import Image

    from vkocr.agent.cli.stream_images import varied_images

    pngs = []
    for _name, pixels in varied_images(32, 0):
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, format="PNG")
        pngs.append(out.getvalue())

    def decode(data: bytes) -> int:
        with Image.open(io.BytesIO(data)) as im:
            return int(np.asarray(im.convert("RGB")).size)

    decode_rows = {}
    for threads in [int(t) for t in args.decode_threads.split(",")]:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(decode, pngs[:threads]))
            started, done = time.perf_counter(), 0
            while time.perf_counter() - started < args.seconds:
                list(pool.map(decode, pngs))
                done += len(pngs)
            rate = done / (time.perf_counter() - started)
        decode_rows[threads] = round(rate, 1)
        median_mb = statistics.median(map(len, pngs)) / 1e6
        print(f"PNG decode, {threads} threads: {rate:.1f} images/s (median PNG {median_mb:.2f} MB)")
    results["png_decode_images_per_s"] = decode_rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
