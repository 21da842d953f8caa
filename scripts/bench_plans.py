"""Host time of making a plan for a never-seen shape, det and rec, as the pipeline makes them (with its GPU
hooks): min / median / max over distinct shapes, after each model's first plan (which creates the pipelines).

Usage: python scripts/bench_plans.py [--device NAME] [--shapes N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Vulkan device (index, UUID or name part)")
    parser.add_argument("--shapes", type=int, default=16, help="new shapes per model (default 16)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    args = parser.parse_args()

    from vkocr.agent.ocr.gpu_stages import GpuStages
    from vkocr.agent.ocr.pipeline import ppocrv4_paths
    from vkocr.engine.device import Device

    n = args.shapes
    cases = {
        "det": [(1, 3, 736, 736 + 32 * i) for i in range(n + 1)],
        "rec": [(6, 3, 48, 320 + 32 * i) for i in range(n + 1)],
    }
    results: dict[str, dict[str, float | int | str]] = {}
    with Device(args.device) as device:
        stages = GpuStages(device, ppocrv4_paths())
        try:
            for role in ("det", "rec"):
                first, *rest = cases[role]
                stages.prepare(role, first)  # the model's pipelines are created here: not a new-shape cost
                times = []
                for shape in rest:
                    started = time.perf_counter()
                    stages.prepare(role, shape)
                    times.append((time.perf_counter() - started) * 1e3)
                model = stages.models[role]
                results[role] = {"shapes": len(times), "min_ms": min(times), "median_ms": statistics.median(times),
                                 "max_ms": max(times), "plans": model.plan_count,
                                 "plan_memory_mib": model.plan_memory_bytes / 2**20}
            results["device"] = {"name": device.info.name}
        finally:
            stages.close()
    for role in ("det", "rec"):
        r = results[role]
        print(f"{role}: new shape {r['min_ms']:.2f} / {r['median_ms']:.2f} / {r['max_ms']:.2f} ms (min / median / "
              f"max over {r['shapes']}), {r['plans']} plans in {r['plan_memory_mib']:.1f} MiB")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
