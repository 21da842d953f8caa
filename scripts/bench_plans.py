"""Host time of making a plan for a never-seen shape, det and rec, as the pipeline makes them (with its GPU
hooks): min / median / max over distinct shapes, after each model's largest plan (which creates the pipelines
and sizes the shared arena, so no later shape grows it), in a seeded shuffled order; and what the cached plans
leave the cycle collector: tracked objects per plan and the time of one full collection with them all cached.
The model objects are frozen out of the collector first, as `OcrPipeline.open` does.

Usage: python scripts/bench_plans.py [--device NAME] [--models SET] [--shapes N] [--seed S] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def shapes_for(role: str, n: int, seed: int) -> list[tuple[int, int, int, int]]:
    """The largest first, then `n` smaller distinct shapes in a seeded order (det: both sides vary in 32 px
    steps, as det inputs do; rec: the batch width in 8 px steps)."""
    rng = random.Random(seed)
    if role == "det":
        sides = [(h, w) for h in range(480, 961, 32) for w in range(480, 961, 32) if (h, w) != (960, 960)]
        return [(1, 3, 960, 960)] + [(1, 3, h, w) for h, w in rng.sample(sides, n)]
    widths = rng.sample(range(160, 1600, 8), n)
    return [(6, 3, 48, 1600)] + [(6, 3, 48, w) for w in widths]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Vulkan device (index, UUID or name part)")
    parser.add_argument("--models", default=None, help="model set or folder (default: the default set)")
    parser.add_argument("--shapes", type=int, default=32, help="new shapes per model, 1..200 (default 32)")
    parser.add_argument("--seed", type=int, default=0, help="the order of the shapes (default 0)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    args = parser.parse_args()
    if not 1 <= args.shapes <= 200:
        parser.error(f"--shapes must be 1..200, got {args.shapes}")

    from vkocr.agent.ocr.gpu_stages import GpuStages
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.engine.device import Device

    chosen = choose_models(args.models)
    results: dict[str, object] = {"models": chosen.name, "seed": args.seed}
    with Device(args.device) as device:
        stages = GpuStages(device, chosen.paths)
        try:
            gc.collect()
            gc.freeze()
            for role in ("det", "rec"):
                first, *rest = shapes_for(role, args.shapes, args.seed)
                stages.prepare(role, first)
                gc.collect()
                tracked = len(gc.get_objects())
                times = []
                for shape in rest:
                    started = time.perf_counter()
                    stages.prepare(role, shape)
                    times.append((time.perf_counter() - started) * 1e3)
                gc.collect()
                per_plan = (len(gc.get_objects()) - tracked) / len(rest)
                started = time.perf_counter()
                gc.collect()
                full_ms = (time.perf_counter() - started) * 1e3
                model = stages.models[role]
                results[role] = {"shapes": len(times), "min_ms": min(times), "median_ms": statistics.median(times),
                                 "max_ms": max(times), "plans": model.plan_count,
                                 "plan_memory_mib": model.plan_memory_bytes / 2**20,
                                 "tracked_objects_per_plan": per_plan, "full_collection_ms": full_ms}
            results["device"] = {"name": device.info.name}
        finally:
            stages.close()
            gc.unfreeze()
    for role in ("det", "rec"):
        r = results[role]
        assert isinstance(r, dict)
        print(f"{role}: new shape {r['min_ms']:.2f} / {r['median_ms']:.2f} / {r['max_ms']:.2f} ms (min / median / "
              f"max over {r['shapes']}), {r['plans']} plans in {r['plan_memory_mib']:.1f} MiB, "
              f"{r['tracked_objects_per_plan']:.0f} tracked objects per plan, full collection "
              f"{r['full_collection_ms']:.1f} ms")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
