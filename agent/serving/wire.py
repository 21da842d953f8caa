"""Protobuf ↔ Python objects for the OCR service, both directions.

The agent's side: per-request ``Options`` → OcrOptions overrides, a request's image → what
``vkocr.agent.ocr.images.decode_image`` takes, an ``OcrResult`` → ``RecognizeResponse``. The client's side: overrides →
``Options``, NumPy arrays → ``RawImage``, a ``RecognizeResponse`` → ``OcrResult`` and DESIGN.md's JSON shape,
so ``vkocr ocr --json`` and ``vkocr client ocr --json`` print the same thing. Validation of option values
stays in ``OcrOptions.replace``; decoding stays in ``decode_image``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
from google.protobuf import json_format, struct_pb2

from vkocr.agent.errors import ImageError, OptionsError
from vkocr.agent.serving.durations import duration_from_ms, ms_of
from vkocr.agent.serving.proto_enums import enum_name, enum_number
from vkocr.agent.serving.rpc_status import describe_status
from vkocr.postproc.result import CharBox, OcrLine, OcrResult, jsonable
from vkocr.v1 import ocr_pb2

# Options fields whose OcrOptions name differs; every other field has the same name on both sides.
_OPTION_NAMES: Final[dict[str, str]] = {"det_thresh": "thresh"}
_PROTO_NAMES: Final[dict[str, str]] = {ours: theirs for theirs, ours in _OPTION_NAMES.items()}
_FLOAT32_FIELDS: Final = frozenset(
    f.name for f in ocr_pb2.Options.DESCRIPTOR.fields if f.type == f.TYPE_FLOAT
)
_SCALAR_OPTION_FIELDS: Final[tuple[str, ...]] = tuple(
    f.name for f in ocr_pb2.Options.DESCRIPTOR.fields if f.message_type is None
)
# limit_type, score_mode: enums on the wire, "min"/"max" and "fast"/"slow" in OcrOptions; UNSPECIFIED is unset
_ENUM_FIELDS: Final = {f.name: f.enum_type for f in ocr_pb2.Options.DESCRIPTOR.fields if f.enum_type is not None}


# --- options ------------------------------------------------------------------------------------------------


def options_from_proto(msg: ocr_pb2.Options) -> dict[str, Any]:
    """The fields ``msg`` sets, as OcrOptions overrides (``OcrOptions.replace(**overrides)`` validates them).

    ``plugins`` set → ``plugins`` (a tuple, possibly empty: run none) and, when ``plugins.options`` is set,
    ``plugin_options``; without options the deployment's options for those plugins stay.
    """
    out: dict[str, Any] = {}
    for name in _SCALAR_OPTION_FIELDS:
        if name in _ENUM_FIELDS:
            if getattr(msg, name):
                out[_OPTION_NAMES.get(name, name)] = _enum_option(name, getattr(msg, name))
            continue
        if not msg.HasField(name):
            continue
        value = getattr(msg, name)
        if name in _FLOAT32_FIELDS:
            # The wire carries float32: 0.3 arrives as 0.30000001192…; the client meant the decimal it wrote.
            value = float(str(np.float32(value)))
        out[_OPTION_NAMES.get(name, name)] = value
    if msg.HasField("plugins"):
        out["plugins"] = tuple(msg.plugins.names)
        if msg.plugins.HasField("options"):
            out["plugin_options"] = struct_to_dict(msg.plugins.options)
    return out


def _enum_option(name: str, number: int) -> str:
    try:
        return enum_name(_ENUM_FIELDS[name], number)
    except ValueError as exc:
        raise OptionsError(f"{name}: {exc}", option=_OPTION_NAMES.get(name, name)) from None


def option_field(option: str) -> str:
    """The request's field path of an OcrOptions name: ``thresh`` → ``options.det_thresh``, ``plugins`` →
    ``options.plugins.names``; ``options`` when there is no name."""
    if not option:
        return "options"
    if option in ("plugins", "plugin_options"):
        return "options.plugins." + ("names" if option == "plugins" else "options")
    return f"options.{_PROTO_NAMES.get(option, option)}"


def options_to_proto(**overrides: Any) -> ocr_pb2.Options:
    """``Options`` from OcrOptions names (``thresh``, ``use_cls``, ``plugins``, ``plugin_options``, …).

    Raises OptionsError for a name the wire does not carry per request (e.g. ``rec_batch``) or a value of the
    wrong type; ranges are the agent's to check.
    """
    msg = ocr_pb2.Options()
    plugins = overrides.pop("plugins", None)
    plugin_options = overrides.pop("plugin_options", None)
    for name, value in overrides.items():
        field = _PROTO_NAMES.get(name, name)
        if field not in _SCALAR_OPTION_FIELDS:
            settable = sorted(_OPTION_NAMES.get(n, n) for n in _SCALAR_OPTION_FIELDS)
            raise OptionsError(
                f"option {name!r} cannot be set per request; settable: {', '.join(settable)}, plugins, "
                "plugin_options"
            )
        try:
            if field in _ENUM_FIELDS:
                if not isinstance(value, str):
                    raise TypeError(f"{_ENUM_FIELDS[field].name} is said by name")
                value = enum_number(_ENUM_FIELDS[field], value)
            setattr(msg, field, value)
        except (TypeError, ValueError) as exc:
            raise OptionsError(f"option {name}: {value!r} does not fit the wire field ({exc})") from None
    if plugin_options is not None and plugins is None:
        # An Options with PluginSelection but no names would run no plugin at all: refuse the surprise.
        raise OptionsError("plugin_options needs plugins: the names of the plugins to run, in order")
    if plugins is not None:
        if isinstance(plugins, str):
            raise OptionsError(f"plugins must be a sequence of names, not the string {plugins!r}")
        msg.plugins.names.extend(plugins)
        if plugin_options is not None:
            msg.plugins.options.update(jsonable(plugin_options))
    return msg


def struct_to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as a dict, with whole numbers back as ints: Struct numbers are doubles, and plugin options
    such as a regex group number must be ints again."""
    as_dict: dict[str, Any] = _whole_numbers_as_ints(json_format.MessageToDict(struct))
    return as_dict


def _whole_numbers_as_ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers_as_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers_as_ints(v) for v in value]
    return value


# --- requests that do not parse ------------------------------------------------------------------------------

_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5
_REQUEST_ID_FIELD: Final = ocr_pb2.RecognizeRequest.DESCRIPTOR.fields_by_name["request_id"].number
_STREAM_REQUEST_FIELD: Final = ocr_pb2.RecognizeStreamRequest.DESCRIPTOR.fields_by_name["request"].number


def salvaged_request_id(data: bytes) -> str:
    """The ``request_id`` of bytes that do not parse as a RecognizeStreamRequest, when its ``request`` (the
    last, as protobuf reads it) has the id in the fields before its broken part (the last there too); ""
    otherwise. Reads those two levels only, never deeper."""
    found = ""
    for number, value in _length_delimited_fields(data, cut_short=True):
        if number == _STREAM_REQUEST_FIELD:
            found = _salvaged_id(value) or found
    return found


def _salvaged_id(data: bytes) -> str:
    found = ""
    for number, value in _length_delimited_fields(data, cut_short=False):
        if number == _REQUEST_ID_FIELD:
            found = value.decode("utf-8", errors="replace")
    return found


def _length_delimited_fields(data: bytes, *, cut_short: bool) -> list[tuple[int, bytes]]:
    """(field number, bytes) of the top-level length-delimited fields that can be read before a broken part.
    ``cut_short``: a last field that the data ends inside counts too, with what it has (a truncated frame's
    request still starts with the client's id); otherwise it is part of the broken part."""
    fields: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        if key is None:
            break
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            value, pos = _varint(data, pos)
            if value is None:
                break
        elif wire_type in (_FIXED64, _FIXED32):
            pos += 8 if wire_type == _FIXED64 else 4
        elif wire_type == _LENGTH_DELIMITED:
            length, pos = _varint(data, pos)
            if length is None or (pos + length > len(data) and not cut_short):
                break
            fields.append((number, data[pos:pos + length]))
            pos += length
        else:  # groups, or not a wire type at all: nothing after this can be read
            break
    return fields


def _varint(data: bytes, pos: int) -> tuple[int | None, int]:
    value = 0
    for shift in range(0, 70, 7):
        if pos >= len(data):
            return None, pos
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    return None, pos


# --- images -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    channels: int
    dtype: np.dtype[Any]
    to_rgb: tuple[int, ...] | None = None  # channel order that turns BGR(A) into RGB(A)


_U8: Final = np.dtype(np.uint8)
_LAYOUTS: Final[dict[int, _Layout]] = {
    ocr_pb2.PIXEL_LAYOUT_GRAY8: _Layout(1, _U8),
    ocr_pb2.PIXEL_LAYOUT_GRAY16: _Layout(1, np.dtype("<u2")),
    ocr_pb2.PIXEL_LAYOUT_GRAY_ALPHA8: _Layout(2, _U8),
    ocr_pb2.PIXEL_LAYOUT_RGB8: _Layout(3, _U8),
    ocr_pb2.PIXEL_LAYOUT_BGR8: _Layout(3, _U8, (2, 1, 0)),
    ocr_pb2.PIXEL_LAYOUT_RGBA8: _Layout(4, _U8),
    ocr_pb2.PIXEL_LAYOUT_BGRA8: _Layout(4, _U8, (2, 1, 0, 3)),
}


def image_from_proto(req: ocr_pb2.RecognizeRequest, max_pixels: int) -> bytes | npt.NDArray[np.generic]:
    """The request's image as ``decode_image`` takes it: encoded bytes as they are, raw pixels as an array.

    Raw pixels become H×W (GRAY8 uint8, GRAY16 uint16), H×W×2 (GRAY_ALPHA8), H×W×3 RGB or H×W×4 RGBA uint8
    (BGR8/BGRA8 reordered). The array may be a read-only view of the message's bytes. Raises ImageError:
    "empty" (no image, no bytes, zero width or height), "unsupported" (layout unset or unknown),
    "too_large" (more than ``max_pixels``, checked before any allocation), "corrupt" (byte count does not
    match height × width × channels × sample size).
    """
    kind = req.WhichOneof("image")
    if kind is None:
        raise ImageError("empty", "the request carries no image (set `encoded` or `raw`)")
    if kind == "encoded":
        encoded = req.encoded  # (each read of a bytes field copies it)
        if not encoded:
            raise ImageError("empty", "encoded image is empty (0 bytes)")
        return encoded
    return _raw_pixels(req.raw, max_pixels)


def _raw_pixels(raw: ocr_pb2.RawImage, max_pixels: int) -> npt.NDArray[np.generic]:
    layout = _LAYOUTS.get(raw.layout)
    if layout is None:
        known_values = ocr_pb2.PixelLayout.values()
        name = ocr_pb2.PixelLayout.Name(raw.layout) if raw.layout in known_values else str(raw.layout)
        known = ", ".join(ocr_pb2.PixelLayout.Name(k) for k in _LAYOUTS)
        raise ImageError("unsupported", f"raw image layout {name} is not accepted; say one of {known}")
    h, w = raw.height, raw.width
    if h == 0 or w == 0:
        raise ImageError("empty", f"raw image is {w}×{h}: no pixels")
    if h * w > max_pixels:
        raise ImageError(
            "too_large", f"raw image is {w}×{h} = {w * h:,} pixels, more than the limit of {max_pixels:,}"
        )
    data = raw.data  # once: each read of a bytes field copies it (6 MB for a 1080p RGB frame)
    if not data:
        raise ImageError("empty", f"raw image ({w}×{h}) carries no data (0 bytes)")
    expected = h * w * layout.channels * layout.dtype.itemsize
    if len(data) != expected:
        layout_name = ocr_pb2.PixelLayout.Name(raw.layout)
        raise ImageError(
            "corrupt",
            f"raw image data is {len(data):,} bytes; {w}×{h} {layout_name} needs "
            f"{w}×{h}×{layout.channels}×{layout.dtype.itemsize} = {expected:,}",
        )
    pixels = np.frombuffer(data, dtype=layout.dtype)
    pixels = pixels.reshape((h, w) if layout.channels == 1 else (h, w, layout.channels))
    if layout.dtype.byteorder not in ("=", "|"):
        pixels = pixels.astype(pixels.dtype.newbyteorder("="))  # GRAY16 is little-endian on the wire
    if layout.to_rgb is not None:
        pixels = pixels[..., list(layout.to_rgb)]
    return pixels


def raw_image_to_proto(
    image: npt.NDArray[np.generic], channel_order: Literal["rgb", "bgr"] = "rgb"
) -> ocr_pb2.RawImage:
    """A NumPy image as RawImage: uint8 H×W or H×W×1 → GRAY8, H×W×2 → GRAY_ALPHA8, H×W×3 → RGB8 (BGR8 with
    ``channel_order="bgr"``), H×W×4 → RGBA8 (BGRA8); uint16 H×W or H×W×1 → GRAY16. Other shapes and dtypes
    raise ImageError "unsupported" (convert float images to uint8 first), no pixels "empty"."""
    arr = np.asarray(image)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[..., 0]
    layout = _layout_of(arr, channel_order)
    if layout is None:
        raise ImageError(
            "unsupported",
            f"array of shape {image.shape} and dtype {image.dtype}: send uint8 H×W, H×W×2, H×W×3 or H×W×4, "
            "or uint16 H×W",
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ImageError("empty", f"array of shape {image.shape} has no pixels")
    data = arr.astype(_LAYOUTS[layout].dtype, copy=False).tobytes()  # C order, little-endian samples
    return ocr_pb2.RawImage(data=data, height=arr.shape[0], width=arr.shape[1], layout=layout)


def _layout_of(arr: npt.NDArray[np.generic], channel_order: Literal["rgb", "bgr"]) -> ocr_pb2.PixelLayout | None:
    channels = 1 if arr.ndim == 2 else (arr.shape[2] if arr.ndim == 3 else 0)
    if arr.dtype.kind != "u" or arr.dtype.itemsize not in (1, 2):
        return None
    if arr.dtype.itemsize == 2:  # any byte order: tobytes below writes little-endian
        return ocr_pb2.PIXEL_LAYOUT_GRAY16 if channels == 1 else None
    bgr = channel_order == "bgr"
    return {
        1: ocr_pb2.PIXEL_LAYOUT_GRAY8,
        2: ocr_pb2.PIXEL_LAYOUT_GRAY_ALPHA8,
        3: ocr_pb2.PIXEL_LAYOUT_BGR8 if bgr else ocr_pb2.PIXEL_LAYOUT_RGB8,
        4: ocr_pb2.PIXEL_LAYOUT_BGRA8 if bgr else ocr_pb2.PIXEL_LAYOUT_RGBA8,
    }.get(channels)


# --- results ------------------------------------------------------------------------------------------------


def result_to_proto(
    result: OcrResult, request_id: str, model_version: str, device: str, image_size: tuple[int, int]
) -> ocr_pb2.RecognizeResponse:
    """The response for one recognised image. ``image_size`` is (width, height), as ``images.image_size``."""
    width, height = image_size
    resp = ocr_pb2.RecognizeResponse(
        request_id=request_id, model_version=model_version, device=device, image_width=width,
        image_height=height,
    )
    for line in result.lines:
        msg = resp.lines.add(text=line.text, score=float(line.score), angle=int(line.angle))
        msg.box.extend(_points(line.box))
        for char in line.chars or ():
            msg.chars.add(text=char.text, score=float(char.score)).box.extend(_points(char.box))
    if result.fields:
        resp.fields.update(jsonable(result.fields))
    for error in result.errors:
        resp.plugin_errors.add(plugin=error["plugin"], error=error["error"])
    for name, ms in result.timings_ms.items():
        resp.timings[name].CopyFrom(duration_from_ms(ms))
    if result.page_angle is not None:
        resp.page_angle = int(result.page_angle)
    return resp


def _points(quad: Sequence[Sequence[float]]) -> list[ocr_pb2.Point]:
    return [ocr_pb2.Point(x=float(x), y=float(y)) for x, y in quad]


def _quad(points: Sequence[ocr_pb2.Point]) -> list[list[float]]:
    return [[p.x, p.y] for p in points]


def result_from_proto(resp: ocr_pb2.RecognizeResponse) -> OcrResult:
    """The OcrResult a response carries (floats at float32 precision; ``chars`` None when a line has none)."""
    lines = [
        OcrLine(
            text=line.text,
            score=line.score,
            box=_quad(line.box),
            angle=line.angle,
            chars=tuple(CharBox(c.text, _quad(c.box), c.score) for c in line.chars) or None,
        )
        for line in resp.lines
    ]
    return OcrResult(
        lines=lines,
        fields=struct_to_dict(resp.fields) if resp.HasField("fields") else {},
        errors=[{"plugin": e.plugin, "error": e.error} for e in resp.plugin_errors],
        timings_ms={name: ms_of(duration) for name, duration in resp.timings.items()},
        page_angle=resp.page_angle if resp.HasField("page_angle") else None,
    )


def response_to_dict(resp: ocr_pb2.RecognizeResponse | ocr_pb2.RecognizeStreamResponse) -> dict[str, Any]:
    """DESIGN.md's JSON shape: ``OcrResult.to_dict`` (lines, fields/errors when present, timings_ms) with
    ``device``, ``model_version`` and ``request_id``; a stream answer that failed has ``error`` (code name and
    details) instead of lines, and empty ``device`` and ``model_version``."""
    if isinstance(resp, ocr_pb2.RecognizeStreamResponse):
        if resp.HasField("error"):
            return {"request_id": resp.request_id, "model_version": "", "device": "",
                    "error": describe_status(resp.error)}
        resp = resp.response
    out: dict[str, Any] = {
        "request_id": resp.request_id, "model_version": resp.model_version, "device": resp.device
    }
    return {**out, **result_from_proto(resp).to_dict()}


def option_names() -> Mapping[str, str]:
    """Wire field name → OcrOptions name, for every per-request option (plugins aside)."""
    return {name: _OPTION_NAMES.get(name, name) for name in _SCALAR_OPTION_FIELDS}
