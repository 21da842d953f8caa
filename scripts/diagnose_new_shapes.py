"""Why a new plan costs more inside a stream than alone: for every plan that pass 1 of a stream records, the
host time of that build, the garbage collector's time during it, and the time of building the same plan again
at once (caches warm, nothing in between). Prints min / median / max per model.

Usage: python scripts/diagnose_new_shapes.py [--device NAME] [--rendered N] [--json PATH]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Vulkan device (index, UUID or name part)")
    parser.add_argument("--rendered", type=int, default=48, help="rendered images in the stream (default 48)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    args = parser.parse_args()

    from vkocr.agent.cli.stream_images import varied_images
    from vkocr.agent.ocr.pipeline import OcrPipeline
    from vkocr.agent.serving.config import AgentConfig
    from vkocr.agent.serving.plans import warm_pipeline
    from vkocr.engine.graph.model import Model

    gc_ms = [0.0]
    started_gc = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started_gc[0] = time.perf_counter()
        else:
            gc_ms[0] += (time.perf_counter() - started_gc[0]) * 1e3

    gc.callbacks.append(on_gc)
    rows: list[dict[str, Any]] = []
    build = Model._build

    def measured_build(self: Model, shape: Any, extra: Any, hooks: Any) -> Any:
        gc_before = gc_ms[0]
        t0 = time.perf_counter()
        plan = build(self, shape, extra, hooks)
        first = (time.perf_counter() - t0) * 1e3
        gc_first = gc_ms[0] - gc_before
        plan.close()
        gc_before = gc_ms[0]
        t0 = time.perf_counter()
        plan = build(self, shape, extra, hooks)
        again = (time.perf_counter() - t0) * 1e3
        if recording[0]:
            rows.append({"model": self.graph.name, "shape": list(shape), "in_stream_ms": first,
                         "gc_ms": gc_first, "again_ms": again, "gc_again_ms": gc_ms[0] - gc_before})
        return plan

    recording = [False]
    images = varied_images(args.rendered, seed=2)
    with OcrPipeline.open(args.device) as ocr:
        warm_pipeline(ocr, AgentConfig().warm_sizes())
        ocr(images[0][1])
        Model._build = measured_build  # type: ignore[method-assign]
        recording[0] = True
        for _name, rgb in images[1:]:
            ocr(rgb)
        Model._build = build  # type: ignore[method-assign]
    results: dict[str, Any] = {"plans": rows, "summary": {}}
    for model in sorted({r["model"] for r in rows}):
        mine = [r for r in rows if r["model"] == model]
        summary = {key: {"min": min(r[key] for r in mine), "median": statistics.median(r[key] for r in mine),
                         "max": max(r[key] for r in mine)} for key in ("in_stream_ms", "gc_ms", "again_ms")}
        results["summary"][model] = {"plans": len(mine), **summary}
        print(f"{model}: {len(mine)} plans; " + "; ".join(
            f"{key} {s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f}" for key, s in summary.items()))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
