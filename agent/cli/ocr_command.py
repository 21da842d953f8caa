"""`vkocr ocr IMAGE…`: the whole pipeline on local images, no server. One JSON object per image with --json."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vkocr.agent.errors import ImageError, OptionsError

if TYPE_CHECKING:
    from vkocr.postproc.result import OcrResult


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files (JPEG, PNG, BMP, TIFF, WebP, GIF)")
    p.add_argument("--json", action="store_true",
                   help='one JSON object per image, one per line: {"image", "lines": [{"text", "score", "box", '
                   '"angle"}], "timings_ms", "device"}')
    p.add_argument("--vis", metavar="OUT.png", type=Path,
                   help="draw boxes and text beside the image (several images: OUT-1.png, OUT-2.png, …)")
    p.add_argument("--no-det", action="store_true", help="no detection: the whole image is one line")
    p.add_argument("--no-cls", action="store_true", help="no direction classification")
    p.add_argument("--no-rec", action="store_true", help="no recognition: boxes only")
    p.add_argument("--text-score", type=float, help="drop lines scoring below this (default 0.5)")
    p.add_argument("--box-thresh", type=float, help="DB box score threshold (default 0.5)")
    p.add_argument("--unclip-ratio", type=float, help="DB box expansion (default 1.6)")
    p.add_argument("--no-exif", action="store_true", help="ignore EXIF orientation, as RapidOCR does")
    p.add_argument("--plugin", action="append", default=[], metavar="NAME",
                   help="postprocessing plugin to run, in order (built-in: regex_fields, merge_lines)")


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.no_det:
        out["use_det"] = False
    if args.no_cls:
        out["use_cls"] = False
    if args.no_rec:
        out["use_rec"] = False
    if args.no_exif:
        out["apply_exif"] = False
    for name in ("text_score", "box_thresh", "unclip_ratio"):
        if getattr(args, name) is not None:
            out[name] = getattr(args, name)
    return out


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

    options = OcrOptions().replace(**overrides(args), plugins=tuple(args.plugin))
    failed = 0
    with OcrPipeline.open(args.device, options=options) as ocr:
        for i, image in enumerate(args.images, start=1):
            try:
                result = ocr(image)
            except (ImageError, OptionsError) as exc:
                failed += 1
                if args.json:
                    print(json.dumps({"image": image, "error": str(exc), "device": ocr.device_name}, ensure_ascii=False))
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
                draw_result(decode_image(image, apply_exif=options.apply_exif), result).save(out)
                if not args.json:
                    print(f"  drawn to {out}")
    return 1 if failed else 0
