"""Host time of making a plan for a never-seen shape, det and rec, as the pipeline makes them (with its GPU
hooks): min / median / max over distinct shapes, after each model's largest plan (which creates the pipelines
and sizes the shared arena, so no later shape grows it), in a seeded shuffled order; and what the cached plans
leave the cycle collector: tracked objects per plan and the time of one full collection with them all cached.
The model objects are frozen out of the collector first, as `OcrPipeline.open` does.

With --floor, as many further new shapes are made with the Recorder's dispatch, copy and end turned into no-ops:
what is left is the shape arithmetic (specialisation, placement, binding, each kernel's push constants and group
counts), which any design that runs this code per new shape pays, one recording shared by many shapes included.
Those plans are never run, and the process ends after them.

Plans are made as the pipeline makes them, by shape classes (vk/graph/shape_classes.py): the first shape of a
class is traced, the others come from the class's compiled function; the two are timed apart. --no-classes
works every plan out in full (--floor implies it: it times that full work).

Usage: python scripts/bench_plans.py [--device NAME] [--models SET] [--shapes N] [--seed S] [--floor]
       [--no-classes] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


MAX_SHAPES = 180  # rec has 180 widths to choose from


def summary(times: list[float]) -> dict[str, float] | None:
    return {"min": min(times), "median": statistics.median(times), "max": max(times)} if times else None


def fmt(s: dict[str, float] | None) -> str:
    return "-" if s is None else f"{s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f}"


def timed(prepare: Callable[[str, Any], None], role: str, shapes: list[tuple[int, int, int, int]]) -> list[float]:
    """Host ms of preparing each shape's plan."""
    times = []
    for shape in shapes:
        started = time.perf_counter()
        prepare(role, shape)
        times.append((time.perf_counter() - started) * 1e3)
    return times


@contextmanager
def recording_nothing() -> Iterator[None]:
    """The Recorder's dispatch, copy and end as no-ops, for a measurement of what is left."""
    from vkocr.engine.recorder import Recorder

    kept = Recorder.dispatch, Recorder.copy, Recorder.end
    Recorder.dispatch = Recorder.copy = lambda self, *a, **k: None  # type: ignore[method-assign]
    Recorder.end = lambda self: setattr(self, "ended", True)  # type: ignore[method-assign]
    try:
        yield
    finally:
        Recorder.dispatch, Recorder.copy, Recorder.end = kept  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Vulkan device (index, UUID or name part)")
    parser.add_argument("--models", default=None, help="model set or folder (default: the default set)")
    parser.add_argument("--shapes", type=int, default=32,
                        help=f"new shapes per model, 1..{MAX_SHAPES} (1..{MAX_SHAPES // 2} with --floor; default 32)")
    parser.add_argument("--seed", type=int, default=0, help="the order of the shapes (default 0)")
    parser.add_argument("--floor", action="store_true",
                        help="then as many new shapes again with recording turned off: the shape arithmetic alone")
    parser.add_argument("--no-classes", action="store_true",
                        help="work every plan out in full instead of by its shape class (vk/graph/shape_classes.py: "
                             "a trace per class, then one compiled function per shape, the two timed apart)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    args = parser.parse_args()
    most = MAX_SHAPES // 2 if args.floor else MAX_SHAPES
    if not 1 <= args.shapes <= most:
        parser.error(f"--shapes must be 1..{most}{' with --floor' if args.floor else ''}, got {args.shapes}")

    from vkocr.agent.ocr.gpu_stages import GpuStages
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.engine.device import Device

    chosen = choose_models(args.models)
    results: dict[str, Any] = {"models": chosen.name, "seed": args.seed}
    planned = {role: shapes_for(role, 2 * args.shapes if args.floor else args.shapes, args.seed)
               for role in ("det", "rec")}
    with Device(args.device) as device:
        stages = GpuStages(device, chosen.paths)
        if args.no_classes or args.floor:
            for model in stages.models.values():
                model.shape_classes = None
        try:
            gc.collect()
            gc.freeze()
            for role in ("det", "rec"):
                first, *rest = planned[role][:1 + args.shapes]
                stages.prepare(role, first)
                gc.collect()
                tracked = len(gc.get_objects())
                times = timed(stages.prepare, role, rest)
                kinds = list(stages.models[role].build_kinds)[-len(rest):]  # how each plan was made
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
                if model.shape_classes is not None:
                    hits = [t for t, kind in zip(times, kinds) if kind == "class"]
                    traces = [t for t, kind in zip(times, kinds) if kind == "traced"]
                    results[role]["classes"] = {
                        "traced": len(traces), "hits": len(hits), "hit_ms": summary(hits), "trace_ms": summary(traces),
                        "each_ms": [round(t, 3) for t in times], "each_kind": kinds}
            if args.floor:  # last: the plans made here record nothing
                with recording_nothing():
                    for role in ("det", "rec"):
                        floor = timed(stages.prepare, role, planned[role][1 + args.shapes:])
                        results[role]["arithmetic_only"] = {"min_ms": min(floor), "median_ms": statistics.median(floor),
                                                            "max_ms": max(floor), "count": len(floor)}
            results["device"] = {"name": device.info.name}
        finally:
            stages.close()
            gc.unfreeze()
    for role in ("det", "rec"):
        r = results[role]
        print(f"{role}: new shape {r['min_ms']:.2f} / {r['median_ms']:.2f} / {r['max_ms']:.2f} ms (min / median / "
              f"max over {r['shapes']}), {r['plans']} plans in {r['plan_memory_mib']:.1f} MiB, "
              f"{r['tracked_objects_per_plan']:.0f} tracked objects per plan, full collection "
              f"{r['full_collection_ms']:.1f} ms")
        if "classes" in r:
            c = r["classes"]
            print(f"{role}: {c['traced']} shapes traced a new class ({fmt(c['trace_ms'])} ms), {c['hits']} made by "
                  f"a class's function ({fmt(c['hit_ms'])} ms), min / median / max")
        if "arithmetic_only" in r:
            a = r["arithmetic_only"]
            print(f"{role}: shape arithmetic alone {a['min_ms']:.2f} / {a['median_ms']:.2f} / {a['max_ms']:.2f} ms "
                  f"(min / median / max over {a['count']}): {100 * a['median_ms'] / r['median_ms']:.0f}% of a plan")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
