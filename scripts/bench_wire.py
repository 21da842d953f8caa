"""What the agent's request path costs under the GIL for one raw frame before the OCR: parsing the message, its
size for the log line, and its pixels as an array; the way the agent does it against the way it did before
session 25 (ByteSize(), which encodes the message again, and three reads of `raw.data`, each a copy).

    python scripts/bench_wire.py [--json OUT] [--height H] [--width W]

Median ms of 30 runs of each, twice. The before path allocates two more frame-sized buffers, so its cost depends
on whether the allocator hands out pages already faulted in (MALLOC_MMAP_THRESHOLD_ decides it for glibc).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from vkocr.agent.serving.malformed import lenient, wire_size
from vkocr.agent.serving.wire import image_from_proto
from vkocr.v1 import ocr_pb2


def median_ms(f: Callable[[], object], runs: int = 30) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        f()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--width", type=int, default=1920)
    args = parser.parse_args()
    pixels = np.random.default_rng().integers(0, 256, (args.height, args.width, 3), np.uint8).tobytes()
    raw = ocr_pb2.RawImage(data=pixels, height=args.height, width=args.width, layout=ocr_pb2.PIXEL_LAYOUT_RGB8)
    data = ocr_pb2.RecognizeRequest(request_id="r", raw=raw).SerializeToString()
    parse = lenient(ocr_pb2.RecognizeRequest.FromString)

    def before() -> None:
        request = parse(data)
        request.ByteSize()
        raw = request.raw
        if raw.data and len(raw.data) == len(pixels):
            np.frombuffer(raw.data, np.uint8)

    def after() -> None:
        request = parse(data)
        wire_size(request)
        image_from_proto(request, 10**9)

    rounds = [{"before_ms": median_ms(before), "after_ms": median_ms(after)} for _ in range(2)]
    for r in rounds:
        print(f"{args.width}x{args.height} RGB8 frame: before {r['before_ms']:.3f} ms, after {r['after_ms']:.3f} ms")
    if args.json:
        args.json.write_text(json.dumps({"frame": [args.height, args.width, 3], "rounds": rounds}, indent=1))


if __name__ == "__main__":
    main()
