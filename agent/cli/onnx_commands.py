"""`vkocr infer`, `vkocr inspect` and `vkocr debug compare`: one ONNX model, outside the OCR pipeline."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from vkocr.agent.cli.device_option import add_device_option, saying_which_devices
from vkocr.agent.errors import AgentError

NUMPY = "numpy"
CPU = "cpu"
NO_GPU_CHOICES = ("This command runs on --device cpu (onnxruntime), --device numpy (the engine's NumPy executor) "
                  "or a Vulkan device named outright (--device llvmpipe: `vkocr devices` lists them)")


def open_device(selector: str | None) -> Any:
    """The Vulkan device for --device, or None for the engine's NumPy executor (--device numpy). 'cpu' (the
    OCR pipeline's onnxruntime backend) runs no plan to inspect or compare: refused, naming what there is."""
    if selector == NUMPY:
        return None
    if selector == CPU:
        raise AgentError("--device cpu (onnxruntime) runs a model but makes no plan: this command takes "
                         "--device numpy (the engine's NumPy executor) or a Vulkan device")
    from vkocr.engine.device import Device

    with saying_which_devices(selector, NO_GPU_CHOICES):
        return Device(selector)


def run_on_onnxruntime(model: str, x: np.ndarray) -> tuple[np.ndarray, str]:
    """`vkocr infer --device cpu`: the model on onnxruntime's CPU execution provider, as the CPU backend runs
    the OCR models."""
    import onnxruntime as ort

    try:
        session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        y = session.run(None, {session.get_inputs()[0].name: x})[0]
    except Exception as exc:  # noqa: BLE001 - onnxruntime's error types (InvalidProtobuf, Fail, …) are private
        raise AgentError(f"onnxruntime cannot run {model} on this input: {exc}") from exc
    return np.asarray(y), f"cpu (onnxruntime {ort.__version__})"


def load_input(path: str) -> np.ndarray:
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise AgentError(f"cannot read input tensor {path}: {exc}") from exc
    if x.dtype != np.float32:
        raise AgentError(f"input tensor {path} is {x.dtype}; models take float32")
    return x


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.lower().replace(",", "x").split("x"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"shape must look like 1x3x736x736, got {text!r}") from exc
    if not dims or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"shape dimensions must be positive, got {text!r}")
    return dims


def cmd_infer(args: argparse.Namespace) -> int:
    from vkocr.engine.graph.model import Model

    x = load_input(args.input)
    if not Path(args.output).parent.is_dir():  # said now, not after the model ran
        raise AgentError(f"--output {args.output}: {Path(args.output).parent} is no folder")
    if args.device == CPU:
        y, backend = run_on_onnxruntime(args.model, x)
    else:
        device = open_device(args.device)
        try:
            with Model.load(args.model, device) as model:
                y, backend = model.run(x), model.backend
        finally:
            if device is not None:
                device.close()
    np.save(args.output, y)
    print(f"{Path(args.model).name}: {x.shape} -> {y.shape} on {backend}; written to {args.output}")
    return 0


def inspect_report(model_path: str, shape: tuple[int, ...], selector: str | None,
                   precision: str | None = None) -> dict[str, Any]:
    """`precision`: "fp32", "fp16", or a precision plan's JSON file (a model set's, from `vkocr calibrate`:
    agent/ocr/precision_plans/<set>.json, with `ROLE` after a colon: plans.json:rec); each node's storage
    precision is then listed."""
    from vkocr.engine.graph.model import Model
    from vkocr.engine.graph.onnx_import import load_onnx
    from vkocr.engine.graph.plan import Plan

    imported = load_onnx(model_path)
    plan_of_nodes = precision_plan(precision)
    device = open_device(selector)
    try:
        with Model.load(model_path, device, precision=plan_of_nodes) as model:
            plan = model.plan(shape)
            after = plan.spec.graph
            report: dict[str, Any] = {
                "model": Path(model_path).name,
                "shape": list(shape),
                "backend": model.backend,
                "nodes_imported": len(imported.nodes),
                "ops_imported": imported.op_counts(),
                "nodes_after_passes": len(after.nodes),
                "ops_after_passes": after.op_counts(),
                "output_shape": list(plan.spec.shape(after.outputs[0])),
                "precision": {n.name: plan.spec.dtype(n.outputs[0]).name for n in after.nodes} if precision else None,
            }
            if isinstance(plan, Plan):  # the NumPy executor has no dispatches or arenas to report
                report.update({
                    "dispatches": plan.dispatch_count,
                    "weights_mib": model.weight_bytes / 2**20,
                    "activation_peak_mib": plan.arena_bytes / 2**20,
                    "one_buffer_per_tensor_mib": plan.naive_bytes / 2**20,
                    "pipelines": sorted(plan.pipelines),
                })
            return report
    finally:
        if device is not None:
            device.close()


def precision_plan(text: str | None) -> Any:
    """The PrecisionPlan `vkocr inspect --precision` names (see inspect_report)."""
    from vkocr.agent.ocr.precision import parse_plans
    from vkocr.engine.graph.precision import FP32, PrecisionPlan

    if text in (None, "fp32"):
        return FP32
    if text == "fp16":
        return PrecisionPlan("fp16")
    path, _, role = str(text).partition(":")
    plans = parse_plans(Path(path).read_text()).plans
    if role not in plans:
        raise SystemExit(f"vkocr inspect: --precision {text}: name a model of {path} after a colon "
                         f"({', '.join(sorted(plans))})")
    return plans[role]


def format_inspect(r: dict[str, Any]) -> str:
    def ops(counts: dict[str, int]) -> str:
        return ", ".join(f"{op} {n}" for op, n in sorted(counts.items(), key=lambda kv: -kv[1]))

    lines = [
        f"{r['model']} at {'x'.join(map(str, r['shape']))} on {r['backend']} -> output {r['output_shape']}",
        f"nodes imported:      {r['nodes_imported']:4d}  ({ops(r['ops_imported'])})",
        f"nodes after passes:  {r['nodes_after_passes']:4d}  ({ops(r['ops_after_passes'])})",
    ]
    if "dispatches" in r:
        ratio = r["activation_peak_mib"] / max(r["one_buffer_per_tensor_mib"], 1e-9)
        lines += [
            f"dispatches:          {r['dispatches']:4d}",
            f"weights:             {r['weights_mib']:.2f} MiB",
            (f"activation peak:     {r['activation_peak_mib']:.2f} MiB planned vs "
             f"{r['one_buffer_per_tensor_mib']:.2f} MiB one buffer per tensor ({100 * ratio:.0f}%)"),
            f"pipelines:           {', '.join(r['pipelines'])}",
        ]
    if r.get("precision"):
        lines.append("storage precision per node:")
        lines += [f"  {dtype.replace('float', 'fp'):<5} {node}" for node, dtype in r["precision"].items()]
    return "\n".join(lines)


def compare_report(model_path: str, x: np.ndarray, selector: str | None, tolerance: float) -> dict[str, Any]:
    """Ours (every node's output read back) against onnxruntime, value by value, in graph order."""
    from vkocr.engine.graph.compare import compare_layers, onnxruntime_values
    from vkocr.engine.graph.model import Model

    device = open_device(selector)
    try:
        with Model.load(model_path, device) as model:
            nodes = model.plan(x.shape).spec.graph.nodes
            names = [(n.name, n.op, n.outputs[0]) for n in nodes if n.op != "View"]
            plan = model.plan(x.shape, extra_outputs=[v for _, _, v in names])
            feed = {model.input.name: x}
            diffs, first = compare_layers(names, lambda _: plan.run(x),
                                          lambda wanted: onnxruntime_values(model_path, feed, wanted), tolerance)
            backend = model.backend
    finally:
        if device is not None:
            device.close()
    return {"backend": backend, "compared": len(diffs), "tolerance": tolerance,
            "first_divergence": None if first is None else first.__dict__,
            "worst": sorted((d.__dict__ for d in diffs), key=lambda d: -d["rel_err"])[:5]}


def format_compare(r: dict[str, Any]) -> str:
    lines = [(f"compared {r['compared']} node outputs on {r['backend']} with onnxruntime (CPU), "
              f"tolerance {r['tolerance']:g}")]
    first = r["first_divergence"]
    if first is None:
        lines.append("no node diverges beyond tolerance")
    else:
        lines.append(f"first divergence: node {first['node']} ({first['op']}), value {first['value']}, "
                     f"rel err {first['rel_err']:.3g}")
    lines.append("largest errors: " + "; ".join(f"{d['node']} ({d['op']}) {d['rel_err']:.2g}" for d in r["worst"]))
    return "\n".join(lines)


def cmd_inspect(args: argparse.Namespace) -> int:
    report = inspect_report(args.model, args.shape, args.device, args.precision)
    print(json.dumps(report, indent=2) if args.json else format_inspect(report))
    return 0


def cmd_debug_compare(args: argparse.Namespace) -> int:
    report = compare_report(args.model, load_input(args.input), args.device, args.tolerance)
    print(json.dumps(report, indent=2) if args.json else format_compare(report))
    return 1 if report["first_divergence"] else 0


def add_model_parsers(sub: Any) -> None:
    """`infer`, `inspect` and `debug compare`."""
    infer = sub.add_parser("infer", help="run one ONNX model on one tensor",
                           description="Run MODEL.onnx on the float32 tensor in IN.npy and save its (first) "
                           "output to OUT.npy, through a Vulkan plan or, with --device numpy, the NumPy executor.")
    infer.add_argument("model", metavar="MODEL.onnx")
    infer.add_argument("--input", required=True, metavar="IN.npy", help="float32 input tensor (numpy .npy)")
    infer.add_argument("--output", required=True, metavar="OUT.npy", help="where to save the output")
    add_device_option(infer, cpu=True)
    infer.set_defaults(func=cmd_infer)

    inspect = sub.add_parser("inspect", help="nodes, dispatches, weights and planned memory of a model",
                             description="Print the nodes before and after the graph passes, the dispatch count, "
                             "the weights (MiB), the planned activation peak against one buffer per tensor "
                             "(MiB) and the pipelines a plan for this input shape uses.")
    inspect.add_argument("model", metavar="MODEL.onnx")
    inspect.add_argument("--shape", required=True, type=parse_shape, help="input shape, e.g. 1x3x736x736")
    inspect.add_argument("--precision", metavar="fp32|fp16|PLANS.json:ROLE", default=None,
                         help="storage precision of the plan, listed node by node (StorageCast nodes where "
                         "precisions meet): fp32, fp16, or a model set's plans file and the model's role, e.g. "
                         "agent/ocr/precision_plans/ppocrv6-small.json:rec")
    inspect.add_argument("--json", action="store_true", help="print as JSON")
    add_device_option(inspect, numpy=True)
    inspect.set_defaults(func=cmd_inspect)

    debug = sub.add_parser("debug", help="debugging tools")
    debug_sub = debug.add_subparsers(dest="debug_command", metavar="WHAT", required=True)
    compare = debug_sub.add_parser(
        "compare", help="ours against onnxruntime, node by node",
        description="Run MODEL.onnx on IN.npy with every node's output read back, and onnxruntime (CPU, "
        "optimisations off) on the same input; name the first node whose output differs by more than the "
        "tolerance (relative L2). Exit status 1 when one does. Needs onnxruntime.")
    compare.add_argument("model", metavar="MODEL.onnx")
    compare.add_argument("--input", required=True, metavar="IN.npy", help="float32 input tensor (numpy .npy)")
    compare.add_argument("--tolerance", type=float, default=1e-4, help="relative L2 error allowed (default 1e-4)")
    compare.add_argument("--json", action="store_true", help="print as JSON")
    add_device_option(compare, numpy=True)
    compare.set_defaults(func=cmd_debug_compare)
