"""The OCR option flags, defined once for `vkocr ocr` (local) and `vkocr client ocr|stream` (an agent's).

Each flag is a field of OcrOptions; OcrOptions.replace checks its range, so a value out of range is refused
with the field's name before any image is read. Locally the defaults are OcrOptions'; over gRPC a flag left
out keeps the agent's own setting.
"""

from __future__ import annotations

import argparse
from typing import Any

from vkocr.agent.ocr.options import OcrOptions

IMAGE_HELP = "image files (JPEG, PNG, BMP, TIFF, WebP, GIF)"


def add_ocr_flags(p: argparse.ArgumentParser, *, remote: bool) -> None:
    """The image arguments and every OCR option flag; `remote`: the defaults are the agent's."""
    defaults = OcrOptions()

    def default(value: object) -> str:
        return "the agent's" if remote else str(value)  # over gRPC, a flag left out keeps the agent's

    p.add_argument("images", nargs="+", metavar="IMAGE", help=IMAGE_HELP)
    p.add_argument("--no-det", action="store_true", help="no detection: the whole image is one line")
    p.add_argument("--no-cls", action="store_true", help="no direction classification")
    p.add_argument("--no-rec", action="store_true", help="no recognition: boxes only")
    p.add_argument("--text-score", type=float, metavar="SCORE",
                   help=f"drop lines scoring below this, 0 to 1 (default {default(defaults.text_score)})")
    p.add_argument("--box-thresh", type=float, metavar="SCORE",
                   help=f"DB box score threshold, 0 to 1 (default {default(defaults.box_thresh)})")
    p.add_argument("--unclip-ratio", type=float, metavar="RATIO",
                   help=f"DB box expansion, > 0 (default {default(defaults.unclip_ratio)})")
    p.add_argument("--no-exif", action="store_true", help="ignore EXIF orientation, as RapidOCR does")
    p.add_argument("--word-boxes", action="store_true", help="per-character (CJK) or per-word boxes in each line")
    plugins = p.add_mutually_exclusive_group()
    plugins.add_argument("--plugin", action="append", metavar="NAME",
                         help="postprocessing plugin to run, in order (built-in: regex_fields, merge_lines; "
                         f"default: {default('none')})")
    plugins.add_argument("--no-plugins", action="store_true", help="run no postprocessing plugin")


def option_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The OcrOptions fields the flags set; a flag left out sets nothing."""
    out: dict[str, Any] = {}
    for flag, field in (("no_det", "use_det"), ("no_cls", "use_cls"), ("no_rec", "use_rec"),
                        ("no_exif", "apply_exif")):
        if getattr(args, flag):
            out[field] = False
    for name in ("text_score", "box_thresh", "unclip_ratio"):
        if getattr(args, name) is not None:
            out[name] = getattr(args, name)
    if args.word_boxes:
        out["return_word_box"] = True
    if args.no_plugins:
        out["plugins"] = ()
    elif args.plugin:
        out["plugins"] = tuple(args.plugin)
    return out
