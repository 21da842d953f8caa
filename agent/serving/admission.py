"""Admission (DESIGN.md, "One request, end to end", step 1): a request's bytes become one `OcrRequest`, built
once, on a decode thread, each bound checked before the work it bounds: sizes before parsing, options against
their ranges before decoding, the pixels the resizes would make before the queue. `admit` is the one
orchestrator of this stretch: it calls the wire conversion, the options, the plugin chains, the decoder and the
request's geometry in turn, and none of them calls back.

Options have their ranges (agent/ocr/options.py); the bounds here are those of what is not one option: the size
of a request's id and plugin options, and the pixels its image becomes after every resize, which depend on the
image and the options together (``limit_side_len=3000`` makes a 64x200 PNG a 3008x9376 detection input).
Each refusal is a RequestError (or an OptionsError naming the option that asked for the work), which the gRPC
boundary turns into INVALID_ARGUMENT naming the field.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from vkocr.agent.errors import ImageError, OptionsError, RequestError
from vkocr.agent.ocr.images import decode_image
from vkocr.agent.ocr.options import OcrOptions, check_orientation
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.ocr.prep import prepared_sizes
from vkocr.agent.ocr.procedures import PROCEDURES
from vkocr.agent.ocr.request import OcrRequest, RequestGeometry
from vkocr.agent.serving import wire
from vkocr.agent.serving.decode_processes import DecodeProcesses
from vkocr.v1 import ocr_pb2

MAX_REQUEST_ID_CHARS: Final = 256
MAX_PLUGIN_OPTIONS_BYTES: Final = 64 * 1024  # the serialised Struct: room for 32 patterns of 1000 characters
# the per-request options that make an image's resizes larger, in the order a refusal names them
SIZE_OPTIONS: Final = ("limit_side_len", "limit_type", "max_side_len")


@dataclass(frozen=True)
class Admitted:
    """A request ready for the GPU queue, and the time its image took to decode."""

    request: OcrRequest
    decode_ms: float


def admit(request: ocr_pb2.RecognizeRequest, pipeline: OcrPipeline, decoders: DecodeProcesses | None = None
          ) -> Admitted:
    """On a decode thread: everything the request sends is checked, parsed, compiled and decoded here, with the
    serving pipeline's options (the deployment's, with its bundle's) as defaults; `decoders`: decode in those
    processes instead of on this thread."""
    check_request(request)
    overrides = wire.options_from_proto(request.options) if request.HasField("options") else {}
    defaults = pipeline.options
    opts = defaults.replace(**overrides) if overrides else defaults
    check_orientation(opts, pipeline.stages.orients)  # without the model: refused before decoding
    chain = pipeline.chains.chain_for(opts)  # built once per distinct plugin options, and kept
    clock = time.perf_counter()
    source = wire.image_from_proto(request, opts.max_pixels)
    rgba = PROCEDURES[opts.procedure].rgba
    if decoders is not None and isinstance(source, bytes):
        image = decoders.decode(source, max_pixels=opts.max_pixels, apply_exif=opts.apply_exif, rgba=rgba)
    else:
        image = decode_image(source, max_pixels=opts.max_pixels, apply_exif=opts.apply_exif, rgba=rgba)
    decode_ms = (time.perf_counter() - clock) * 1e3
    try:
        admitted = OcrRequest.of(image, opts, chain)
    except ImageError:  # a side of 0: named as the request's own option when one asked for it
        check_preparation(image.shape[0], image.shape[1], opts, overrides.keys())
        raise
    check_resized_pixels(admitted.geometry, opts, overrides.keys())
    return Admitted(admitted, decode_ms)


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
    side of 0 (RapidOCR cannot); without such an option the preparation's ImageError names the image. Asked
    only once the preparation refused the image."""
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
