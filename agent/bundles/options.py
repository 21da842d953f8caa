"""The OCR options a bundle carries, split into its manifest's `preprocess` and `postprocess` sections.

Names and values are checked against OcrOptions, so a typo or an out-of-range value is refused when the
bundle is made and again when an agent reads it, not when the first request arrives.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from vkocr.agent.bundles.errors import BundleFormatError
from vkocr.agent.errors import OptionsError
from vkocr.agent.ocr.options import OcrOptions

# How an image becomes tensors: input limits, detector resize, classifier and recogniser input shapes.
PREPROCESS_FIELDS = frozenset({
    "max_side_len", "min_side_len", "min_height", "width_height_ratio", "max_pixels", "apply_exif",
    "limit_side_len", "limit_type", "cls_height", "cls_width", "cls_batch", "rec_height", "rec_width", "rec_batch",
})
# Everything else (thresholds, stage switches, plugins) shapes what comes out.
OPTION_FIELDS = {f.name: f for f in dataclasses.fields(OcrOptions)}
POSTPROCESS_FIELDS = frozenset(OPTION_FIELDS) - PREPROCESS_FIELDS


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def checked_options(options: Mapping[str, Any]) -> OcrOptions:
    """OcrOptions with `options` applied; an unknown name or a bad value is a BundleFormatError."""
    try:
        return OcrOptions().replace(**dict(options))
    except OptionsError as exc:
        raise BundleFormatError(f"bundle option refused: {exc}") from None


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(preprocess, postprocess) sections for a manifest, with values normalised by OcrOptions."""
    normalised = checked_options(options)
    pre = {k: _json_value(getattr(normalised, k)) for k in sorted(options) if k in PREPROCESS_FIELDS}
    post = {k: _json_value(getattr(normalised, k)) for k in sorted(options) if k in POSTPROCESS_FIELDS}
    return pre, post


def check_sections(preprocess: Mapping[str, Any], postprocess: Mapping[str, Any]) -> None:
    """A manifest's sections: each name in its own section, and all of them valid together."""
    for section, names, allowed in (("preprocess", preprocess, PREPROCESS_FIELDS),
                                    ("postprocess", postprocess, POSTPROCESS_FIELDS)):
        for name in names:
            if name in OPTION_FIELDS and name not in allowed:
                other = "postprocess" if section == "preprocess" else "preprocess"
                raise BundleFormatError(f"manifest: option {name!r} belongs in {other}, not {section}")
    checked_options({**preprocess, **postprocess})


def parse_assignment(text: str) -> tuple[str, Any]:
    """`key=value` from the command line, the value typed by the OcrOptions field: true/false for flags,
    numbers, text, comma-separated lists (plugins), JSON objects (plugin_options)."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise BundleFormatError(f"option {text!r} is not of the form key=value")
    field = OPTION_FIELDS.get(name)
    if field is None:
        raise BundleFormatError(f"unknown option {name!r}; known: {', '.join(sorted(OPTION_FIELDS))}")
    kind = type(getattr(OcrOptions(), name))
    try:
        if kind is bool:
            if raw.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise ValueError("expected true or false")
            return name, raw.lower() in ("true", "1", "yes", "on")
        if kind is tuple:
            return name, tuple(part.strip() for part in raw.split(",") if part.strip())
        if kind is dict:
            parsed = json.loads(raw)
            if not isinstance(parsed, dict):
                raise ValueError("expected a JSON object")
            return name, parsed
        return name, kind(raw)
    except ValueError as exc:
        raise BundleFormatError(f"option {name}: cannot read {raw!r} as {kind.__name__} ({exc})") from None
