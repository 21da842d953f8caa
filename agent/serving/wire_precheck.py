"""What an OCR request would cost to parse, read from its bytes before protobuf makes objects of them.

gRPC parses a request on the event loop, with the GIL held: plugin options of a million empty keys (13 MB,
under the message size limit) took 0.6 s each to parse there and held 110 MiB, so a few such requests at once
stalled health on both ports for seconds. These checks walk the wire format of RecognizeRequest down to
`options.plugins.options` (the google.protobuf.Struct, the one field whose parse grows with its content)
without decoding anything, skipping every other field by its length: the plugin options' bytes are summed over
every occurrence (protobuf merges repeated occurrences of a message field) and refused over their limit, and
a request with more fields along that path than any client sends is refused too. A request whose wire format is
broken is left to protobuf, which says what is wrong with it (agent/serving/malformed.py).
"""

from __future__ import annotations

from typing import Final

from vkocr.agent.errors import RequestError
from vkocr.agent.serving.errors import BrokenWire, TooManyFields

# RecognizeRequest.options = 4 → Options.plugins = 16 → PluginSelection.options = 2 (proto/vkocr/v1/ocr.proto)
OPTIONS_FIELD: Final = 4
PLUGINS_FIELD: Final = 16
PLUGIN_OPTIONS_FIELD: Final = 2
STREAM_REQUEST_FIELD: Final = 1  # RecognizeStreamRequest.request
MAX_FIELDS: Final = 1024  # fields walked in one request: a real one has a few dozen
LENGTH_DELIMITED: Final = 2


def check_recognize_request(data: bytes | memoryview, max_plugin_options: int, *, field: str = "") -> None:
    """RequestError when the RecognizeRequest in `data` carries plugin options over `max_plugin_options` bytes
    or more than MAX_FIELDS fields along the way; nothing for a broken message (protobuf refuses it)."""
    walk = _Walk()
    try:
        plugin_bytes = 0
        for options in walk.messages(memoryview(data), OPTIONS_FIELD):
            for plugins in walk.messages(options, PLUGINS_FIELD):
                for struct in walk.messages(plugins, PLUGIN_OPTIONS_FIELD):
                    plugin_bytes += len(struct)
    except BrokenWire:
        return
    except TooManyFields:
        raise RequestError(f"the request has more than {MAX_FIELDS} fields in its options", field=f"{field}options",
                           reason="too_large") from None
    if plugin_bytes > max_plugin_options:
        raise RequestError(f"plugin options are {plugin_bytes:,} bytes, at most {max_plugin_options:,}",
                           field=f"{field}options.plugins.options", reason="too_large")


def check_stream_frame(data: bytes | memoryview, max_plugin_options: int) -> None:
    """check_recognize_request for the request of each occurrence of RecognizeStreamRequest.request (protobuf
    merges them) in a stream frame."""
    walk = _Walk()
    try:
        requests = list(walk.messages(memoryview(data), STREAM_REQUEST_FIELD))
    except (BrokenWire, TooManyFields):
        return
    if len(requests) > 1:  # merged by protobuf: checked as one request
        check_recognize_request(b"".join(bytes(r) for r in requests), max_plugin_options)
    elif requests:
        check_recognize_request(requests[0], max_plugin_options)


class _Walk:
    """Reads fields, counting them against MAX_FIELDS over the whole request."""

    def __init__(self) -> None:
        self.fields = 0

    def messages(self, data: memoryview, number: int) -> list[memoryview]:
        """The payloads of every length-delimited field `number` of the message in `data`."""
        found = []
        at, end = 0, len(data)
        while at < end:
            self.fields += 1
            if self.fields > MAX_FIELDS:
                raise TooManyFields
            key, at = _varint(data, at)
            wire_type, field_number = key & 7, key >> 3
            if wire_type == 0:
                _, at = _varint(data, at)
            elif wire_type == 1:
                at += 8
            elif wire_type == 5:
                at += 4
            elif wire_type == LENGTH_DELIMITED:
                length, at = _varint(data, at)
                if field_number == number:
                    found.append(data[at:at + length])
                at += length
            else:  # groups (proto2 only) and invalid wire types: none of ours
                raise BrokenWire
            if at > end:
                raise BrokenWire
        return found


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise BrokenWire
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
