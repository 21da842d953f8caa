"""What one OCR request may cost, checked before it is queued (and its parts before they are converted).

Options have their ranges (agent/ocr/options.py); these are the bounds of what is not one option: the size of
a request's id and plugin options, and the pixels its image becomes after every resize, which depend on the
image and the options together (``limit_side_len=3000`` makes a 64x200 PNG a 3008x9376 detection input).
Each refusal is a RequestError (or an OptionsError naming the option that asked for the work), which the gRPC
boundary turns into INVALID_ARGUMENT naming the field.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from vkocr.agent.errors import OptionsError, RequestError
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.prep import prepared_sizes
from vkocr.agent.ocr.request import RequestGeometry
from vkocr.v1 import ocr_pb2

MAX_REQUEST_ID_CHARS: Final = 256
MAX_PLUGIN_OPTIONS_BYTES: Final = 64 * 1024  # the serialised Struct: room for 32 patterns of 1000 characters
# the per-request options that make an image's resizes larger, in the order a refusal names them
SIZE_OPTIONS: Final = ("limit_side_len", "limit_type", "max_side_len")


def check_request(request: ocr_pb2.RecognizeRequest) -> None:
    """RequestError when the request's id or its plugin options are over their size limits."""
    if len(request.request_id) > MAX_REQUEST_ID_CHARS:
        raise RequestError(f"request_id has {len(request.request_id):,} characters, at most {MAX_REQUEST_ID_CHARS}",
                           field="request_id", reason="too_long")
    options = request.options
    if options.HasField("plugins") and options.plugins.HasField("options"):
        size = options.plugins.options.ByteSize()
        if size > MAX_PLUGIN_OPTIONS_BYTES:
            raise RequestError(f"plugin options are {size:,} bytes, at most {MAX_PLUGIN_OPTIONS_BYTES:,}",
                               field="options.plugins.options", reason="too_large")


def check_preparation(height: int, width: int, opts: OcrOptions, requested: Collection[str]) -> None:
    """Refuse, naming the option, a request whose own max_side_len or min_side_len would resize its image to a
    side of 0 (RapidOCR cannot); without such an option the preparation's ImageError names the image."""
    sizes = prepared_sizes(height, width, opts.max_side_len, opts.min_side_len)
    if all(h > 0 and w > 0 for h, w in sizes):
        return
    for name in ("max_side_len", "min_side_len"):
        if name in requested:
            raise OptionsError(f"{name}={getattr(opts, name)} would resize a {width}x{height} image to a side of "
                               "0 pixels (sides are rounded to multiples of 32): allow a larger one", option=name)


def resized_pixels(geometry: RequestGeometry) -> tuple[int, tuple[int, int]]:
    """The largest image (pixels, (height, width)) that preparing and detecting a request's image make: each
    resize of the preparation, its letterbox, and the detection input."""
    h, w = geometry.largest
    return h * w, (h, w)


def check_resized_pixels(geometry: RequestGeometry, opts: OcrOptions, requested: Collection[str]) -> None:
    """Refuse an image whose resizes exceed ``opts.max_det_pixels``: an OptionsError naming the first of
    SIZE_OPTIONS the request set (the option that asked for it), else a RequestError on ``image``."""
    pixels, (h, w) = resized_pixels(geometry)
    height, width = geometry.prep.raw_h, geometry.prep.raw_w
    if pixels <= opts.max_det_pixels:
        return
    message = (f"a {width}x{height} image would be resized to {w}x{h} = {pixels:,} pixels, more than the "
               f"agent's limit of {opts.max_det_pixels:,}")
    for name in SIZE_OPTIONS:
        if name in requested:
            raise OptionsError(f"{message} (with {name}={getattr(opts, name)})", option=name)
    raise RequestError(message, field="image", reason="too_large")
