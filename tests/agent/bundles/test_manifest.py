"""The manifest parser refuses each malformed field with a message naming it; options are checked against
OcrOptions; command-line option assignments are typed by the option."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.agent.bundles.conftest import BundleFactory
from vkocr.agent.bundles.errors import BundleFormatError
from vkocr.agent.bundles.manifest import Manifest
from vkocr.agent.bundles.options import parse_assignment, split_options

Edit = Callable[[dict[str, Any]], None]


def _set(key: str, value: Any) -> Edit:
    return lambda doc: doc.__setitem__(key, value)


EDITS: list[tuple[str, Edit, str]] = [
    ("newer format", _set("format", 2), "bundle format 2 is not understood by this agent"),
    ("unknown field", _set("extras", 1), "unknown field.*'extras'"),
    ("missing field", lambda d: d.pop("self_tests"), "missing field.*'self_tests'"),
    ("naive time", _set("created", "2025-01-31T12:00:00"), "must be a UTC time"),
    ("bad sha256", lambda d: d["files"][0].__setitem__("sha256", "ABC"), r"files\[0\]\.sha256 must be 64"),
    ("negative size", lambda d: d["files"][1].__setitem__("size", -1), r"files\[1\]\.size must be a non-negative"),
    ("bad role", lambda d: d["files"][0].__setitem__("role", "detector"), r"files\[0\]\.role 'detector'"),
    ("escaping path", lambda d: d["files"][0].__setitem__("path", "../det.onnx"), "escapes the bundle"),
    ("reserved path", lambda d: d["files"][0].__setitem__("path", "manifest.sig"), "is a reserved name"),
    ("hidden path", lambda d: d["files"][0].__setitem__("path", ".installed.json"), "hidden"),
    ("model role names no file", lambda d: d["models"].__setitem__("rec", "gone.onnx"),
     "models.rec names 'gone.onnx', which is not in files"),
    ("model role names the wrong file", lambda d: d["models"].__setitem__("rec", "det.onnx"),
     "models.rec names 'det.onnx', whose role is 'det'"),
    ("option typo", lambda d: d["postprocess"].__setitem__("box_tresh", 0.5), "unknown option 'box_tresh'"),
    ("option in the wrong section", lambda d: d["preprocess"].__setitem__("box_thresh", 0.5),
     "option 'box_thresh' belongs in postprocess"),
    ("self-test of a missing image", lambda d: d["self_tests"][0].__setitem__("image", "selftest/gone.png"),
     r"self_tests\[0\]\.image 'selftest/gone\.png' is not in files"),
    ("self-test of a model", lambda d: d["self_tests"][0].__setitem__("image", "det.onnx"),
     "has role 'det', not 'selftest-image'"),
    ("empty expectation", lambda d: d["self_tests"][0].__setitem__("expect", " "), "expect must be non-empty"),
    ("bad signer", _set("signer", "me"), "signer must be null or a key fingerprint"),
]


@pytest.mark.parametrize("edit, reason", [e[1:] for e in EDITS], ids=[e[0] for e in EDITS])
def test_malformed_manifests_are_refused(make_bundle: BundleFactory, edit: Edit, reason: str) -> None:
    _, manifest = make_bundle()
    doc = json.loads(manifest.raw)
    Manifest.from_bytes(json.dumps(doc).encode())  # the unedited document parses
    edit(doc)
    with pytest.raises(BundleFormatError, match=reason):
        Manifest.from_bytes(json.dumps(doc).encode())


def test_not_json() -> None:
    with pytest.raises(BundleFormatError, match="manifest.json is not UTF-8 JSON"):
        Manifest.from_bytes(b"\xff{not json")


def test_serialisation_round_trip_and_content_digest(make_bundle: BundleFactory) -> None:
    _, manifest = make_bundle()
    again = Manifest.from_bytes(manifest.to_bytes())
    assert again == manifest and again.to_bytes() == manifest.raw
    assert manifest.with_signer(None).content_digest() == manifest.content_digest()
    _, other = make_bundle(version="1.0.1")
    assert other.content_digest() != manifest.content_digest()


def test_options_split_by_section_and_normalised() -> None:
    pre, post = split_options({"rec_batch": 8, "thresh": 0.25, "plugins": ["merge_lines"], "cls_thresh": 1})
    assert pre == {"rec_batch": 8}
    assert post == {"cls_thresh": 1.0, "plugins": ["merge_lines"], "thresh": 0.25}
    assert isinstance(post["cls_thresh"], float)


@pytest.mark.parametrize("text, expected", [
    ("use_dilation=false", ("use_dilation", False)),
    ("use_cls=ON", ("use_cls", True)),
    ("rec_batch=8", ("rec_batch", 8)),
    ("box_thresh=0.6", ("box_thresh", 0.6)),
    ("limit_type=max", ("limit_type", "max")),
    ("plugins=regex_fields, merge_lines", ("plugins", ("regex_fields", "merge_lines"))),
    ('plugin_options={"regex_fields": {"lot": "LOT \\\\d+"}}',
     ("plugin_options", {"regex_fields": {"lot": "LOT \\d+"}})),
])
def test_command_line_assignments_are_typed(text: str, expected: tuple[str, Any]) -> None:
    assert parse_assignment(text) == expected


@pytest.mark.parametrize("text, reason", [
    ("box_thresh", "not of the form key=value"),
    ("boxthresh=1", "unknown option 'boxthresh'"),
    ("rec_batch=eight", "cannot read 'eight' as int"),
    ("use_dilation=maybe", "expected true or false"),
    ("plugin_options=[1]", "expected a JSON object"),
])
def test_bad_command_line_assignments(text: str, reason: str) -> None:
    with pytest.raises(BundleFormatError, match=reason):
        parse_assignment(text)


def test_deep_nesting_is_refused_before_parsing(make_bundle: BundleFactory) -> None:
    """100,000 levels made json.loads raise RecursionError (answered INTERNAL); brackets in strings still parse."""
    _, manifest = make_bundle()
    doc = json.loads(manifest.raw)
    doc["postprocess"]["plugin_options"] = {"regex_fields": {"lot": "[[[[" * 20 + r"\"{{"}}
    Manifest.from_bytes(json.dumps(doc).encode())
    text = json.dumps(doc).replace('"postprocess": {', '"postprocess": {"deep": ' + "[" * 100_000 + "]" * 100_000
                                   + ", ", 1)
    with pytest.raises(BundleFormatError, match="nests deeper than 32 levels"):
        Manifest.from_bytes(text.encode())
