"""The OCR option flags, defined once for `vkocr ocr` (local) and `vkocr client ocr|stream` (an agent's).

Each flag is a field of OcrOptions, under RapidOCR 1.4.4's CLI name in kebab case where it has one
(`--det_limit_side_len` → `--det-limit-side-len`). A value is checked by OcrOptions' own validation (its
RANGES and CHOICES) while the command line is parsed, so one out of range is refused with the flag's name
before any model loads or image is read; --help shows each range. Locally the defaults are OcrOptions'; over
gRPC a flag left out keeps the agent's own setting, and only the options a request carries are offered.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vkocr.agent.errors import OptionsError
from vkocr.agent.ocr.options import CHOICES, NO_LETTERBOX, RANGES, WIDTH_HEIGHT_RATIO, OcrOptions

IMAGE_HELP = "image files (JPEG, PNG, BMP, TIFF, WebP, GIF)"


@dataclass(frozen=True)
class TuningFlag:
    """A flag that sets one numeric or choice field of OcrOptions."""

    names: tuple[str, ...]  # the first is the one --help leads with; the others are aliases (RapidOCR's)
    field: str  # the OcrOptions field
    metavar: str  # "" for a field with CHOICES: they are the metavar
    help: str
    remote: bool  # a request over gRPC carries it (ocr.proto's Options); False: `vkocr ocr` only
    group: str

    @property
    def dest(self) -> str:
        return self.names[0].removeprefix("--").replace("-", "_")

    @property
    def shown_as(self) -> str:
        return self.metavar or "{" + ",".join(CHOICES[self.field]) + "}"


TUNING_FLAGS: tuple[TuningFlag, ...] = (
    TuningFlag(("--text-score",), "text_score", "SCORE", "drop lines scoring below this", True, "global"),
    TuningFlag(("--max-side-len",), "max_side_len", "PX", "an image with a longer side is scaled down to it first",
               True, "global"),
    TuningFlag(("--min-side-len",), "min_side_len", "PX", "an image with a shorter side is scaled up to it first",
               False, "global"),
    TuningFlag(("--min-height",), "min_height", "PX",
               "an image shorter than this gets a white letterbox before detection", False, "global"),
    TuningFlag(("--width-height-ratio",), "width_height_ratio", "RATIO",
               "an image wider than this many times its height gets a letterbox", False, "global"),
    TuningFlag(("--max-pixels",), "max_pixels", "N", "an image (or PDF page) with more pixels is refused before "
               "it is decoded (also VKOCR_OCR_MAX_PIXELS, as the agent's [ocr] max_pixels)", False, "global"),
    TuningFlag(("--det-thresh",), "thresh", "P", "detection map probability that counts as text", True, "det"),
    TuningFlag(("--box-thresh", "--det-box-thresh"), "box_thresh", "SCORE",
               "drop DB boxes whose mean probability is below this", True, "det"),
    TuningFlag(("--unclip-ratio", "--det-unclip-ratio"), "unclip_ratio", "RATIO",
               "how far DB boxes grow around the text", True, "det"),
    TuningFlag(("--det-limit-side-len",), "limit_side_len", "PX",
               "the detector's input: the side --det-limit-type names is scaled to at least (min) or at most "
               "(max) this", True, "det"),
    TuningFlag(("--det-limit-type",), "limit_type", "", "which side --det-limit-side-len bounds", True,
               "det"),
    TuningFlag(("--det-score-mode",), "score_mode", "",
               "box score over the box's rectangle (fast) or its polygon (slow)", True, "det"),
    TuningFlag(("--cls-thresh",), "cls_thresh", "P", "classifier confidence needed to turn a line 180°", True,
               "cls"),
    TuningFlag(("--doc-orientation-thresh",), "doc_orientation_thresh", "P",
               "page orientation confidence needed to turn a page (with --use-doc-orientation)", True, "global"),
    TuningFlag(("--rec-batch-num",), "rec_batch", "N", "lines per recognition batch (RapidOCR groups lines of "
               "similar width/height into batches of this many)", False, "rec"),
)
GROUPS = {"global": "input and output", "det": "detection (DB)", "cls": "direction classification",
          "rec": "recognition"}


def option_value(field: str) -> Callable[[str], Any]:
    """The argparse type of a flag setting OcrOptions `field`: the text as the field's type, checked by
    OcrOptions' validation (its message names the field and the allowed values)."""
    kind = type(getattr(OcrOptions(), field))

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}"
                                             ) from None
        try:
            OcrOptions().replace(**{field: value})
        except OptionsError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    return parse


def allowed(field: str) -> str:
    """The values a field takes, as --help shows them ("" for choices: argparse lists those)."""
    if field in CHOICES:
        return ""
    if field == "width_height_ratio":
        return f"{WIDTH_HEIGHT_RATIO}, or {NO_LETTERBOX:g}: never"
    return str(RANGES[field])


def add_ocr_flags(p: argparse.ArgumentParser, *, remote: bool, images_help: str = IMAGE_HELP,
                  images_metavar: str = "IMAGE") -> None:
    """The image arguments and every OCR option flag; `remote`: the defaults are the agent's, and only the
    options a request carries."""
    defaults = OcrOptions()

    def default(value: object) -> str:
        return "the agent's" if remote else str(value)  # over gRPC, a flag left out keeps the agent's

    p.add_argument("images", nargs="+", metavar=images_metavar, help=images_help)
    p.add_argument("--no-det", action="store_true", help="no detection: the whole image is one line")
    p.add_argument("--no-cls", action="store_true", help="no direction classification")
    p.add_argument("--no-rec", action="store_true", help="no recognition: boxes only")
    p.add_argument("--no-exif", action="store_true", help="ignore EXIF orientation, as RapidOCR does")
    p.add_argument("--use-doc-orientation", action="store_true",
                   help="turn each page upright first (0/90/180/270 classifier); boxes stay in the image's frame "
                   "and the answer says page_angle")
    p.add_argument("--word-boxes", "--return-word-box", dest="word_boxes", action="store_true",
                   help="per-character (CJK) or per-word boxes in each line")
    plugins = p.add_mutually_exclusive_group()
    plugins.add_argument("--plugin", action="append", metavar="NAME",
                         help="postprocessing plugin to run, in order (built-in: regex_fields, merge_lines; "
                         f"default: {default('none')})")
    plugins.add_argument("--no-plugins", action="store_true", help="run no postprocessing plugin")
    groups = {key: p.add_argument_group(title) for key, title in GROUPS.items()}
    for flag in TUNING_FLAGS:
        if remote and not flag.remote:
            continue
        values = allowed(flag.field)
        groups[flag.group].add_argument(
            *flag.names, dest=flag.dest, type=option_value(flag.field), metavar=flag.shown_as,
            help=f"{flag.help}{'; ' + values if values else ''} (default {default(getattr(defaults, flag.field))})")
    groups["det"].add_argument("--det-no-dilation", "--det-donot-use-dilation", dest="det_no_dilation",
                               action="store_true", help="do not dilate the detection mask")


def option_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The OcrOptions fields the flags set; a flag left out sets nothing."""
    out: dict[str, Any] = {}
    for flag, field in (("no_det", "use_det"), ("no_cls", "use_cls"), ("no_rec", "use_rec"),
                        ("no_exif", "apply_exif"), ("det_no_dilation", "use_dilation")):
        if getattr(args, flag):
            out[field] = False
    for tuning in TUNING_FLAGS:
        value = getattr(args, tuning.dest, None)  # a local-only flag is absent from a client's arguments
        if value is not None:
            out[tuning.field] = value
    if args.word_boxes:
        out["return_word_box"] = True
    if args.use_doc_orientation:
        out["use_doc_orientation"] = True
    if args.no_plugins:
        out["plugins"] = ()
    elif args.plugin:
        out["plugins"] = tuple(args.plugin)
    return out
