"""The `vkocr` command line. Each subcommand is a small function; heavy imports happen inside it."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vkocr.agent.cli.client_command import add_client_parser
from vkocr.agent.cli.logs import configure_logging
from vkocr.engine.errors import VkocrError

DESCRIPTION = """\
vkocr: PP-OCR text detection, direction classification and recognition on Vulkan compute shaders.

Commands available now:
  serve            run the gRPC agent: OCR, status streaming, health, reflection
  ocr              read text in images: detection, direction, recognition (no server)
  client           talk to running agents over gRPC: ocr, stream, watch, health
  devices          list every Vulkan device, its features, and which one vkocr would use and why
  infer            run one ONNX model on one tensor (.npy in, .npy out)
  inspect          what the graph passes and the plan make of a model at one input shape
  debug compare    ours against onnxruntime node by node: the first node that diverges
  bench kernels    time the core kernels on the chosen device against measured ceilings
  bench models     time the PP-OCR models: ours, onnxruntime (CPU) and ncnn (Vulkan) in one run
  bench pipeline   the whole OCR pipeline per image against RapidOCR 1.4.4 (CPU)
  bench agent      the gRPC agent's throughput and latency at 1, 4 and 16 clients
  bundle           model bundles: keygen, create, sign, verify, inspect
  fleet            roll a bundle out to several agents (canary, soak, rollback), or show their versions
"""


def _add_device_option(p: argparse.ArgumentParser, *, cpu: bool = False) -> None:
    extra = "; 'cpu' runs the NumPy executor instead (the explicit CPU fallback)" if cpu else ""
    p.add_argument(
        "--device",
        metavar="SEL",
        help="Vulkan device to use: index, UUID or part of the name (default: VKOCR_DEVICE, else the best "
        f"ranked){extra}",
    )


def cmd_devices(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.devices_report import device_report, format_report

    report = device_report(args.device)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


def cmd_bench_kernels(args: argparse.Namespace) -> int:
    from vkocr.engine.bench import format_results, run_kernel_bench

    results = run_kernel_bench(args.device, repeats=args.repeats, only=args.only, progress=not args.json)
    print(json.dumps(results, indent=2) if args.json else format_results(results))
    return 0


def cmd_infer(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.model_commands import cmd_infer as run

    return run(args)


def cmd_inspect(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.model_commands import format_inspect, inspect_report

    report = inspect_report(args.model, args.shape, args.device)
    print(json.dumps(report, indent=2) if args.json else format_inspect(report))
    return 0


def cmd_debug_compare(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.model_commands import compare_report, format_compare, load_input

    report = compare_report(args.model, load_input(args.input), args.device, args.tolerance)
    print(json.dumps(report, indent=2) if args.json else format_compare(report))
    return 1 if report["first_divergence"] else 0


def cmd_bench_models(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.bench_models import format_model_results, run_model_bench

    results = run_model_bench(args.device, runs=args.runs, peers_dir=args.peers, only=args.only,
                              progress=not args.json)
    print(json.dumps(results, indent=2) if args.json else format_model_results(results))
    return 0


def cmd_ocr(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.ocr_command import run

    return run(args)


def cmd_bench_pipeline(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.bench_pipeline import format_pipeline_results, run_pipeline_bench

    results = run_pipeline_bench(args.device, args.images, pages=args.pages, runs=args.runs,
                                 progress=not args.json)
    print(json.dumps(results, indent=2, ensure_ascii=False) if args.json else format_pipeline_results(results))
    return 0


def cmd_bench_agent(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.bench_agent import format_agent_results, load_images, run_agent_bench

    options = {**({"use_det": False} if args.no_det else {}), **({"use_cls": False} if args.no_cls else {})}
    results = run_agent_bench(args.device, load_images(args.images, args.pages), clients=args.clients,
                              requests=args.requests, request_options=options)
    print(json.dumps(results, indent=2, ensure_ascii=False) if args.json else format_agent_results(results))
    return 0


def _add_model_commands(sub: Any) -> None:
    from vkocr.agent.cli.model_commands import parse_shape

    infer = sub.add_parser("infer", help="run one ONNX model on one tensor",
                           description="Run MODEL.onnx on the float32 tensor in IN.npy and save its (first) "
                           "output to OUT.npy, through a Vulkan plan or, with --device cpu, the NumPy executor.")
    infer.add_argument("model", metavar="MODEL.onnx")
    infer.add_argument("--input", required=True, metavar="IN.npy", help="float32 input tensor (numpy .npy)")
    infer.add_argument("--output", required=True, metavar="OUT.npy", help="where to save the output")
    _add_device_option(infer, cpu=True)
    infer.set_defaults(func=cmd_infer)

    inspect = sub.add_parser("inspect", help="nodes, dispatches, weights and planned memory of a model",
                             description="Print the nodes before and after the graph passes, the dispatch count, "
                             "the weights (MiB), the planned activation peak against one buffer per tensor "
                             "(MiB) and the pipelines a plan for this input shape uses.")
    inspect.add_argument("model", metavar="MODEL.onnx")
    inspect.add_argument("--shape", required=True, type=parse_shape, help="input shape, e.g. 1x3x736x736")
    inspect.add_argument("--json", action="store_true", help="print as JSON")
    _add_device_option(inspect, cpu=True)
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
    _add_device_option(compare, cpu=True)
    compare.set_defaults(func=cmd_debug_compare)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vkocr", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                        help="log events at this level and above go to stderr (default: warning)")
    parser.add_argument("--log-json", action="store_true", help="log as JSON lines")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    devices = sub.add_parser("devices", help="list Vulkan devices and the one vkocr would choose",
                             description="List every Vulkan device: name, type, vendor and driver, API version, "
                             "memory heaps, subgroup size, fp16/int8 support, workgroup limits, and which one "
                             "vkocr would choose and why.")
    devices.add_argument("--json", action="store_true", help="print the same information as JSON")
    _add_device_option(devices)
    devices.set_defaults(func=cmd_devices)
    from vkocr.agent.cli.ocr_command import add_arguments

    ocr = sub.add_parser("ocr", help="read text in images, locally",
                         description="Detect, classify and recognise text in each IMAGE with the default models "
                         "(RapidOCR 1.4.4's parameters), on the chosen Vulkan device or, with --device cpu, the "
                         "NumPy fallback. Exit status 1 when an image could not be read.")
    add_arguments(ocr)
    _add_device_option(ocr, cpu=True)
    ocr.set_defaults(func=cmd_ocr)
    _add_model_commands(sub)
    from vkocr.agent.cli.bundle_command import add_bundle_parser

    add_bundle_parser(sub)
    add_client_parser(sub)
    from vkocr.agent.cli.fleet_command import add_fleet_parser

    add_fleet_parser(sub)
    from vkocr.agent.cli.serve_command import add_serve_parser

    add_serve_parser(sub)

    bench = sub.add_parser("bench", help="benchmarks (run on the machine you want numbers for)")
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="WHAT", required=True)
    kernels = bench_sub.add_parser(
        "kernels",
        help="time GEMM, convolutions and elementwise kernels against a device copy",
        description="Time the core kernels with GPU timestamps (min and median after warm-up) and report "
        "TFLOP/s or GB/s against the ceilings measured in the same run (a large device copy for bandwidth, "
        "our best GEMM for arithmetic). Numbers from lavapipe (a CPU driver) are not speed claims.",
    )
    kernels.add_argument("--repeats", type=int, default=20, help="timed repetitions per kernel (default 20)")
    kernels.add_argument("--only", action="append", metavar="NAME", help="run only this case (repeatable)")
    kernels.add_argument("--json", action="store_true", help="print results as JSON")
    _add_device_option(kernels)
    kernels.set_defaults(func=cmd_bench_kernels)
    models = bench_sub.add_parser(
        "models",
        help="time det/cls/rec: ours, onnxruntime (CPU) and ncnn (Vulkan) in one run",
        description="Wall time numpy in -> numpy out (min and median after warm-up) of the PP-OCR models at "
        "det 1x3x736x736 and 1x3x544x960, rec 1x3x48x320 and 16x3x48x320, cls 16x3x48x192: ours (with GPU, "
        "upload and readback time from timestamps, and the dispatch count), onnxruntime on the CPU and ncnn "
        "on Vulkan, where installed.",
    )
    models.add_argument("--runs", type=int, default=20, help="timed runs per case (default 20)")
    models.add_argument("--only", action="append", choices=["det", "cls", "rec"], help="only this model")
    models.add_argument("--peers", type=Path, default=None, metavar="DIR",
                        help="folder with the ncnn models (default $VKOCR_SHARED/peers/ncnn-ppocrv4, VKOCR_SHARED defaulting "
                        "to ../shared)")
    models.add_argument("--json", action="store_true", help="print results as JSON")
    _add_device_option(models)
    models.set_defaults(func=cmd_bench_models)
    pipeline = bench_sub.add_parser(
        "pipeline",
        help="the whole OCR pipeline per image: ours against RapidOCR 1.4.4 (CPU) in one run",
        description="Median and p99 wall time per image of the whole pipeline (decode to result), our "
        "per-stage breakdown and the Python time outside GPU waits, against RapidOCR 1.4.4 on the CPU when "
        "installed; on the given images plus rendered document pages.",
    )
    pipeline.add_argument("images", nargs="*", metavar="IMAGE")
    pipeline.add_argument("--pages", type=int, default=4, help="rendered A4 pages to add (default 4)")
    pipeline.add_argument("--runs", type=int, default=10, help="timed runs per image (default 10)")
    pipeline.add_argument("--json", action="store_true", help="print results as JSON")
    _add_device_option(pipeline, cpu=True)
    pipeline.set_defaults(func=cmd_bench_pipeline)
    from vkocr.agent.cli.bench_agent import DEFAULT_CLIENTS, parse_clients

    agent_bench = bench_sub.add_parser(
        "agent",
        help="the gRPC agent over loopback: images/s and p50/p99 at 1, 4, 16 clients; what the overlap buys",
        description="Start an agent in this process on a loopback port and send it unary Recognize calls "
        "from N concurrent clients (one channel each), after one warm-up pass over every image: throughput "
        "and the clients' p50/p99 latency per client count. Then the same with a plugin chain configured "
        "(regex_fields, merge_lines), server.overlap on and off. Default images: RapidOCR's compat images.",
    )
    agent_bench.add_argument("images", nargs="*", metavar="IMAGE")
    agent_bench.add_argument("--pages", type=int, default=0, help="rendered A4 pages to add (default 0)")
    agent_bench.add_argument("--clients", type=parse_clients, default=DEFAULT_CLIENTS, metavar="N,N,…",
                             help="concurrent client counts (default 1,4,16)")
    agent_bench.add_argument("--requests", type=int, default=64,
                             help="calls per client count, at least one per client (default 64)")
    agent_bench.add_argument("--no-det", action="store_true",
                             help="no detection: the whole image is one line")
    agent_bench.add_argument("--no-cls", action="store_true", help="no direction classification")
    agent_bench.add_argument("--json", action="store_true", help="print results as JSON")
    _add_device_option(agent_bench, cpu=True)
    agent_bench.set_defaults(func=cmd_bench_agent)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_level, json=args.log_json)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except VkocrError as exc:
        print(f"vkocr: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
