"""The `vkocr` command line. Each subcommand is a small function; heavy imports happen inside it."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from agent.logs import configure_logging
from vk.errors import VkocrError

DESCRIPTION = """\
vkocr: PP-OCR text detection, direction classification and recognition on Vulkan compute shaders.

Commands available now:
  devices          list every Vulkan device, its features, and which one vkocr would use and why
  bench kernels    time the core kernels on the chosen device against measured ceilings
"""


def _add_device_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device",
        metavar="SEL",
        help="Vulkan device to use: index, UUID or part of the name (default: VKOCR_DEVICE, else the best ranked)",
    )


def cmd_devices(args: argparse.Namespace) -> int:
    from agent.devices_report import device_report, format_report

    report = device_report(args.device)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


def cmd_bench_kernels(args: argparse.Namespace) -> int:
    from vk.bench import format_results, run_kernel_bench

    results = run_kernel_bench(args.device, repeats=args.repeats, only=args.only, progress=not args.json)
    print(json.dumps(results, indent=2) if args.json else format_results(results))
    return 0


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
