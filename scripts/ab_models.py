"""In-model A/B: the GPU time of a model set's det, rec 16 and cls 16 plans, node by node, as one checkout builds
them, so that two checkouts (main and a change) can be set side by side in one device call.

Isolated kernel timings misled twice (BENCHMARKS.md, session 38: a tile rule and batched loads that won in a
sweep lost in the models), so a kernel or rule change is decided by this: run it once per checkout, alternating,
on the same warm machine, and compare `gpu_ms` (the per-node sum of the best of five profiled replays after a
second of warm-up, as `vkocr bench models` reports it) and the nodes that moved.

    VKOCR_CHECKOUT=ROOT python scripts/ab_models.py --label NAME [--precision fp32,fp16] [--only det,rec,cls]
        [--json OUT]

VKOCR_CHECKOUT (default: this checkout) is the root whose vk/, agent/, shaders/ ... are imported as vkocr
(scripts/check_coopmat.py's finder): a `git archive` of a branch unpacked anywhere serves. The models come from
the installed model store, as the agent finds them. `--compare A.json B.json` prints the two runs' totals and
the nodes that differ most, and runs nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_coopmat  # noqa: E402  (installs the checkout's finder for vkocr)

# (name, the model set's role, input shape): rec1 is one line, as a stream of single-line crops runs it
CASES = (("det", "det", (1, 3, 736, 1024)), ("rec", "rec", (16, 3, 48, 320)), ("rec1", "rec", (1, 3, 48, 320)),
         ("cls", "cls", (16, 3, 48, 192)))


def run(label: str, precisions: list[str], models: str | None, device_selector: str | None,
        roles: list[str]) -> dict[str, Any]:
    from vkocr.agent.cli.bench_models import bench_ours
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.engine.device import Device

    chosen = choose_models(models)
    rng = np.random.default_rng(0)
    result: dict[str, Any] = {"label": label, "checkout": str(check_coopmat.ROOT), "models": chosen.name,
                              "cases": {}}
    with Device(device_selector) as device:
        result["device"] = f"{device.info.name} (driver {device.info.driver_info or device.info.driver_version})"
        for name, role, shape in CASES:
            if name not in roles:
                continue
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            for precision in precisions:
                row = bench_ours(device, chosen.paths[role], x, 3, precision)
                row.pop("output", None)
                key = f"{role} {'x'.join(map(str, shape))} {precision}"
                result["cases"][key] = {k: row[k] for k in ("gpu_ms", "busy_ms", "dispatches", "node_ms",
                                                            "node_kernels")}
                print(f"{label:<12} {key:<28} gpu {row['gpu_ms']:.3f} ms  busy {row['busy_ms']:.3f} ms  "
                      f"{row['dispatches']} dispatches", flush=True)
    return result


def compare(a: dict[str, Any], b: dict[str, Any], top: int = 8) -> str:
    lines = [f"{'case':<28} {a['label']:>12} {b['label']:>12} {'change':>8}"]
    for key, ra in a["cases"].items():
        rb = b["cases"].get(key)
        if rb is None:
            continue
        lines.append(f"{key:<28} {ra['gpu_ms']:>12.3f} {rb['gpu_ms']:>12.3f} "
                     f"{100 * (rb['gpu_ms'] / ra['gpu_ms'] - 1):>+7.1f}%")
        na, nb = dict(ra["node_ms"]), dict(rb["node_ms"])
        moved = sorted(((nb[n] - na[n], n) for n in na if n in nb), key=lambda d: -abs(d[0]))[:top]
        lines += [f"    {n:<24} {1000 * na[n]:7.1f} -> {1000 * nb[n]:7.1f} µs" for _, n in moved]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", default="checkout", help="this run's name in the output")
    parser.add_argument("--precision", default="fp32,fp16", help="storage precisions, comma-separated")
    parser.add_argument("--models", default=None, help="model set (default: the default set)")
    parser.add_argument("--device", default=None, help="index, UUID or name part (default: the automatic choice)")
    parser.add_argument("--only", default="det,rec,cls",
                        help="cases, comma-separated: det, rec (16 lines), rec1 (one line), cls (default det,rec,cls)")
    parser.add_argument("--json", type=Path, default=None, help="write the run here")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two runs' JSON")
    args = parser.parse_args(argv)
    if args.compare:
        print(compare(*(json.loads(p.read_text()) for p in args.compare)))
        return 0
    precisions = [p for p in args.precision.split(",") if p]
    if not precisions or set(precisions) - {"fp32", "fp16"}:
        parser.error("--precision takes fp32 and fp16, comma-separated")
    roles = [r for r in args.only.split(",") if r]
    if not roles or set(roles) - {name for name, _, _ in CASES}:
        parser.error("--only takes det, rec, rec1 and cls, comma-separated")
    result = run(args.label, precisions, args.models, args.device, roles)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
