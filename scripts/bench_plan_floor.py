"""How much of a new plan's host time is shape arithmetic, and how much is recording: new det and rec plans made
as the pipeline makes them, then more new shapes made with the Recorder's collecting and encoding turned into
no-ops (dispatch, copy and end record nothing). What is left is the Python that works out the plan for the
shape: specialisation, memory placement, binding and each kernel's push constants and group counts. Any design
that runs this per new shape (one recording shared by many shapes included) costs at least that much.

Only a measurement: the plans made without recording are never run, and the process ends after them.

Usage: python scripts/bench_plan_floor.py [--device NAME] [--models SET] [--shapes N] [--seed S] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_plans import shapes_for  # noqa: E402  (this folder: after the path is set)


def timed(prepare: Any, role: str, shapes: list[tuple[int, int, int, int]]) -> list[float]:
    times = []
    for shape in shapes:
        started = time.perf_counter()
        prepare(role, shape)
        times.append((time.perf_counter() - started) * 1e3)
    return times


def stats(times: list[float]) -> dict[str, float]:
    return {"min_ms": min(times), "median_ms": statistics.median(times), "max_ms": max(times), "count": len(times)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Vulkan device (index, UUID or name part)")
    parser.add_argument("--models", default=None, help="model set or folder (default: the default set)")
    parser.add_argument("--shapes", type=int, default=16, help="new shapes per model and way, 1..100 (default 16)")
    parser.add_argument("--seed", type=int, default=0, help="the order of the shapes (default 0)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    args = parser.parse_args()
    if not 1 <= args.shapes <= 100:
        parser.error(f"--shapes must be 1..100, got {args.shapes}")

    from vkocr.agent.ocr.gpu_stages import GpuStages
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.engine.device import Device
    from vkocr.engine.recorder import Recorder

    chosen = choose_models(args.models)
    results: dict[str, Any] = {"models": chosen.name, "seed": args.seed}
    with Device(args.device) as device:
        stages = GpuStages(device, chosen.paths)
        try:
            gc.collect()
            gc.freeze()
            for role in ("det", "rec"):
                largest, *rest = shapes_for(role, 2 * args.shapes, args.seed)
                stages.prepare(role, largest)
                results[role] = {"recorded": stats(timed(stages.prepare, role, rest[:args.shapes]))}
            kept = Recorder.dispatch, Recorder.copy, Recorder.end
            Recorder.dispatch = Recorder.copy = lambda self, *a, **k: None  # type: ignore[method-assign]
            Recorder.end = lambda self: setattr(self, "ended", True)  # type: ignore[method-assign]
            try:
                for role in ("det", "rec"):
                    rest = shapes_for(role, 2 * args.shapes, args.seed)[1 + args.shapes:]
                    results[role]["arithmetic_only"] = stats(timed(stages.prepare, role, rest))
            finally:
                Recorder.dispatch, Recorder.copy, Recorder.end = kept  # type: ignore[method-assign]
            results["device"] = {"name": device.info.name}
        finally:
            stages.close()
            gc.unfreeze()
    for role in ("det", "rec"):
        full, floor = results[role]["recorded"], results[role]["arithmetic_only"]
        print(f"{role}: new plan {full['min_ms']:.2f} / {full['median_ms']:.2f} / {full['max_ms']:.2f} ms; shape "
              f"arithmetic alone {floor['min_ms']:.2f} / {floor['median_ms']:.2f} / {floor['max_ms']:.2f} ms "
              f"(min / median / max over {floor['count']}): {100 * floor['median_ms'] / full['median_ms']:.0f}%")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
