"""`vkocr bench kernels|models|pipeline|stream|agent|startup`: the benchmarks (run where you want numbers)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vkocr.agent.cli.bench_charts import render_chart, require_matplotlib  # light: matplotlib only when drawing
from vkocr.agent.cli.device_option import ENGINE_ONLY, add_device_option, saying_which_devices
from vkocr.agent.ocr.options import PRECISIONS

# the kernel bench's cases (vk/bench.py's CASE_NAMES, which imports the engine: a test keeps them in step)
KERNEL_CASES = ("gemm", "gemm_fp16", "conv3x3", "depthwise3x3", "depthwise7x7", "conv1x1", "add")


def cmd_bench_kernels(args: argparse.Namespace) -> int:
    from vkocr.engine.bench import format_results, run_kernel_bench

    with saying_which_devices(args.device, ENGINE_ONLY):
        results = run_kernel_bench(args.device, repeats=args.repeats, only=args.only, progress=not args.json)
    print(json.dumps(results, indent=2) if args.json else format_results(results))
    return 0


def precision_list(text: str) -> list[str]:
    """"fp32,fp16" → ["fp32", "fp16"] (fp32 always first: the others are compared with it)."""
    asked = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in asked if p not in ("fp32", "fp16")]
    if unknown or not asked:
        raise argparse.ArgumentTypeError(f"{text!r}: expected fp32, fp16 or both, comma-separated")
    return ["fp32", *(p for p in dict.fromkeys(asked) if p != "fp32")]


def cmd_bench_models(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.bench_models import format_model_results, run_model_bench

    with saying_which_devices(args.device, ENGINE_ONLY):
        results = run_model_bench(args.device, runs=args.runs, peers_dir=args.peers, only=args.only,
                                  progress=not args.json, models=args.models, precisions=tuple(args.precision))
    print(json.dumps(results, indent=2) if args.json else format_model_results(results))
    return 0


def cmd_bench_pipeline(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.bench_pipeline import format_pipeline_results, run_pipeline_bench

    results = run_pipeline_bench(args.device, args.images, pages=args.pages, runs=args.runs,
                                 progress=not args.json)
    print(json.dumps(results, indent=2, ensure_ascii=False) if args.json else format_pipeline_results(results))
    return 0


def cmd_bench_stream(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.bench_stream import format_stream_results, run_stream_bench, stream_paths

    if args.plot:
        require_matplotlib()  # before the run, not after it
    try:
        paths = stream_paths(args.images)
    except FileNotFoundError as exc:
        args.usage_error(str(exc))
    if not paths and args.rendered == 0:
        args.usage_error("no images: give image files or folders, or --rendered N with N > 0")
    results = run_stream_bench(args.device, paths, rendered=args.rendered, passes=args.passes,
                               rapid=not args.no_rapidocr, warm_sizes=[] if args.no_warm else None,
                               rec_width_bucket=args.rec_width_bucket, models=args.models,
                               precision=args.precision)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(format_stream_results(results))
    write_plot(args.plot, results)
    return 0


def png_path(text: str) -> Path:
    """An argparse type: a path ending in .png (the charts are PNG files)."""
    if Path(text).suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(f"{text!r}: the chart is a PNG file, give a path ending in .png")
    return Path(text)


def write_plot(path: Path | None, results: dict[str, Any]) -> None:
    """The chart of `results` at `path` (agent/cli/bench_charts.py), its path on stderr; nothing when None."""
    if path is None:
        return
    print(f"chart: {render_chart(results, path)}", file=sys.stderr)


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in low..high, else a usage error naming the range."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range {low}..{high}")
        return value
    return parse


def cmd_bench_agent(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.bench_agent import load_images, run_agent_bench
    from vkocr.agent.cli.bench_agent_report import format_agent_results

    if args.plot:
        require_matplotlib()  # before the run, not after it
    options = {**({"use_det": False} if args.no_det else {}), **({"use_cls": False} if args.no_cls else {})}
    try:
        images = load_images(args.images, args.rendered, args.seed, raw=args.raw)
    except FileNotFoundError as exc:
        args.usage_error(str(exc))
    if max(args.clients) > len(images):
        args.usage_error(f"{max(args.clients)} clients need at least {max(args.clients)} distinct images (no image "
                         f"is sent twice in a level), got {len(images)}: add --rendered N")
    results = run_agent_bench(args.device, images, clients=args.clients, modes=args.modes, request_options=options,
                              reference=args.reference, runs=args.runs, passes=args.passes, precision=args.precision)
    print(json.dumps(results, indent=2, ensure_ascii=False) if args.json else format_agent_results(results))
    write_plot(args.plot, results)
    return 0


def cmd_bench_startup(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.bench_startup import format_startup_results, run_startup_bench

    results = run_startup_bench(args.image, cache_dir=args.cache_dir, config=args.config, device=args.device,
                                warm_shapes=args.warm_shapes, timeout_s=args.timeout)
    print(json.dumps(results, indent=2, ensure_ascii=False) if args.json else format_startup_results(results))
    return 0


def add_bench_parser(sub: Any) -> None:
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
    kernels.add_argument("--only", action="append", choices=KERNEL_CASES, metavar="NAME",
                         help=f"run only this case (repeatable): {', '.join(KERNEL_CASES)}")
    kernels.add_argument("--json", action="store_true", help="print results as JSON")
    add_device_option(kernels)
    kernels.set_defaults(func=cmd_bench_kernels)
    models = bench_sub.add_parser(
        "models",
        help="time det/cls/rec: ours, onnxruntime (CPU) and ncnn (Vulkan) in one run",
        description="Wall time numpy in -> numpy out (min and median after warm-up) of the PP-OCR models at "
        "det 1x3x736x1024, 1x3x736x736 and 1x3x544x960, rec 1x3x48x320 and 16x3x48x320, cls 16x3x48x192 and "
        "ori 1x3x224x224 (where the set has the page-orientation model): ours (with GPU, upload and readback "
        "time from timestamps, and the dispatch count) in each storage precision "
        "asked for, onnxruntime on the CPU and ncnn on Vulkan, where installed.",
    )
    models.add_argument("--precision", type=precision_list, default=["fp32"], metavar="LIST",
                        help="storage precisions of ours, comma-separated: fp32, fp16 (fp16: every node stores "
                        "fp16 but the outputs' producers; its output's error against fp32's is reported; "
                        "default fp32)")
    models.add_argument("--runs", type=int, default=20, help="timed runs per case (default 20)")
    models.add_argument("--only", action="append", choices=["det", "cls", "rec", "ori"],
                        help="only this model (ori: the page-orientation model, where the set has it)")
    models.add_argument("--peers", type=Path, default=None, metavar="DIR",
                        help="folder with the ncnn models (default $VKOCR_SHARED/peers/ncnn-ppocrv4, VKOCR_SHARED "
                        "defaulting to ../shared)")
    models.add_argument("--models", metavar="NAME|DIR", default=None,
                        help="the model set (ppocrv6-small, ppocrv4) or a folder holding one (default: the default "
                        "set); ncnn runs for ppocrv4 only, whose conversions it has")
    models.add_argument("--json", action="store_true", help="print results as JSON")
    add_device_option(models)
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
    add_device_option(pipeline, cpu=True)
    pipeline.set_defaults(func=cmd_bench_pipeline)
    stream = bench_sub.add_parser(
        "stream",
        help="the whole pipeline on a stream of distinct images, each read once per pass, against RapidOCR",
        description="Read a stream of distinct images (the files and folders given, then images rendered at "
        "many sizes and aspects), each once per pass, after warming up on one image outside the stream. "
        "Pass 1 meets every image's shapes for the first time: it pays for recording the det plan of each new "
        "image aspect and the rec plan of each new line-batch width, as real traffic does. Pass 2 reads the "
        "same images again with those plans cached: the steady state. Per pass: median, p99 and min wall time "
        "per image, the Python time outside GPU waits (in all and per stage), plans built and the memory they "
        "hold; then the host time of a new shape, and the model set's reference (RapidOCR 1.4.4 for ppocrv4, "
        "3.10.0 for ppocrv6-small; CPU) once over the same stream, with the share of lines identical to its "
        "lines (boxes paired by IoU >= 0.5).",
    )
    stream.add_argument("images", nargs="*", metavar="IMAGE_OR_DIR",
                        help="image files, or folders (their .jpg/.jpeg/.png/.bmp/.webp files, sorted)")
    stream.add_argument("--rendered", type=int_in(0, 1000), default=24, metavar="N",
                        help="images of the varied rendered set to add (default 24; 0 = none)")
    stream.add_argument("--passes", type=int_in(1, 10), default=2, metavar="N",
                        help="passes over the stream, 1..10 (default 2)")
    stream.add_argument("--no-rapidocr", action="store_true", help="do not run RapidOCR")
    stream.add_argument("--no-warm", action="store_true",
                        help="skip the warm-up the agent does before it serves (recording the plans of its default "
                        "warm_shapes): then pass 1 also grows the plans' shared memory as larger images come")
    stream.add_argument("--models", metavar="NAME|DIR", default=None,
                        help="the model set (ppocrv6-small, ppocrv4) or a folder holding one (default: the default "
                        "set); its procedure names the reference run beside it: RapidOCR 1.4.4 or 3.10.0")
    stream.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help="storage precision on a GPU (default auto: fp16 where the model set's calibrated plan "
                        "passed its sameness gate, else fp32)")
    stream.add_argument("--rec-width-bucket", type=int_in(1, 256), default=None, metavar="PX",
                        help="round rec batch widths up to a multiple of PX (default: the option's default; 1: "
                        "RapidOCR's widths exactly)")
    stream.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write the full results as JSON to PATH")
    stream.add_argument("--plot", type=png_path, default=None, metavar="PATH.png",
                        help="also write a chart of the run to PATH.png: the latency of every image, ours pass 1 "
                        "and pass 2 against RapidOCR, sorted, log scale, medians marked (needs matplotlib: "
                        "pip install 'vkocr[plots]'; scripts/plot_benchmarks.py draws it from a saved --json)")
    add_device_option(stream, cpu=True)
    stream.set_defaults(func=cmd_bench_stream, usage_error=stream.error)
    from vkocr.agent.cli.bench_agent import (
        DEFAULT_CLIENTS,
        MAX_PASSES,
        MODES,
        RUN_KEYS,
        parse_clients,
        parse_modes,
        parse_runs,
    )

    agent_bench = bench_sub.add_parser(
        "agent",
        help="the gRPC agent over loopback on a stream of distinct images: images/s, p50/p99, errors, GPU busy "
        "at 1, 4, 16, 64 clients, unary and streaming",
        description="Start an agent in this process on a loopback port; its clients run in another process, one "
        "channel and connection each. After one warm-up pass over every image (plans recorded, each "
        "image's texts noted), every level sends every image exactly once from N concurrent clients: "
        "unary Recognize calls, or one RecognizeStream per client with one frame in flight. Per level: "
        "answered images/s, p50/p99 latency at the client, errors by status code (an answer whose texts "
        "are not its image's counts as WRONG_TEXTS), the GPU's busy fraction from its timestamps, the "
        "agent's CPU cores in use, and the requests each read batched. Then the same with cross-request "
        "batching off, with the overlap off (one request at a time), with decode processes, and with a "
        "plugin chain (regex_fields, merge_lines). Images: the files and folders given (default: "
        "RapidOCR's compat images where the workspace has them, VKOCR_SHARED or ../shared; in a plain "
        "clone, none) plus the varied rendered set of `vkocr bench stream`, sent as files (PNG for the "
        "rendered), or with --raw as decoded pixels.",
    )
    agent_bench.add_argument("images", nargs="*", metavar="IMAGE_OR_DIR",
                             help="image files, or folders (their .jpg/.jpeg/.png/.bmp/.webp files, sorted)")
    agent_bench.add_argument("--rendered", type=int_in(0, 4000), default=96, metavar="N",
                             help="images of the varied rendered set to add, sent as PNG (default 96; 0 = none)")
    agent_bench.add_argument("--seed", type=int_in(0, 2**31 - 1), default=0, metavar="S",
                             help="the rendered set's seed (default 0, the one `vkocr bench stream` renders)")
    agent_bench.add_argument("--clients", type=parse_clients, default=DEFAULT_CLIENTS, metavar="N,N,…",
                             help=f"concurrent client counts, each ≤ the number of images (default "
                             f"{','.join(map(str, DEFAULT_CLIENTS))})")
    agent_bench.add_argument("--modes", type=parse_modes, default=MODES, metavar="MODE,…",
                             help=f"unary, stream or both (default {','.join(MODES)})")
    agent_bench.add_argument("--runs", type=parse_runs, default=tuple(RUN_KEYS.values()), metavar="RUN,…",
                             help=f"which deployments to measure, of {', '.join(RUN_KEYS)} (default: all; "
                             "no-batching: throughput.batch_requests = 1, no-overlap: experimental.overlap = false "
                             "(one request at a time), decode-processes: experimental.decode_processes = half the "
                             "cores up to 8, plugins: a plugin chain)")
    agent_bench.add_argument("--passes", type=int_in(1, MAX_PASSES), default=1, metavar="N",
                             help=f"passes over the images per level, 1..{MAX_PASSES} (default 1): every image is "
                             "sent once per pass, so more passes make a longer level of distinct images, less of it "
                             "the first and last requests' ramp")
    agent_bench.add_argument("--precision", choices=PRECISIONS, default=None,
                             help="the agents' storage precision on a GPU (default: the configuration's, auto); "
                             "fp16 serves the model set's calibrated plan")
    agent_bench.add_argument("--raw", action="store_true",
                             help="send every image as decoded RGB8 pixels (RawImage), as a camera sends frames, "
                             "instead of its file (PNG for the rendered): no decoding in the agent")
    agent_bench.add_argument("--reference", action="store_true",
                             help="then run the default model set's reference (RapidOCR, on the CPU) once over the "
                             "same images in one process, one at a time, and give each level's images/s against "
                             "its images/s (what an agent on a board without a GPU is measured against)")
    agent_bench.add_argument("--no-det", action="store_true",
                             help="no detection: the whole image is one line")
    agent_bench.add_argument("--no-cls", action="store_true", help="no direction classification")
    agent_bench.add_argument("--json", action="store_true", help="print results as JSON")
    agent_bench.add_argument("--plot", type=png_path, default=None, metavar="PATH.png",
                             help="also write a chart of the run to PATH.png: throughput and p99 against the "
                             "client count, a line per run (needs matplotlib: pip install 'vkocr[plots]'; "
                             "scripts/plot_benchmarks.py draws it from saved --json output)")
    add_device_option(agent_bench, cpu=True)
    agent_bench.set_defaults(func=cmd_bench_agent, usage_error=agent_bench.error)
    startup = bench_sub.add_parser(
        "startup",
        help="`vkocr serve` from process start to SERVING and to the first answer, cold and with the cache",
        description="Spawn `vkocr serve --listen 127.0.0.1:0` as a fresh process, poll grpc.health.v1 until "
        "SERVING, send one Recognize of IMAGE (then a second), stop it with SIGTERM: ms from the spawn to "
        "SERVING and to the first answer. Twice: with an empty Vulkan pipeline cache (VKOCR_CACHE_DIR), then "
        "with the cache the first run saved. Plaintext on loopback only.",
    )
    startup.add_argument("image", type=Path, metavar="IMAGE", help="the image of the first request")
    startup.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                         help="pipeline-cache folder, empty or new (default: a temporary one, removed after)")
    startup.add_argument("--config", type=Path, default=None, metavar="FILE", help="the agent's TOML config")
    startup.add_argument("--warm-shapes", default=None, metavar="WxH,…",
                         help="override [plans] warm_shapes (VKOCR_PLANS_WARM_SHAPES; \"\" = no warm-up)")
    startup.add_argument("--timeout", type=float, default=600.0, metavar="S",
                         help="seconds one run may take to its answers (default 600)")
    startup.add_argument("--json", action="store_true", help="print results as JSON")
    add_device_option(startup, cpu=True)
    startup.set_defaults(func=cmd_bench_startup)
