"""`vkocr ocr IMAGE…`: the whole pipeline on local images, no server. One JSON object per image with --json."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vkocr.agent.cli.device_option import add_device_option
from vkocr.agent.cli.ocr_flags import add_ocr_flags, option_overrides
from vkocr.agent.errors import ImageError, OptionsError

if TYPE_CHECKING:
    from vkocr.postproc.result import OcrResult


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_ocr_flags(p, remote=False)
    p.add_argument("--json", action="store_true",
                   help='one JSON object per image, one per line: {"image", "lines": [{"text", "score", "box", '
                   '"angle"}], "timings_ms", "device"}')
    p.add_argument("--vis", metavar="OUT.png", type=Path,
                   help="draw the result: the image with each line's box filled and outlined, beside it each "
                   "line's text fitted inside the same box (several images: OUT-1.png, OUT-2.png, …)")
    p.add_argument("--vis-scores", action="store_true",
                   help="with --vis: tag each box on the image with its recognition score")


def vis_path(base: Path, index: int, count: int) -> Path:
    return base if count == 1 else base.with_name(f"{base.stem}-{index}{base.suffix or '.png'}")


def format_text(image: str, result: OcrResult, device: str) -> str:
    """The readable form of one image's result (also `vkocr client ocr`'s): a header, a line per text line,
    then plugin fields and plugin failures."""
    total_ms = result.timings_ms.get("total", sum(result.timings_ms.values()))  # the agent reports a total
    out = [f"{image}: {len(result.lines)} lines ({device}, {total_ms:.0f} ms)"]
    for line in result.lines:
        angle = " (180°)" if line.angle else ""
        out.append(f"  {line.score:.3f}  {line.text}{angle}")
    for key, value in result.fields.items():
        out.append(f"  field {key}: {value}")
    for error in result.errors:
        out.append(f"  plugin {error['plugin']} failed: {error['error']}")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    from vkocr.agent.ocr.images import decode_image
    from vkocr.agent.ocr.options import OcrOptions
    from vkocr.agent.ocr.pipeline import OcrPipeline

    if args.vis_scores and args.vis is None:
        args.usage_error("--vis-scores tags the boxes of the --vis drawing: give --vis OUT.png too")
    options = OcrOptions().replace(**option_overrides(args))
    failed = 0
    with OcrPipeline.open(args.device, options=options) as ocr:
        for i, image in enumerate(args.images, start=1):
            try:
                result = ocr(image)
            except (ImageError, OptionsError) as exc:
                failed += 1
                if args.json:
                    print(json.dumps({"image": image, "error": str(exc), "device": ocr.device_name},
                                     ensure_ascii=False))
                else:
                    print(f"{image}: error: {exc}", file=sys.stderr)
                continue
            if args.json:
                print(result.to_json(image=image, device=ocr.device_name), flush=True)
            else:
                print(format_text(image, result, ocr.device_name))
            if args.vis is not None:
                from vkocr.agent.ocr.visualize import draw_result

                out = vis_path(args.vis, i, len(args.images))
                picture = decode_image(image, apply_exif=options.apply_exif)
                draw_result(picture, result, scores=args.vis_scores).save(out)
                if not args.json:
                    print(f"  drawn to {out}")
    return 1 if failed else 0


def add_ocr_parser(sub: Any) -> None:
    ocr = sub.add_parser("ocr", help="read text in images, locally",
                         description="Detect, classify and recognise text in each IMAGE with the default models "
                         "(RapidOCR 1.4.4's parameters), on the chosen Vulkan GPU, else on the CPU backend "
                         "(onnxruntime; --device cpu names it, --device numpy the reference executor). Exit "
                         "status 1 when an image could not be read.")
    add_arguments(ocr)
    add_device_option(ocr, cpu=True)
    ocr.set_defaults(func=run, usage_error=ocr.error)
