"""The agent's branch of vkocr's errors: `AgentError`, and the errors of bad input (images, options).

Every error the agent raises derives from `AgentError` (a `vkocr.errors.VkocrError`): these two, the bundle
and model store errors (agent/bundles/errors.py), activation's (agent/bundles/activation.py), the GPU worker's
(agent/serving/worker.py), configuration's, TLS files' and the client's targets'. The gRPC boundary
(agent/serving/status_table.py) turns ImageError and OptionsError into ``INVALID_ARGUMENT`` naming the field, with
an image's reason in the status details; nothing else about the process is affected by one bad request.
"""

from __future__ import annotations

from typing import Final, Literal

from vkocr.errors import VkocrError

ImageErrorReason = Literal["not_found", "unreadable", "empty", "corrupt", "unsupported", "too_large"]

IMAGE_ERROR_REASONS: Final[tuple[ImageErrorReason, ...]] = (
    "not_found",  # the path names no file
    "unreadable",  # the path exists but cannot be read (a directory, no permission, I/O error)
    "empty",  # no bytes, or an image/array with a zero width or height
    "corrupt",  # not image data, or truncated/broken image data
    "unsupported",  # a recognised but refused format, or an array shape/dtype/value we do not take
    "too_large",  # more pixels than the configured limit (checked from the header, before decoding)
)


class AgentError(VkocrError):
    """Base of every error the agent (vkocr.agent) raises; raised by the CLI itself when no subclass names
    the refusal (an input tensor it cannot read, a benchmark without images)."""


class ImageError(AgentError):
    """Raised when an input image cannot be turned into pixels: a path that names no readable file, no bytes,
    data that is no image or a broken one, a refused format or array, more pixels than the limit.

    ``reason`` is one of :data:`IMAGE_ERROR_REASONS`; ``str(error)`` is a human-readable message that names
    the problem (and the file, for paths).
    """

    def __init__(self, reason: ImageErrorReason, message: str) -> None:
        if reason not in IMAGE_ERROR_REASONS:
            raise ValueError(f"unknown ImageError reason {reason!r}")
        super().__init__(message)
        self.reason: ImageErrorReason = reason
        self.message = message

    def __reduce__(self) -> tuple[type[ImageError], tuple[ImageErrorReason, str]]:
        return (type(self), (self.reason, self.message))

    def __repr__(self) -> str:
        return f"ImageError({self.reason!r}, {self.message!r})"


class OptionsError(AgentError):
    """Raised when an OCR option is unknown, of the wrong type, or out of range (the message names it).

    ``option`` is the OcrOptions name of the refused option when there is one (``thresh``, ``plugins``); the
    gRPC boundary names the request's field from it (``options.det_thresh``).
    """

    def __init__(self, message: str, *, option: str = "") -> None:
        super().__init__(message)
        self.option = option


class ModelSetError(AgentError):
    """Raised when a model set cannot be used: a name that is no known set (the message lists them), a folder
    without a readable modelset.toml or a known set's files, a modelset.toml with a bad key or value, a set
    whose files are missing, or a file the CPU backend's onnxruntime cannot load as a model."""


class RequestError(AgentError):
    """Raised when a request is refused for something other than its image or its options: a message that is
    not valid protobuf, a request id or a plugin selection over its size limit, or work beyond the agent's
    bounds (more pixels after a resize than it allows).

    ``field`` is the request's field path (``request_id``, ``options.plugins.options``); ``reason`` is
    machine-readable (``malformed``, ``too_long``, ``too_large``).
    """

    def __init__(self, message: str, *, field: str, reason: str) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason


class StreamIdle(AgentError):
    """Raised when a RecognizeStream sent no frame for [server] stream_idle_s while none of its answers was in
    the works: the agent ends the stream (DEADLINE_EXCEEDED) rather than hold its slot for ever."""


class EngineClosed(AgentError, ValueError):
    """Raised when a ``vkocr.OCR`` engine is used after its ``close()`` (or its ``with`` block): its device and
    models are gone. A ValueError too, as a closed file's use is."""


class ShutdownCancelled(AgentError):
    """Raised by the OCR service, in place of the cancellation, for a request the agent itself cancelled
    because its shutdown's grace period ended before the answer was ready: logged as the agent's shutdown, not
    as the client's."""


StopWho = Literal["client", "deadline", "shutdown"]


class RequestStopped(AgentError):
    """Raised by OcrPipeline.recognize at a stage boundary when its caller says the answer is no longer
    wanted: the request's client cancelled (``client``), its deadline passed (``deadline``), or the agent's
    shutdown grace period ended (``shutdown``). ``after`` names the last stage that ran; the rest did not."""

    def __init__(self, who: StopWho, after: str) -> None:
        super().__init__(f"request stopped after its {after} stage: " + {
            "client": "the client cancelled", "deadline": "its deadline passed",
            "shutdown": "the agent's shutdown grace period ended"}[who])
        self.who: StopWho = who
        self.after = after

    def __reduce__(self) -> tuple[type[RequestStopped], tuple[StopWho, str]]:
        return (type(self), (self.who, self.after))
