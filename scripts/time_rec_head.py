#!/usr/bin/env python3
"""GPU time of the recogniser's head on one device: its epilogue (Softmax then ArgMax, against ArgMax of the
softmax from the logits, agent/ocr/rec_logits.py) on PP-OCRv6's 18,710 classes, and the CTC head's MatMul (rows ×
120 @ 120 × 18,710) under every SIMT tile, at the batches real traffic reads (rows = lines × 40 time steps at
320 px). Medians of the timed replays, in µs; lavapipe runs it too, but only NVIDIA's figures mean anything.

    python scripts/time_rec_head.py [--device SEL] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from vkocr.engine.bench import time_replays
from vkocr.engine.device import Device
from vkocr.engine.kernels.matmul import GemmTile, pick_tile, record_matmul
from vkocr.engine.kernels.reduce import record_argmax, record_softmax
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

CLASSES = 18_710  # PP-OCRv6 rec's
DIMS = 120  # the features each time step's classifier reads
EPILOGUE_SHAPES = [(1, 40), (6, 40), (6, 80), (16, 40)]  # (lines, time steps)
MATMUL_ROWS = [40, 240, 480, 640]
TILES: dict[str, str | GemmTile] = {
    **{name: name for name in ("large", "wide", "small", "thin")},
    "wide16": GemmTile(64, 128, 16, 4, 8), "thin16": GemmTile(32, 128, 16, 4, 4),
    "tall16": GemmTile(128, 64, 16, 8, 4), "wide88": GemmTile(64, 128, 8, 8, 8),
}
ROUNDS = 30  # timed replays per variant


def median_us(device: Device, record: Callable[[Recorder], None]) -> dict[str, float]:
    """Each dispatch's median GPU µs over ROUNDS replays, by label, and their total."""
    per: defaultdict[str, list[float]] = defaultdict(list)
    for t in time_replays(device, record, 1, ROUNDS):
        per[t.label].append(t.ms * 1000)
    out = {label: round(float(np.median(v)), 2) for label, v in per.items()}
    out["total"] = round(sum(out.values()), 2)
    return out


def softmax_then_argmax(rec: Recorder, x: Tensor, probs: Tensor, idx: Tensor, val: Tensor) -> None:
    record_softmax(rec, x, probs, -1)
    record_argmax(rec, probs, idx, val, -1)


def argmax_of_the_softmax(rec: Recorder, x: Tensor, idx: Tensor, val: Tensor) -> None:
    record_argmax(rec, x, idx, val, -1, softmax=True)


def epilogues(device: Device) -> dict[str, Any]:
    found = {}
    for lines, steps in EPILOGUE_SHAPES:
        shape = (lines, steps, CLASSES)
        x = device.upload((np.random.default_rng(lines * steps).standard_normal(shape) * 4).astype(np.float32))
        probs, idx, val = device.tensor(shape), device.tensor(shape[:2], np.int32), device.tensor(shape[:2])
        found[f"{lines}x{steps}x{CLASSES}"] = row = {
            "softmax then argmax": median_us(device, partial(softmax_then_argmax, x=x, probs=probs, idx=idx, val=val)),
            "argmax of the softmax": median_us(device, partial(argmax_of_the_softmax, x=x, idx=idx, val=val)),
        }
        print(f"epilogue {lines}x{steps}x{CLASSES}: " + "; ".join(f"{k} {v['total']} µs" for k, v in row.items()))
        for t in (x, probs, idx, val):
            device.free(t)
    return found


def matmuls(device: Device) -> dict[str, Any]:
    found = {}
    for rows in MATMUL_ROWS:
        rng = np.random.default_rng(rows)
        a = device.upload(rng.standard_normal((rows, DIMS)).astype(np.float32))
        b = device.upload((rng.standard_normal((DIMS, CLASSES)) * 0.1).astype(np.float32))
        c = device.tensor((rows, CLASSES))
        row: dict[str, Any] = {"auto": repr(pick_tile(rows, CLASSES, 1, k=DIMS))}
        for name, tile in TILES.items():
            row[name] = median_us(device, partial(record_matmul, a=a, b=b, out=c, tile=tile))["total"]
        found[f"{rows}x{DIMS}x{CLASSES}"] = row
        print(f"matmul {rows}x{DIMS}x{CLASSES} (auto {row['auto']}): "
              + ", ".join(f"{k} {v}" for k, v in row.items() if k != "auto"))
        for t in (a, b, c):
            device.free(t)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="index, UUID or name part (default: the automatic choice)")
    parser.add_argument("--json", default=None, help="write every figure here")
    args = parser.parse_args()
    with Device(args.device) as device:
        results = {"device": device.info.name, "epilogue_us": epilogues(device), "matmul_us": matmuls(device)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
