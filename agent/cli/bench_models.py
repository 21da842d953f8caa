"""`vkocr bench models`: the three PP-OCR models through our Vulkan plans, onnxruntime on the CPU and ncnn on
Vulkan, in one run on one machine. Wall time is numpy in → numpy out; ours is also split into GPU time
(timestamps), upload and readback, once per storage precision asked for (fp32, fp16: each output's relative
error against fp32's on the same input is reported beside it). onnxruntime and ncnn are optional peers, skipped
(and said so) when absent.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vkocr.agent.cli.workspace import ncnn_models

WARMUP_S = 0.5
PROFILE_WARMUP_S = 1.0  # profiled replays before the five that count (see bench_ours)
NCNN_FILES = {"det": "ch_PP_OCRv4_det_infer", "cls": "ch_ppocr_mobile_v2.0_cls_infer", "rec": "ch_PP_OCRv4_rec_infer"}


@dataclass(frozen=True)
class BenchCase:
    role: str
    shape: tuple[int, int, int, int]

    @property
    def label(self) -> str:
        return f"{self.role} {'x'.join(map(str, self.shape))}"


CASES = (
    BenchCase("det", (1, 3, 736, 1024)),
    BenchCase("det", (1, 3, 736, 736)),
    BenchCase("det", (1, 3, 544, 960)),
    BenchCase("rec", (1, 3, 48, 320)),
    BenchCase("rec", (16, 3, 48, 320)),
    BenchCase("cls", (16, 3, 48, 192)),
    BenchCase("ori", (1, 3, 224, 224)),  # the page-orientation stage, where the set names the model
)


def timed(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    """min and median wall ms of `runs` calls after WARMUP_S of warm-up calls."""
    start = time.perf_counter()
    while time.perf_counter() - start < WARMUP_S:
        fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return {"min_ms": min(samples), "median_ms": statistics.median(samples)}


def busy_ms(plan: Any, x: np.ndarray, replays: int = 20) -> float:
    """Median GPU span of one plain replay: upload, network and readback in one submission, measured by the two
    timestamps every recording carries (vk/recorder.py). A profiled replay's per-node sum (gpu_ms) also pays for
    a timestamp after every dispatch, which waits for it to finish."""
    spans = []
    for _ in range(replays):
        before = plan.device.gpu_busy_seconds
        plan.run(x, copy=False)
        spans.append((plan.device.gpu_busy_seconds - before) * 1e3)
    return statistics.median(spans)


def gpu_breakdown(plan: Any, profile: Any) -> tuple[dict[str, float], list[tuple[str, str, float]]]:
    """GPU ms summed per op type, and the ten slowest nodes (name, op, ms) of one profiled replay."""
    op_of = {n.name: n.op for n in plan.spec.graph.nodes}
    per_op: dict[str, float] = {}
    for t in profile.nodes:
        per_op[op_of.get(t.label, t.label)] = per_op.get(op_of.get(t.label, t.label), 0.0) + t.ms
    slowest = sorted(profile.nodes, key=lambda t: -t.ms)[:10]
    ranked = dict(sorted(per_op.items(), key=lambda kv: -kv[1]))
    return ranked, [(t.label, op_of.get(t.label, "?"), t.ms) for t in slowest]


def bench_ours(device: Any, path: Path, x: np.ndarray, runs: int, precision: str = "fp32",
               reference: np.ndarray | None = None) -> dict[str, Any]:
    """Our plan for `x` at `precision` (every node that may: vk/graph/precision.py); with `reference` (fp32's
    output on the same input), the relative error of this one's output against it."""
    from vkocr.engine.graph.model import Model
    from vkocr.engine.graph.plan import Plan
    from vkocr.engine.graph.precision import PrecisionPlan

    model = Model.load(path, device, precision=PrecisionPlan(precision))
    try:
        plan = model.plan(x.shape)
        assert isinstance(plan, Plan)  # a device was given, so this is a Vulkan plan
        out = plan.run(x)[model.output]
        row: dict[str, Any] = timed(lambda: plan.run(x), runs)
        row["output"] = out.copy() if reference is None else None
        if reference is not None:
            row["rel_error"] = float(np.linalg.norm(out - reference) / max(float(np.linalg.norm(reference)), 1e-30))
        # Profiled replays back to back for a while first: between the timed runs' readbacks (rec 16: 17 MB
        # each) the GPU idled enough to drop its clocks, and rec 16's profile read 2-3x slow in some rounds.
        start = time.perf_counter()
        while time.perf_counter() - start < PROFILE_WARMUP_S:
            plan.profile(x)
        profiles = [plan.profile(x) for _ in range(5)]
        best = min(profiles, key=lambda p: p.total_ms)
        row["gpu_ms"] = sum(t.ms for t in best.nodes)
        row["busy_ms"] = busy_ms(plan, x)
        row["upload_ms"], row["readback_ms"] = best.upload_ms, best.readback_ms
        row["dispatches"] = plan.dispatch_count
        row["per_op_ms"], row["slowest_nodes"] = gpu_breakdown(plan, best)
        row["node_ms"] = [(t.label, round(t.ms, 5)) for t in best.nodes]  # every node, in recording order
        row["node_kernels"] = {name: ",".join(labels) for name, labels in best.node_kernels.items()}
        return row
    finally:
        model.close()


def bench_onnxruntime(path: Path, x: np.ndarray, runs: int) -> dict[str, Any] | str:
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime not installed"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return timed(lambda: session.run(None, {name: x}), runs)


def bench_ncnn(case: BenchCase, x: np.ndarray, runs: int, peers_dir: Path) -> dict[str, Any] | str:
    """ncnn takes one CHW item per extractor call: a batch of 16 is 16 calls, as an application would make."""
    try:
        import ncnn
    except ImportError:
        return "ncnn not installed"
    param = peers_dir / f"{NCNN_FILES[case.role]}.ncnn.param"  # (with_suffix would eat the ".0_cls_infer")
    if not param.exists():
        return f"no ncnn model at {param}"
    net = ncnn.Net()
    net.opt.use_vulkan_compute = True
    net.load_param(str(param))
    net.load_model(str(param.with_name(f"{NCNN_FILES[case.role]}.ncnn.bin")))

    def run() -> list[np.ndarray]:
        outs = []
        for item in x:
            ex = net.create_extractor()
            ex.input("in0", ncnn.Mat(np.ascontiguousarray(item)))
            _, out = ex.extract("out0")
            outs.append(np.array(out))
        return outs

    row = timed(run, runs)
    net.clear()
    return row


def run_model_bench(override: str | None = None, *, runs: int = 20, peers_dir: Path | None = None,
                    only: list[str] | None = None, progress: bool = True, models: str | None = None,
                    precisions: tuple[str, ...] = ("fp32",)) -> dict[str, Any]:
    """Every case on `override`'s device, ours once per storage precision; `models`: a model set or folder
    (agent/ocr/model_sets.py; default: the default set). ncnn runs ppocrv4's conversions only, so only for that
    set."""
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.engine.device import Device

    chosen = choose_models(models)

    peers_dir = peers_dir or ncnn_models()
    rng = np.random.default_rng()
    results: dict[str, Any] = {"models": chosen.name, "cases": []}
    with Device(override) as device:
        results["device"] = f"{device.info.name} (driver {device.info.driver_info or device.info.driver_version})"
        for case in CASES:
            if (only and case.role not in only) or case.role not in chosen.paths:
                continue
            if progress:
                print(f"bench: {case.label}", file=sys.stderr, flush=True)
            x = rng.uniform(-1, 1, case.shape).astype(np.float32)
            path = chosen.paths[case.role]
            ours = bench_ours(device, path, x, runs)
            reference = ours.pop("output")
            by_precision = {p: bench_ours(device, path, x, runs, p, reference) for p in precisions if p != "fp32"}
            for row in by_precision.values():
                row.pop("output")
            results["cases"].append({
                "case": case.label,
                "ours": ours,
                "ours_by_precision": by_precision,
                "onnxruntime_cpu": bench_onnxruntime(chosen.paths[case.role], x, runs),
                "ncnn_vulkan": bench_ncnn(case, x, runs, peers_dir) if chosen.name == "ppocrv4" else
                f"no ncnn conversion of {chosen.name}",
            })
    return results


def _cell(row: dict[str, Any] | str) -> str:
    return f"{row['min_ms']:.2f} / {row['median_ms']:.2f}" if isinstance(row, dict) else "n/a"


def format_model_results(results: dict[str, Any]) -> str:
    header = (f"{'case':<20} {'ours':>15} {'GPU':>7} {'busy':>6} {'upload':>7} {'readbk':>7} {'disp':>5} "
              f"{'onnxruntime CPU':>16} {'ncnn Vulkan':>15} {'ort/ours':>8} {'ncnn/ours':>9}")
    lines = [f"device: {results['device']}",
             "wall ms numpy in -> numpy out, min / median; ours split into GPU (per-node timestamps), upload,",
             "readback; busy: GPU span of a replay without per-node timestamps (upload + network + readback)",
             header]
    for r in results["cases"]:
        ours, ort_row, ncnn_row = r["ours"], r["onnxruntime_cpu"], r["ncnn_vulkan"]

        def ratio(peer: dict[str, Any] | str, ours: dict[str, Any] = ours) -> str:
            return f"{peer['median_ms'] / ours['median_ms']:.1f}x" if isinstance(peer, dict) else "-"

        lines.append(
            f"{r['case']:<20} {_cell(ours):>15} {ours['gpu_ms']:>7.2f} {ours.get('busy_ms', float('nan')):>6.2f} "
            f"{ours['upload_ms']:>7.3f} "
            f"{ours['readback_ms']:>7.3f} {ours['dispatches']:>5} {_cell(ort_row):>16} {_cell(ncnn_row):>15} "
            f"{ratio(ort_row):>8} {ratio(ncnn_row):>9}"
        )
        for precision, row in r.get("ours_by_precision", {}).items():
            speed = ours["gpu_ms"] / row["gpu_ms"]
            lines.append(f"{'  ' + precision:<20} {_cell(row):>15} {row['gpu_ms']:>7.2f} "
                         f"{row.get('busy_ms', float('nan')):>6.2f} {row['upload_ms']:>7.3f} "
                         f"{row['readback_ms']:>7.3f} {row['dispatches']:>5}  GPU {speed:.2f}x fp32's speed, "
                         f"output rel. error {row['rel_error']:.2e} against fp32")
    for r in results["cases"]:
        for peer in ("onnxruntime_cpu", "ncnn_vulkan"):
            if isinstance(r[peer], str):
                lines.append(f"note: {r['case']} {peer}: {r[peer]}")
    return "\n".join(lines)
