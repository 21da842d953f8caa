"""The bounds of one request, without a server: option ranges, the pixels after every resize, the plugin chain
cache, salvaging a broken frame's id, and statuses cut to a size a client's metadata limit takes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest
from google.rpc import code_pb2, error_details_pb2

from vkocr.agent.errors import OptionsError, RequestError
from vkocr.agent.ocr.options import RANGES, OcrOptions
from vkocr.agent.ocr.plugin_chains import PluginChains
from vkocr.agent.ocr.request import RequestGeometry
from vkocr.agent.serving import rpc_status
from vkocr.agent.serving.admission import check_resized_pixels, resized_pixels
from vkocr.agent.serving.wire import option_field, salvaged_request_id
from vkocr.postproc.registry import PluginRegistry
from vkocr.v1 import ocr_pb2


@pytest.mark.parametrize("name", sorted(RANGES))
def test_every_numeric_option_refuses_non_finite_and_out_of_range_values(name: str) -> None:
    allowed = RANGES[name]
    default = getattr(OcrOptions(), name)
    assert default in allowed, f"the default of {name} is outside its own range"
    kind = type(default)
    bad: list[Any] = [allowed.high * 2 + 1, allowed.low - 1]
    if kind is float:
        bad += [math.nan, math.inf, -math.inf]
    if allowed.low_open:
        bad.append(kind(allowed.low))
    for value in bad:
        with pytest.raises(OptionsError) as caught:
            OcrOptions().replace(**{name: kind(value) if kind is int else value})
        assert caught.value.option == name and name in str(caught.value)


def test_choices_and_the_letterbox_ratio() -> None:
    for name, value in (("limit_type", "huge"), ("score_mode", ""), ("width_height_ratio", math.nan),
                        ("width_height_ratio", 0.0), ("plugins", ("x" * 65,)), ("plugins", ("a",) * 17)):
        with pytest.raises(OptionsError) as caught:
            OcrOptions().replace(**{name: value})
        assert caught.value.option == name
    assert OcrOptions().replace(width_height_ratio=-1.0).width_height_ratio == -1.0  # RapidOCR's "no letterbox"


def test_option_fields_are_the_wires_names() -> None:
    assert option_field("thresh") == "options.det_thresh"
    assert option_field("limit_side_len") == "options.limit_side_len"
    assert option_field("plugins") == "options.plugins.names"
    assert option_field("plugin_options") == "options.plugins.options"
    assert option_field("") == "options"


def test_pixels_after_every_resize() -> None:
    opts = OcrOptions()
    wide = opts.replace(limit_side_len=3000)
    assert resized_pixels(RequestGeometry.of(64, 200, wide)) == (3008 * 9376, (3008, 9376))
    assert resized_pixels(RequestGeometry.of(2000, 2000, opts)) == (1984 * 1984, (1984, 1984))
    assert resized_pixels(RequestGeometry.of(133, 2000, opts))[1] == (736, 2944)  # letterboxed first
    no_det = opts.replace(use_det=False)
    assert resized_pixels(RequestGeometry.of(6000, 6000, no_det)) == (1984 * 1984, (1984, 1984))  # reduced
    with pytest.raises(OptionsError) as caught:
        check_resized_pixels(RequestGeometry.of(64, 200, wide), wide, {"limit_side_len"})
    assert caught.value.option == "limit_side_len"
    with pytest.raises(RequestError) as refused:
        check_resized_pixels(RequestGeometry.of(2000, 100, opts), opts, set())
    assert (refused.value.field, refused.value.reason) == ("image", "too_large")
    check_resized_pixels(RequestGeometry.of(2000, 133, opts), opts, set())  # a 15:1 strip at the defaults fits


class Counting:
    name = "counting"
    built = 0

    def __init__(self, options: Mapping[str, Any]) -> None:
        Counting.built += 1

    def __call__(self, result: Any) -> dict[str, Any]:
        return {}


def test_chains_are_built_once_per_options_and_the_cache_is_bounded() -> None:
    chains = PluginChains(PluginRegistry({"counting": Counting}), size=2)
    base = OcrOptions(plugins=("counting",))
    first = chains.chain_for(base.replace(plugin_options={"counting": {"a": 1, "b": [1, 2]}}))
    again = chains.chain_for(base.replace(plugin_options={"counting": {"b": [1, 2], "a": 1}}))  # same, reordered
    assert first is again and Counting.built == 1
    assert chains.chain_for(base.replace(plugin_budget_ms=100.0)) is not first  # the budget is part of a chain
    assert chains.chain_for(base.replace(plugin_budget_ms=100.0)).budget_s == pytest.approx(0.1)
    for i in range(5):
        chains.chain_for(base.replace(plugin_options={"counting": {"i": i}}))
    assert len(chains) == 2 and Counting.built == 7


def stream_frame(request: bytes) -> bytes:
    """A RecognizeStreamRequest whose `request` (field 1) is these bytes, whatever they are."""
    assert len(request) < 128  # a one-byte length
    return b"\x0a" + bytes([len(request)]) + request


def test_a_broken_frames_id_is_salvaged_when_it_comes_first() -> None:
    whole = ocr_pb2.RecognizeRequest(request_id="s-2", encoded=b"png").SerializeToString()
    assert salvaged_request_id(stream_frame(whole + b"\xff\xff")) == "s-2"
    assert salvaged_request_id(stream_frame(whole) + b"\xff\xff") == "s-2"  # the frame broken after it
    assert salvaged_request_id(stream_frame(b"\x0a\x03s-2\xff\xff\xff\x07")) == "s-2"
    assert salvaged_request_id(b"\x0a\x40\x0a\x03s-2") == "s-2"  # a request cut short after its id
    assert salvaged_request_id(b"\xff\xff\xff") == "" and salvaged_request_id(b"") == ""
    assert salvaged_request_id(stream_frame(b"\x0a\x63short")) == ""  # an id whose length is past the end
    assert salvaged_request_id(whole) == ""  # a bare RecognizeRequest's id is no frame's: its field 1 is the id
    assert salvaged_request_id(stream_frame(b"\x12\x02\x0a\x01x")) == ""  # only the request's own id counts


def test_statuses_are_cut_to_fit_a_clients_metadata_limit() -> None:
    small = rpc_status.invalid_argument("bad", [("options.det_thresh", "must be ≤ 1")])
    assert rpc_status.bounded(small) == small
    huge = rpc_status.invalid_argument("é" * 10_000, [("f" * 5000, "d" * 5000, "r")] * 100)
    assert huge.code == code_pb2.INVALID_ARGUMENT and huge.message.endswith("…")
    assert len(huge.message.encode()) <= rpc_status.MAX_MESSAGE_BYTES
    assert huge.ByteSize() <= rpc_status.MAX_STATUS_BYTES
    bad = error_details_pb2.BadRequest()
    assert huge.details[0].Unpack(bad) and 1 <= len(bad.field_violations) <= rpc_status.MAX_VIOLATIONS
    assert bad.field_violations[0].field.endswith("…")
    trailers = rpc_status.as_grpc_status(huge).trailing_metadata
    assert sum(len(k) + len(v) for k, v in trailers) * 4 // 3 + len(huge.message.encode()) * 3 < 8 * 1024 // 2
