"""`vkocr calibrate`: measure which nodes of a model set may store fp16 (agent/ocr/calibration.py) and write the
set's precision plans."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

from vkocr.agent.cli.device_option import ENGINE_ONLY, add_device_option, saying_which_devices

DEFAULT_RENDERED = 12
RENDER_SEED = 20261205  # not the stream benchmark's seed: the calibration set is not the set it is judged on
MAX_INPUTS = 6  # inputs per model: the largest and most varied the images gave


def add_calibrate_parser(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help="measure which nodes of a model set may store fp16, and write its precision plans",
        description="Run calibration images through the CPU backend's pipeline, keep every input each model gets, "
        "then on the Vulkan device: measure every node's largest value in fp32 (a node within 16x of fp16's "
        "65504 stays fp32) and check that the proposed plan changes no decision the pipeline takes from a "
        "model's output (det's bitmap, cls's label, rec's character per step), keeping more nodes fp32 from "
        "the output backwards until it changes none. Writes the plans as JSON (the package ships them in "
        "agent/ocr/precision_plans/<set>.json).",
    )
    p.add_argument("images", nargs="*", type=Path, metavar="IMAGE", help="calibration images (any format vkocr "
                   "reads); rendered pages are added (--rendered)")
    p.add_argument("--models", metavar="NAME|DIR", default=None, help="model set or folder (default: the default set)")
    p.add_argument("--rendered", type=int, default=DEFAULT_RENDERED, metavar="N",
                   help=f"rendered pages of varied text, sizes and fonts to add (default {DEFAULT_RENDERED})")
    p.add_argument("--max-inputs", type=int, default=MAX_INPUTS, metavar="N",
                   help=f"recorded inputs per model to calibrate on, the largest first (default {MAX_INPUTS})")
    p.add_argument("--headroom", type=float, default=16.0, metavar="X",
                   help="a node stays fp32 when its largest value times X exceeds 65504 (default 16)")
    p.add_argument("--out", type=Path, default=None, metavar="FILE", help="write the plans here (default: print)")
    add_device_option(p)
    p.set_defaults(func=cmd_calibrate)


def pick(inputs: list[Any], count: int) -> list[Any]:
    """The `count` largest inputs (most pixels or crops), one of each shape first."""
    by_size = sorted(inputs, key=lambda x: -x.size)
    first_of_shape = list({tuple(x.shape): x for x in reversed(by_size)}.values())[::-1]
    chosen = sorted(first_of_shape, key=lambda x: -x.size)
    rest = [x for x in by_size if all(x is not c for c in chosen)]
    return (chosen + rest)[:count]


def cmd_calibrate(args: argparse.Namespace) -> int:
    from vkocr.agent.cli.stream_images import varied_images
    from vkocr.agent.ocr.calibration import RecordingStages, calibrate_role
    from vkocr.agent.ocr.images import decode_image
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.agent.ocr.pipeline import OcrPipeline, load_charset
    from vkocr.engine.device import Device
    from vkocr.engine.graph.onnx_import import load_onnx

    if args.max_inputs < 1 or args.rendered < 0 or not 1.0 <= args.headroom <= 1000.0:
        print("vkocr calibrate: --max-inputs ≥ 1, --rendered ≥ 0, --headroom in [1, 1000]", file=sys.stderr)
        return 2
    chosen = choose_models(args.models)
    images = [(str(path), decode_image(path)) for path in args.images]
    images += varied_images(args.rendered, seed=RENDER_SEED)
    if not images:
        print("vkocr calibrate: no images (give some, or --rendered N)", file=sys.stderr)
        return 2

    def say(text: str) -> None:
        print(f"calibrate: {text}", file=sys.stderr, flush=True)

    stages = RecordingStages(chosen.paths)
    pipeline = OcrPipeline(stages, load_charset(load_onnx(chosen.paths["rec"]).metadata), chosen.ocr_options())
    try:
        for i, (name, image) in enumerate(images, 1):
            say(f"[{i}/{len(images)}] {name}: {len(pipeline.recognize(image, decoded=True).lines)} lines")
    finally:
        pipeline.close()
    reports = {}
    with saying_which_devices(args.device, ENGINE_ONLY), Device(args.device) as device:
        for role in ("det", "cls", "rec"):
            inputs = pick(stages.inputs[role], args.max_inputs)
            if not inputs:
                say(f"{role}: the images gave it no input; it stays fp32")
                continue
            reports[role] = calibrate_role(role, chosen.paths[role], device, inputs, headroom=args.headroom,
                                           progress=say)
        device_name = device.info.name
    doc = {
        "models": {role: json.loads(r.plan.to_json()) for role, r in reports.items()},
        "gate": {"passed": False, "note": "not yet measured: the sameness gate runs the whole pipeline "
                 "(tests/agent/ocr/test_precision_gate.py, scripts/bench_precision.sh)"},
        "calibration": {
            "model_set": chosen.name, "date": date.today().isoformat(), "device": device_name,
            "images": len(images), "headroom": args.headroom,
            "roles": {role: {"inputs": r.inputs, "nodes": r.nodes, "out_of_range": r.out_of_range,
                             "kept_for_answers": r.kept_for_answers, "decisions": r.decisions,
                             "changed": r.changed, "largest": {n.node: round(n.max_abs, 3) for n in r.largest}}
                      for role, r in reports.items()},
        },
    }
    text = json.dumps(doc, indent=1) + "\n"
    if args.out is None:
        print(text, end="")
    else:
        args.out.write_text(text)
        say(f"wrote {args.out}")
    return 0
