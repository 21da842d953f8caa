"""`vkocr ocr INPUT…`: the whole pipeline on local images and PDFs, no server. One JSON object per image (or
PDF page) with --json."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from vkocr.agent.cli.device_option import add_device_option
from vkocr.agent.cli.ocr_flags import add_ocr_flags, option_overrides
from vkocr.agent.cli.ocr_inputs import DEFAULT_PDF_DPI, PDF_DPI_RANGE, Inputs, OcrInput
from vkocr.agent.cli.progress import Progress
from vkocr.agent.errors import ImageError, OptionsError
from vkocr.agent.ocr.options import PRECISIONS, RANGES

if TYPE_CHECKING:
    from vkocr.agent.ocr.model_sets import ChosenModels
    from vkocr.agent.ocr.options import OcrOptions
    from vkocr.agent.ocr.pipeline import OcrPipeline
    from vkocr.postproc.result import OcrResult

MAX_PIXELS_VARIABLE: Final = "VKOCR_OCR_MAX_PIXELS"  # the agent's [ocr] max_pixels (agent/serving/config.py)
INPUT_HELP = ("image files (JPEG, PNG, BMP, TIFF, WebP, GIF, PNM), PDFs (every page, rendered), directories "
              "(their images and PDFs, sorted by name, not recursive), or - (one image or PDF on stdin)")
DESCRIPTION = """\
Detect, classify and recognise text in each INPUT with a model set (default ppocrv6-small: RapidOCR 3.10's
models and procedure; --models ppocrv4: RapidOCR 1.4.4's; `vkocr models list` shows them) or the files given, on
the chosen Vulkan GPU, else on the CPU backend (onnxruntime; --device cpu names it, --device
numpy the reference executor). RapidOCR's own options are here under their kebab-case names (--det_thresh is
--det-thresh); each shows the values it takes.
"""
EXAMPLES = """\
examples:
  vkocr ocr label.jpg
  vkocr ocr scans/ --json > lines.jsonl            # every image and PDF page in scans/, one JSON line each
  vkocr ocr invoice.pdf --pdf-dpi 300              # pages are named invoice.pdf#page=1, #page=2, …
  cat scan.pdf | vkocr ocr - --json                # an image or a PDF on stdin
  vkocr ocr page.png --det-limit-type max --det-limit-side-len 960 --det-thresh 0.4 --word-boxes
  vkocr ocr page.png --models ppocrv6-small         # PP-OCRv6 small, read as RapidOCR 3.10 reads
  vkocr ocr page.png --rec-model my_rec.onnx --rec-keys my_keys.txt

--version prints vkocr's version. Exit status: 0, or 1 when an input could not be read (the others are read and
printed all the same), 2 for a usage error (an option out of range, a missing model file, a keys file that does
not fit the recogniser).
"""


def existing_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    return path


def pdf_dpi(text: str) -> float:
    low, high = PDF_DPI_RANGE
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be within [{low:g}, {high:g}], got {text}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_ocr_flags(p, remote=False, images_help=INPUT_HELP, images_metavar="INPUT")
    p.add_argument("--json", action="store_true",
                   help='one JSON object per image or PDF page, one per line: {"image", "lines": [{"text", '
                   '"score", "box", "angle"}], "timings_ms", "device"}; an input that failed: {"image", "error"}')
    p.add_argument("--vis", metavar="OUT.png", type=Path,
                   help="draw the result: the image with each line's box filled and outlined, beside it each "
                   "line's text fitted inside the same box (several images: OUT-1.png, OUT-2.png, …)")
    p.add_argument("--vis-scores", action="store_true",
                   help="with --vis: tag each box on the image with its recognition score")
    p.add_argument("--progress", action="store_true",
                   help="a progress bar on stderr (shown anyway when stderr is a terminal and there are several "
                   "inputs; never on stdout)")
    p.add_argument("--pdf-dpi", type=pdf_dpi, default=DEFAULT_PDF_DPI, metavar="DPI",
                   help=f"resolution PDF pages are rendered at, {PDF_DPI_RANGE[0]:g} to {PDF_DPI_RANGE[1]:g} "
                   f"(default {DEFAULT_PDF_DPI:g})")
    models = p.add_argument_group("models (default: the ppocrv6-small set, the PP-OCRv6 small models of RapidOCR 3.10)")
    models.add_argument("--models", metavar="NAME|DIR",
                        help="a model set (ppocrv6-small, ppocrv4) or a folder holding one (its modelset.toml, "
                        "else a known set's file names); the set's procedure comes with it, and the flags below "
                        "replace single files of it")
    for role, what in (("det", "text detection"), ("cls", "direction classifier"), ("rec", "recognition")):
        models.add_argument(f"--{role}-model", f"--{role}-model-path", dest=f"{role}_model", type=existing_file,
                            metavar="FILE.onnx", help=f"the {what} model (PaddleOCR's, exported to ONNX)")
    models.add_argument("--rec-keys", "--rec-keys-path", dest="rec_keys", type=existing_file, metavar="FILE",
                        help="the recogniser's dictionary, one character per line as PaddleOCR's (default: the "
                        "one in the rec model's metadata); its length must fit the model's output")


def vis_path(base: Path, index: int, count: int) -> Path:
    return base if count == 1 else base.with_name(f"{base.stem}-{index}{base.suffix or '.png'}")


def format_text(image: str, result: OcrResult, device: str) -> str:
    """The readable form of one image's result (also `vkocr client ocr`'s): a header, a line per text line,
    then plugin fields and plugin failures."""
    total_ms = result.timings_ms.get("total", sum(result.timings_ms.values()))  # the agent reports a total
    count = len(result.lines)
    out = [f"{image}: {count} line{'' if count == 1 else 's'} ({device}, {total_ms:.0f} ms)"]
    for line in result.lines:
        angle = " (180°)" if line.angle else ""
        out.append(f"  {line.score:.3f}  {line.text}{angle}")
    for key, value in result.fields.items():
        out.append(f"  field {key}: {value}")
    for error in result.errors:
        out.append(f"  plugin {error['plugin']} failed: {error['error']}")
    return "\n".join(out)


def chosen_models(args: argparse.Namespace) -> ChosenModels:
    """The set --models names (the default one without it), with the files the flags name in their place."""
    from vkocr.agent.ocr.model_sets import choose_models

    given = {role: getattr(args, f"{role}_model") for role in ("det", "cls", "rec")}
    models = choose_models(args.models).with_files({role: path for role, path in given.items() if path is not None})
    missing = models.missing()
    if missing:
        from vkocr.agent.errors import ModelSetError

        fetch = " (scripts/fetch_models.py fetches the known sets)" if models.known else ""
        raise ModelSetError(f"model set {models.name}: missing {', '.join(map(str, missing))}{fetch}")
    return models


def use_keys_file(ocr: OcrPipeline, charset: list[str], path: Path) -> None:
    """Decode with `charset` (from a keys file) instead of the rec model's own dictionary, once it is known to
    have one entry per class the model outputs (a dictionary off by one reads every character wrong)."""
    from vkocr.postproc.ctc import check_classes

    opts = ocr.options
    classes = ocr.stages.rec_output_shape((1, 3, opts.rec_height, opts.rec_width))[-1]
    check_classes(charset, int(classes), f"the keys file {path}")
    ocr.charset = charset


def check_batch(ocr: OcrPipeline, options: OcrOptions) -> None:
    if options.rec_batch > ocr.stages.max_batch:
        raise OptionsError(f"--rec-batch-num {options.rec_batch}: at most {ocr.stages.max_batch} lines go in one "
                           f"batch on {ocr.backend}", option="rec_batch")


def max_pixels_from(env: Mapping[str, str]) -> dict[str, int]:
    """The agent's [ocr] max_pixels as its environment variable sets it, for `vkocr ocr` too (--max-pixels
    wins); checked against the option's range, the message naming the variable."""
    text = env.get(MAX_PIXELS_VARIABLE)
    if text is None:
        return {}
    from vkocr.agent.ocr.options import OcrOptions

    try:
        value = int(text.replace("_", ""))
        OcrOptions().replace(max_pixels=value)
    except ValueError:
        raise OptionsError(f"{MAX_PIXELS_VARIABLE}: {text!r} is not an integer", option="max_pixels") from None
    except OptionsError as exc:
        raise OptionsError(f"{MAX_PIXELS_VARIABLE}: {exc}", option="max_pixels") from None
    return {"max_pixels": value}


def run(args: argparse.Namespace) -> int:
    from vkocr.agent.ocr.pipeline import OcrPipeline

    if args.vis_scores and args.vis is None:
        args.usage_error("--vis-scores tags the boxes of the --vis drawing: give --vis OUT.png too")
    if args.vis is not None and not args.vis.parent.is_dir():  # said now, not after the OCR ran
        args.usage_error(f"--vis {args.vis}: {args.vis.parent} is no folder")
    models = chosen_models(args)
    options = models.ocr_options({**max_pixels_from(os.environ), **option_overrides(args)})
    charset = None
    if args.rec_keys is not None:
        from vkocr.postproc.ctc import load_keys_file

        charset = load_keys_file(args.rec_keys)  # an unreadable or empty file is refused before models load
    with Inputs(args.images, dpi=args.pdf_dpi, max_pixels=options.max_pixels) as inputs, \
            OcrPipeline.open(args.device, options=options, model_paths=models.paths, precision=args.precision,
                             model_set=models.known.name if models.known is not None else None) as ocr:
        if charset is not None:
            use_keys_file(ocr, charset, args.rec_keys)
        check_batch(ocr, options)
        failed = 0
        with Progress(len(inputs.items), forced=args.progress) as progress:
            for index, item in enumerate(inputs.items, start=1):
                failed += not read_one(ocr, item, args, progress, vis_index=(index, len(inputs.items)))
                progress.advance()
    return 1 if failed else 0


def read_one(ocr: OcrPipeline, item: OcrInput, args: argparse.Namespace, progress: Progress, *,
             vis_index: tuple[int, int]) -> bool:
    """Read one input and print its result (or its error); False when it could not be read."""
    try:
        source = item.read()
        result = ocr(source)
    except (ImageError, OptionsError) as exc:
        if isinstance(exc, ImageError) and exc.reason == "too_large":
            exc = ImageError("too_large", f"{exc}; --max-pixels (or {MAX_PIXELS_VARIABLE}) raises the limit, up "
                             f"to {int(RANGES['max_pixels'].high):,}")
        if args.json:
            progress.print(json.dumps({"image": item.name, "error": str(exc), "device": ocr.device_name},
                                      ensure_ascii=False))
        else:
            progress.print(f"{item.name}: error: {exc}", err=True)
        return False
    if args.json:
        progress.print(result.to_json(image=item.name, device=ocr.device_name))
    else:
        progress.print(format_text(item.name, result, ocr.device_name))
    if args.vis is not None:
        from vkocr.agent.ocr.images import decode_image
        from vkocr.agent.ocr.procedures import PROCEDURES
        from vkocr.agent.ocr.visualize import draw_result

        out = vis_path(args.vis, *vis_index)
        opts = ocr.options
        pixels = decode_image(source, apply_exif=opts.apply_exif, rgba=PROCEDURES[opts.procedure].rgba)
        draw_result(pixels, result, scores=args.vis_scores).save(out)
        if not args.json:
            progress.print(f"  drawn to {out}")
    return True


def add_ocr_parser(sub: Any) -> None:
    ocr = sub.add_parser("ocr", help="read text in images and PDFs, locally", description=DESCRIPTION,
                         epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ocr)
    add_device_option(ocr, cpu=True)
    ocr.add_argument("--precision", choices=PRECISIONS, default="auto",
                     help="storage precision on a GPU: auto (the default: fp16 where the model set's calibrated "
                     "plan passed its sameness gate, else fp32), fp32, fp16; the CPU backend computes in fp32")
    ocr.set_defaults(func=run, usage_error=ocr.error)
