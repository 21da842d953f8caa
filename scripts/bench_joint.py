"""What a joint run buys (vk/graph/joint.py): rec (or det) plans of several shapes, each alone, one after another,
and in one submission whose commands interleave behind shared barriers; then one rec plan per batch size at a few
widths.

Each plan belongs to a sibling of the model (its own activation memory, `Model.on_stream`), so their recordings
interleave as they are (`commands.interleave`) without moving anything; inputs come from the host. Every joint
answer is checked bit for bit against the plan's own, with the arenas poisoned first. GPU time is the device's
busy time over plain replays (mean of `--replays`, after 3 warm-ups).

    python scripts/bench_joint.py [--device SEL] [--models SET] [--stage rec|det] [--replays N] [--json OUT]

A measurement, not a test: lavapipe's figures mean nothing for a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_coopmat  # noqa: E402,F401  (installs the checkout's finder for vkocr)

from vkocr.agent.ocr.model_sets import choose_models  # noqa: E402
from vkocr.engine.commands import interleave  # noqa: E402
from vkocr.engine.device import Device  # noqa: E402
from vkocr.engine.graph.model import Model  # noqa: E402
from vkocr.engine.graph.plan import Plan  # noqa: E402
from vkocr.engine.recorder import Recorder  # noqa: E402

COMBOS = [[(1, 320), (1, 384)], [(4, 320), (4, 480)], [(6, 320), (6, 416), (6, 512), (6, 640)],
          [(1, 320), (2, 384), (4, 480), (1, 700)], [(8, 320), (8, 800)], [(16, 320), (16, 480)],
          [(2, 320), (3, 352), (1, 448), (2, 576), (1, 960), (4, 384)]]  # (batch, width) of each plan
# det: (height, width) of each plan's image, as RapidOCR 3.10's resize gives them (shorter side 736, multiples of 32)
DET_COMBOS = [[(736, 1024), (736, 960)], [(736, 736), (736, 1024), (960, 736), (736, 1312)],
              [(480, 640), (640, 480)], [(736, 1024)] * 4]
SWEEP_WIDTHS = (320, 640, 1280)
SWEEP_BATCHES = (1, 2, 3, 4, 5, 6, 8, 12, 16)


def gpu_ms(device: Device, run: Callable[[], object], replays: int) -> tuple[float, float]:
    """(GPU busy ms, wall ms) per call of `run`, means over `replays` after 3 warm-ups."""
    for _ in range(3):
        run()
    busy, start = device.gpu_busy_seconds, time.perf_counter()
    for _ in range(replays):
        run()
    return (device.gpu_busy_seconds - busy) / replays * 1e3, (time.perf_counter() - start) / replays * 1e3


def gpu_plan(model: Model, shape: tuple[int, ...]) -> Plan:
    plan = model.plan(shape)
    assert isinstance(plan, Plan), "a device model's plans are GPU plans"
    return plan


def input_shape(stage: str, pair: tuple[int, int]) -> tuple[int, int, int, int]:
    """rec: (batch, width) → a batch of lines 48 high; det: (height, width) → one image."""
    return (pair[0], 3, 48, pair[1]) if stage == "rec" else (1, 3, *pair)


def combo_row(device: Device, models: list[Model], stage: str, combo: list[tuple[int, int]], replays: int,
              rng: np.random.Generator) -> dict[str, Any]:
    shapes = [input_shape(stage, pair) for pair in combo]
    plans = [gpu_plan(models[i], shape) for i, shape in enumerate(shapes)]
    inputs = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    alone = [gpu_ms(device, partial(p.run, x, copy=False), replays)[0] for p, x in zip(plans, inputs)]
    expected = [p.run(x) for p, x in zip(plans, inputs)]
    sequence = gpu_ms(device, lambda: [p.run(x, copy=False) for p, x in zip(plans, inputs)], replays)
    with Recorder(device) as rec:
        rec.end_with(interleave([m.commands_of(p) for m, p in zip(models, plans)]))

        def joint() -> None:
            for p, x in zip(plans, inputs):
                p.stage(x)
            rec.submit()
            rec.wait()

        for p in plans:
            p.fill_arena(float("nan"))
        joint()
        identical = all(np.array_equal(e[k], v) for p, e in zip(plans, expected)
                        for k, v in p.outputs().items())
        together = gpu_ms(device, joint, replays)
    return {"combo": [list(c) for c in combo], "alone_gpu_ms": [round(a, 4) for a in alone],
            "sum_alone": round(sum(alone), 4), "seq_gpu_ms": round(sequence[0], 4),
            "seq_wall_ms": round(sequence[1], 4),
            "joint_gpu_ms": round(together[0], 4), "joint_wall_ms": round(together[1], 4), "identical": identical,
            "dispatches": [p.dispatch_count for p in plans]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Vulkan device (index, UUID or name part)")
    parser.add_argument("--models", default=None, help="model set or folder (default: the default set)")
    parser.add_argument("--stage", choices=("rec", "det"), default="rec", help="which model's plans (default rec)")
    parser.add_argument("--replays", type=int, default=40, help="replays timed per figure (default 40)")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    parser.add_argument("--combos", type=int, default=None, help="time only the first N combinations")
    parser.add_argument("--no-sweep", action="store_true", help="skip the batch sizes sweep")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    sweep: list[dict[str, Any]] = []
    combos = COMBOS if args.stage == "rec" else DET_COMBOS
    with Device(args.device) as device:
        base = Model.load(choose_models(args.models).paths[args.stage], device)
        widest = max(len(c) for c in combos)
        models = [base] + [base.on_stream(device.stream(i)) for i in range(1, widest)]
        try:
            for combo in combos[:args.combos]:
                row = combo_row(device, models, args.stage, combo, args.replays, rng)
                rows.append(row)
                print(f"{row['combo']}: alone {row['alone_gpu_ms']} (sum {row['sum_alone']:.3f}), one after another "
                      f"{row['seq_gpu_ms']:.3f}, joint {row['joint_gpu_ms']:.3f} ms GPU; identical {row['identical']}",
                      flush=True)
            for width in () if args.no_sweep or args.stage != "rec" else SWEEP_WIDTHS:
                for batch in SWEEP_BATCHES:
                    plan = gpu_plan(base, (batch, 3, 48, width))
                    x = rng.standard_normal((batch, 3, 48, width)).astype(np.float32)
                    gpu, wall = gpu_ms(device, partial(plan.run, x, copy=False), args.replays)
                    sweep.append({"batch": batch, "width": width, "gpu_ms": round(gpu, 4), "wall_ms": round(wall, 4)})
                    print(f"rec {batch}x{width}: GPU {gpu:.3f} ms, wall {wall:.3f}", flush=True)
        finally:
            for model in reversed(models):
                model.close()
    if args.json is not None:
        args.json.write_text(json.dumps({"stage": args.stage, "combos": rows, "batch_sweep": sweep}, indent=1))
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
