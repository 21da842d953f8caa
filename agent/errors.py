"""Exceptions the agent raises for bad requests, each carrying a machine-readable reason code.

The gRPC layer turns these into ``INVALID_ARGUMENT`` with the reason in the status details; nothing else about
the process is affected by one bad request.
"""

from __future__ import annotations

from typing import Final, Literal

ImageErrorReason = Literal["not_found", "unreadable", "empty", "corrupt", "unsupported", "too_large"]

IMAGE_ERROR_REASONS: Final[tuple[ImageErrorReason, ...]] = (
    "not_found",  # the path names no file
    "unreadable",  # the path exists but cannot be read (a directory, no permission, I/O error)
    "empty",  # no bytes, or an image/array with a zero width or height
    "corrupt",  # not image data, or truncated/broken image data
    "unsupported",  # a recognised but refused format, or an array shape/dtype/value we do not take
    "too_large",  # more pixels than the configured limit (checked from the header, before decoding)
)


class ImageError(ValueError):
    """An input image could not be turned into pixels.

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


class OptionsError(ValueError):
    """Raised when an OCR option is unknown, of the wrong type, or out of range (the message names it)."""
