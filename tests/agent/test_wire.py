"""vkocr.agent.serving.wire: options, images and results through real protobuf serialisation, both directions.

Images are random content of odd, non-square sizes so that a swapped axis, a wrong channel order or a byte
order mistake changes pixels; results carry real plugin output (regex_fields, merge_lines).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import fields as dataclass_fields
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from google.protobuf import struct_pb2
from PIL import Image

from vkocr.agent.errors import ImageError, OptionsError
from vkocr.agent.ocr.images import decode_image
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.serving.rpc_status import invalid_argument
from vkocr.agent.serving.wire import (
    image_from_proto,
    option_names,
    options_from_proto,
    options_to_proto,
    raw_image_to_proto,
    response_to_dict,
    result_from_proto,
    result_to_proto,
)
from vkocr.postproc.registry import build_chain
from vkocr.postproc.result import CharBox, OcrLine, OcrResult
from vkocr.v1 import ocr_pb2

H, W = 7, 13  # odd and unequal: a transposed image cannot pass
MAX_PIXELS = 40_000_000


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def wire(msg: Any) -> Any:
    """``msg`` after real serialisation, as the other side of the connection sees it."""
    return type(msg).FromString(msg.SerializeToString())


def raw_request(data: bytes, height: int, width: int, layout: int) -> ocr_pb2.RecognizeRequest:
    return wire(ocr_pb2.RecognizeRequest(raw=ocr_pb2.RawImage(data=data, height=height, width=width,
                                                                layout=layout)))


# --- images -------------------------------------------------------------------------------------------------

ARRAYS: dict[str, tuple[Callable[[np.random.Generator], npt.NDArray[Any]], int]] = {
    "gray8": (lambda r: r.integers(0, 256, (H, W), dtype=np.uint8), ocr_pb2.PIXEL_LAYOUT_GRAY8),
    "gray16": (lambda r: r.integers(0, 65536, (H, W), dtype=np.uint16), ocr_pb2.PIXEL_LAYOUT_GRAY16),
    "gray_alpha8": (lambda r: r.integers(0, 256, (H, W, 2), dtype=np.uint8), ocr_pb2.PIXEL_LAYOUT_GRAY_ALPHA8),
    "rgb8": (lambda r: r.integers(0, 256, (H, W, 3), dtype=np.uint8), ocr_pb2.PIXEL_LAYOUT_RGB8),
    "rgba8": (lambda r: r.integers(0, 256, (H, W, 4), dtype=np.uint8), ocr_pb2.PIXEL_LAYOUT_RGBA8),
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_array_round_trip(name: str) -> None:
    make, layout = ARRAYS[name]
    image = make(rng(len(name)))
    raw = raw_image_to_proto(image)
    assert (raw.layout, raw.height, raw.width) == (layout, H, W)
    back = image_from_proto(wire(ocr_pb2.RecognizeRequest(raw=raw)), MAX_PIXELS)
    assert isinstance(back, np.ndarray)
    assert back.dtype == image.dtype and back.shape == image.shape
    np.testing.assert_array_equal(back, image)
    # And the pipeline's decoder makes of it exactly what it makes of the caller's own array.
    np.testing.assert_array_equal(decode_image(back), decode_image(image))


def test_gray_with_one_channel_axis_is_gray() -> None:
    image = rng(1).integers(0, 256, (H, W, 1), dtype=np.uint8)
    raw = raw_image_to_proto(image)
    assert raw.layout == ocr_pb2.PIXEL_LAYOUT_GRAY8
    np.testing.assert_array_equal(image_from_proto(raw_request(raw.data, H, W, raw.layout), MAX_PIXELS),
                                  image[..., 0])


@pytest.mark.parametrize(("channels", "bgr_layout"), [(3, ocr_pb2.PIXEL_LAYOUT_BGR8), (4, ocr_pb2.PIXEL_LAYOUT_BGRA8)])
def test_bgr_layouts_arrive_as_rgb(channels: int, bgr_layout: int) -> None:
    rgb = rng(channels).integers(0, 256, (H, W, channels), dtype=np.uint8)
    bgr = rgb[..., [2, 1, 0, 3][:channels]]
    back = image_from_proto(raw_request(np.ascontiguousarray(bgr).tobytes(), H, W, bgr_layout), MAX_PIXELS)
    np.testing.assert_array_equal(back, rgb)
    assert raw_image_to_proto(bgr, "bgr").layout == bgr_layout  # the client says what an OpenCV array is
    np.testing.assert_array_equal(decode_image(back), decode_image(rgb))


def test_gray16_is_little_endian_on_the_wire() -> None:
    values = rng(3).integers(0, 65536, (H, W), dtype=np.uint16)
    values[0, 0], values[0, 1] = 0x1234, 0xABCD
    for order in ("<u2", ">u2"):  # whatever the caller's byte order, the wire is little-endian
        raw = raw_image_to_proto(values.astype(order))
        assert raw.data[:4] == b"\x34\x12\xcd\xab"
    back = image_from_proto(raw_request(values.astype("<u2").tobytes(), H, W, ocr_pb2.PIXEL_LAYOUT_GRAY16), MAX_PIXELS)
    assert isinstance(back, np.ndarray) and back.dtype == np.uint16
    np.testing.assert_array_equal(back, values)


def test_encoded_bytes_pass_through() -> None:
    pixels = rng(4).integers(0, 256, (H, W, 3), dtype=np.uint8)
    png = io.BytesIO()
    Image.fromarray(pixels).save(png, format="PNG")
    req = wire(ocr_pb2.RecognizeRequest(encoded=png.getvalue()))
    got = image_from_proto(req, MAX_PIXELS)
    assert got == png.getvalue()
    np.testing.assert_array_equal(decode_image(got), pixels)


def _raises(reason: str, match: str, req: ocr_pb2.RecognizeRequest, max_pixels: int = MAX_PIXELS) -> None:
    with pytest.raises(ImageError, match=match) as info:
        image_from_proto(req, max_pixels)
    assert info.value.reason == reason


def test_image_errors() -> None:
    good = rng(5).integers(0, 256, (H, W, 3), dtype=np.uint8).tobytes()
    _raises("empty", "carries no image", wire(ocr_pb2.RecognizeRequest(request_id="x")))
    _raises("empty", "0 bytes", wire(ocr_pb2.RecognizeRequest(encoded=b"")))
    unspecified = raw_request(good, H, W, ocr_pb2.PIXEL_LAYOUT_UNSPECIFIED)
    _raises("unsupported", "PIXEL_LAYOUT_UNSPECIFIED", unspecified)
    _raises("unsupported", "layout 99", raw_request(good, H, W, 99))  # a layout from a newer proto
    _raises("empty", "13×0", raw_request(good, 0, W, ocr_pb2.PIXEL_LAYOUT_RGB8))
    _raises("empty", "0×7", raw_request(good, H, 0, ocr_pb2.PIXEL_LAYOUT_RGB8))
    _raises("empty", "no data", raw_request(b"", H, W, ocr_pb2.PIXEL_LAYOUT_RGB8))
    _raises("corrupt", "272 bytes.*needs 13×7×3×1 = 273", raw_request(good[:-1], H, W, ocr_pb2.PIXEL_LAYOUT_RGB8))
    _raises("corrupt", "274 bytes", raw_request(good + b"\0", H, W, ocr_pb2.PIXEL_LAYOUT_RGB8))
    _raises("corrupt", "needs 13×7×1×2 = 182", raw_request(good[:181], H, W, ocr_pb2.PIXEL_LAYOUT_GRAY16))
    _raises("too_large", "91 pixels, more than the limit of 90", raw_request(good, H, W, ocr_pb2.PIXEL_LAYOUT_RGB8), 90)
    # Checked before the data: a 4-billion-pixel claim with 273 bytes is refused without allocating anything.
    _raises("too_large", "more than the limit", raw_request(good, 2**16, 2**16, ocr_pb2.PIXEL_LAYOUT_RGB8))


def test_arrays_the_wire_does_not_carry() -> None:
    cases: list[tuple[npt.NDArray[Any], str]] = [
        (np.full((H, W, 3), 0.5, np.float32), "unsupported"),
        (np.ones((H, W, 5), np.uint8), "unsupported"),
        (np.ones((H, W, 3), np.uint16), "unsupported"),
        (np.ones((2, H, W, 3), np.uint8), "unsupported"),
        (np.ones((H, W), np.int16), "unsupported"),
        (np.ones((0, W, 3), np.uint8), "empty"),
        (np.ones((H, 0), np.uint8), "empty"),
    ]
    for array, reason in cases:
        with pytest.raises(ImageError) as info:
            raw_image_to_proto(array)
        assert info.value.reason == reason, array.shape
        assert str(array.shape) in str(info.value)


# --- options ------------------------------------------------------------------------------------------------

EVERY_OPTION: dict[str, Any] = {  # each value differs from OcrOptions' default
    "use_det": False, "use_cls": False, "use_rec": False, "return_word_box": True, "text_score": 0.25,
    "thresh": 0.35, "box_thresh": 0.6, "unclip_ratio": 2.0, "cls_thresh": 0.8, "limit_side_len": 960,
    "limit_type": "max", "use_dilation": False, "score_mode": "slow", "max_side_len": 1500,
    "apply_exif": False, "use_doc_orientation": True, "doc_orientation_thresh": 0.75,
}


def test_every_wire_option_is_an_ocr_option() -> None:
    ours = {f.name for f in dataclass_fields(OcrOptions)}
    names = option_names()
    assert names["det_thresh"] == "thresh"
    assert set(names.values()) <= ours
    assert set(names.values()) == set(EVERY_OPTION)  # the test below covers every field


def test_options_both_ways() -> None:
    msg = wire(options_to_proto(**EVERY_OPTION))
    assert msg.det_thresh == pytest.approx(0.35) and msg.limit_type == ocr_pb2.LIMIT_TYPE_MAX
    assert msg.score_mode == ocr_pb2.SCORE_MODE_SLOW
    overrides = options_from_proto(msg)
    assert overrides == EVERY_OPTION  # float32 on the wire, the decimal the client wrote back out
    opts = OcrOptions().replace(**overrides)
    assert (opts.thresh, opts.limit_side_len, opts.use_cls, opts.score_mode) == (0.35, 960, False, "slow")


def test_unset_options_stay_unset() -> None:
    assert options_from_proto(wire(ocr_pb2.Options())) == {}
    msg = wire(ocr_pb2.Options(use_cls=False, det_thresh=0.0))  # explicit false and zero are set
    assert options_from_proto(msg) == {"use_cls": False, "thresh": 0.0}
    # an enum said UNSPECIFIED is unset: the agent's default, as when it is left out
    unspecified = ocr_pb2.Options(limit_type=ocr_pb2.LIMIT_TYPE_UNSPECIFIED, score_mode=ocr_pb2.SCORE_MODE_UNSPECIFIED)
    assert options_from_proto(wire(unspecified)) == {}
    assert options_from_proto(wire(ocr_pb2.Options(score_mode=ocr_pb2.SCORE_MODE_FAST))) == {"score_mode": "fast"}


def test_plugins_and_their_options() -> None:
    plugin_options = {"regex_fields": {"lot": {"pattern": r"LOT\s*(\w+)", "group": 1}},
                      "merge_lines": {"max_gap": 0.75, "separator": None}}
    msg = wire(options_to_proto(plugins=["regex_fields", "merge_lines"], plugin_options=plugin_options))
    assert list(msg.plugins.names) == ["regex_fields", "merge_lines"]
    assert isinstance(msg.plugins.options, struct_pb2.Struct)
    overrides = options_from_proto(msg)
    assert overrides == {"plugins": ("regex_fields", "merge_lines"), "plugin_options": plugin_options}
    assert type(overrides["plugin_options"]["regex_fields"]["lot"]["group"]) is int  # a Struct double before
    build_chain(overrides["plugins"], overrides["plugin_options"])  # the registry takes them as they are
    # Names without options: the deployment's options for them stay. An empty list: no plugins at all.
    only_names = options_from_proto(wire(options_to_proto(plugins=["merge_lines"])))
    assert only_names == {"plugins": ("merge_lines",)}
    assert options_from_proto(wire(options_to_proto(plugins=[]))) == {"plugins": ()}


def test_bad_options() -> None:
    with pytest.raises(OptionsError, match="rec_batch.*cannot be set per request"):
        options_to_proto(rec_batch=8)
    with pytest.raises(OptionsError, match="plugin_options needs plugins"):
        options_to_proto(plugin_options={"merge_lines": {}})
    with pytest.raises(OptionsError, match="use_cls"):
        options_to_proto(use_cls="no")
    with pytest.raises(OptionsError, match="sequence of names"):
        options_to_proto(plugins="merge_lines")
    # Ranges are the agent's to check, with OcrOptions' own messages.
    with pytest.raises(OptionsError, match=r"thresh must be within \[0, 1\]"):
        OcrOptions().replace(**options_from_proto(wire(ocr_pb2.Options(det_thresh=1.5))))
    with pytest.raises(OptionsError, match="'avg' is no LimitType; say one of min, max"):
        options_to_proto(limit_type="avg")
    with pytest.raises(OptionsError, match="said by name"):
        options_to_proto(score_mode=1)
    # a number this agent's enum does not have (proto3 keeps it): refused naming the option
    with pytest.raises(OptionsError, match="limit_type: 7 is no LimitType") as caught:
        options_from_proto(wire(ocr_pb2.Options(limit_type=7)))  # type: ignore[arg-type]
    assert caught.value.option == "limit_type"


# --- results ------------------------------------------------------------------------------------------------


def random_result(seed: int) -> OcrResult:
    """Lines with random boxes and scores, word boxes on some, then the real plugin chain over them."""
    r = rng(seed)
    texts = ["LOT A1B2C3", "EXP 2027-03-31", "正品促销", "净含量 1,25 kg", "no chars here"]
    lines = []
    for i, text in enumerate(texts):
        box = (r.random((4, 2)) * 500).tolist()
        chars = None
        if i % 2 == 0:
            chars = tuple(CharBox(ch, (r.random((4, 2)) * 500).tolist(), float(r.random()))
                          for ch in text[:3])
        lines.append(OcrLine(text, float(r.uniform(0.5, 1)), box, 180 if i == 2 else 0, chars))
    result = OcrResult(lines=lines, timings_ms={k: float(r.random() * 20) for k in ("decode", "det", "rec")})
    chain = build_chain(("regex_fields", "merge_lines"), {"regex_fields": {
        "lot": r"LOT\s*(\w+)",
        "expiry": {"pattern": r"EXP\s*(\d{4}-\d{2}-\d{2})", "type": "date"},
        "weight": {"pattern": r"(\d+[.,]\d+)\s*kg", "type": "float", "all": True},
        "count": {"pattern": r"(\d)", "type": "int"},
    }})
    chain.run(result)
    result.errors.append({"plugin": "stamp", "error": "RuntimeError: no stamp"})
    return result


def f32(value: Any) -> Any:
    """Floats rounded to float32, what the wire's `float` fields keep."""
    if isinstance(value, float):
        return float(np.float32(value))
    if isinstance(value, dict):
        return {k: f32(v) for k, v in value.items()}
    if isinstance(value, list):
        return [f32(v) for v in value]
    return value


def test_result_round_trip() -> None:
    result = random_result(7)
    assert {"lot", "expiry", "weight", "count", "paragraphs"} <= set(result.fields)  # the plugins found them
    resp = wire(result_to_proto(result, "req-1", "ppocr-v4-2025.1", "NVIDIA H200", (640, 480)))
    assert (resp.request_id, resp.model_version, resp.device) == ("req-1", "ppocr-v4-2025.1", "NVIDIA H200")
    assert (resp.image_width, resp.image_height) == (640, 480)
    back = result_from_proto(resp)
    assert len(back.lines) == len(result.lines)
    for got, sent in zip(back.lines, result.lines, strict=True):
        assert (got.text, got.angle) == (sent.text, sent.angle)
        assert got.score == f32(sent.score) and got.box == f32(sent.box)
        assert (got.chars is None) == (sent.chars is None)
        for got_char, sent_char in zip(got.chars or (), sent.chars or (), strict=True):
            assert (got_char.text, got_char.score, got_char.box) == (sent_char.text, f32(sent_char.score),
                                                                      f32(sent_char.box))
    assert back.fields == result.to_dict()["fields"]  # dates as ISO strings, ints as ints, doubles exact
    assert back.fields["expiry"] == "2027-03-31" and back.fields["count"] == result.fields["count"]
    assert back.errors == result.errors
    assert back.timings_ms == ns(result.timings_ms)
    assert set(resp.timings) == set(result.timings_ms) and resp.timings["det"].nanos > 0


def ns(timings_ms: dict[str, float]) -> dict[str, float]:
    """Timings in ms rounded to whole nanoseconds, what the wire's Durations keep."""
    return {name: round(ms * 1e6) / 1e6 for name, ms in timings_ms.items()}


def test_response_dict_is_ocr_result_dict() -> None:
    result = random_result(11)
    resp = wire(result_to_proto(result, "7", "v3", "cpu", (W, H)))
    got = response_to_dict(resp)
    expected = result.to_dict()
    expected["lines"] = f32(expected["lines"])
    expected["timings_ms"] = ns(expected["timings_ms"])
    assert got == {"request_id": "7", "model_version": "v3", "device": "cpu", **expected}
    assert list(got)[3:] == list(expected)  # same keys in the same order as `vkocr ocr --json`
    assert "chars" in got["lines"][0] and "chars" not in got["lines"][1]
    assert json.loads(json.dumps(got, ensure_ascii=False)) == got


def test_empty_result_has_only_lines_and_timings() -> None:
    resp = wire(result_to_proto(OcrResult(timings_ms={"total": 3.5}), "", "v", "cpu", (1, 1)))
    assert response_to_dict(resp) == {"request_id": "", "model_version": "v", "device": "cpu", "lines": [],
                                      "timings_ms": {"total": 3.5}}


def test_stream_answers() -> None:
    resp = ocr_pb2.RecognizeStreamResponse(request_id="3", error=invalid_argument(
        "bad image", [("image", "raw image is 13×0: no pixels", "empty")]))
    out = response_to_dict(wire(resp))
    assert out == {"request_id": "3", "model_version": "", "device": "",
                   "error": "INVALID_ARGUMENT: bad image; image: raw image is 13×0: no pixels (empty)"}
    answered = result_to_proto(random_result(5), "4", "v3", "cpu", (W, H))
    both = wire(ocr_pb2.RecognizeStreamResponse(request_id="4", response=answered))
    assert response_to_dict(both) == response_to_dict(answered)


def test_a_parsed_requests_wire_size_is_its_byte_count() -> None:
    """The lenient deserializer notes each message's size as parsed (the request's log line reports it without
    encoding the message again); a message it did not parse, or parsed in another context, is measured."""
    import contextvars

    from vkocr.agent.serving.malformed import lenient, wire_size

    rng = np.random.default_rng()
    h, w = (int(v) for v in rng.integers(5, 40, 2))
    raw = ocr_pb2.RawImage(data=rng.integers(0, 256, h * w * 3, np.uint8).tobytes(), height=h, width=w,
                           layout=ocr_pb2.PIXEL_LAYOUT_RGB8)
    data = ocr_pb2.RecognizeRequest(request_id="r", raw=raw).SerializeToString()
    parse = lenient(ocr_pb2.RecognizeRequest.FromString)
    first = parse(data)
    assert wire_size(first) == len(data) == first.ByteSize()
    other = ocr_pb2.RecognizeRequest(request_id="another", raw=raw).SerializeToString()
    second = parse(other)  # the note follows the latest parse; the first is measured again
    assert wire_size(second) == len(other) != len(data) and wire_size(first) == first.ByteSize()
    built = ocr_pb2.RecognizeRequest(request_id="longer id", raw=raw)
    assert wire_size(built) == built.ByteSize() != len(data)
    assert contextvars.Context().run(wire_size, first) == first.ByteSize()
