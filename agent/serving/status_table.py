"""The gRPC boundary: one table from exception type to status code and details, used by every service.

`status_for(exc)` gives the ``google.rpc.Status`` a caught exception leaves as: a unary RPC aborts with it
(rpc_status.abort_async), a stream answer carries it in its ``error`` field. The lookup walks the exception's
MRO, so a class not in `STATUS_TABLE` takes its nearest mapped base's rule (every PluginError names a field
under ``options.plugins``, every other BundleError ``bundle``). Anything not mapped at all is a bug of ours:
INTERNAL with an incident id in its ErrorInfo, logged once with the traceback under that id, and a message
that tells the client nothing of the internals.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from google.rpc import code_pb2, status_pb2

from vkocr.agent.bundles.errors import (
    ActivationBusy,
    ActivationFailed,
    ActiveVersionError,
    BundleError,
    BundleTooLarge,
    ChecksumMismatch,
    DowngradeRefused,
    HighWaterUnreadable,
    KeyFileError,
    NothingToRollBack,
    OffsetMismatch,
    SignatureError,
    StorageFull,
    StorageUnavailable,
    UploadBusy,
    UploadIdle,
    UploadIncomplete,
    UploadMismatch,
    UploadRequestError,
    VersionConflict,
    VersionNotFound,
)
from vkocr.agent.errors import (
    ImageError,
    OptionsError,
    RequestError,
    RequestStopped,
    ShutdownCancelled,
    StreamIdle,
)
from vkocr.agent.serving import rpc_status, wire
from vkocr.agent.serving.errors import CancelledDropped, DeadlineDropped, DeviceFailed, NotServing, QueueFull
from vkocr.log import get_logger
from vkocr.postproc.errors import PluginConfigError, PluginError

log = get_logger(__name__)

INTERNAL_MESSAGE: Final = "internal error; the agent's log has the details"

# (the exception, its message, the caller's log context) -> the status, for details no Rule field expresses
Build = Callable[[BaseException, str, Mapping[str, Any]], status_pb2.Status]


@dataclass(frozen=True)
class Rule:
    """How one exception type leaves the agent."""

    code: int  # a google.rpc.Code
    field: str = ""  # with INVALID_ARGUMENT: the BadRequest field violation's field
    reason: str = ""  # the violation's machine-readable reason
    retry: bool = False  # RetryInfo with the service's retry hint, when it has one
    empty_message: str = ""  # the message when the exception has none
    build: Build | None = None  # builds the whole status instead (its code is still `code`)


def _image(exc: BaseException, message: str, _context: Mapping[str, Any]) -> status_pb2.Status:
    """INVALID_ARGUMENT on ``image``, with the ImageError's own reason (``too_large``, ``corrupt``, …)."""
    assert isinstance(exc, ImageError)
    return rpc_status.invalid_argument(message, [("image", message, exc.reason)])


def _activation(exc: BaseException, message: str, context: Mapping[str, Any]) -> status_pb2.Status:
    """FAILED_PRECONDITION naming the failed self-tests (or the step); a failure to record the new active
    version after the swap is ours: INTERNAL with an incident id."""
    assert isinstance(exc, ActivationFailed)
    if exc.step == "record":
        incident = rpc_status.new_incident_id()
        log.error("activation_record_failed", **context, incident_id=incident, error=message)
        return rpc_status.internal(message, incident)
    failed = [("SELF_TEST", t.image, t.describe()) for t in exc.self_tests if not t.passed]
    return rpc_status.failed_precondition(message, failed or [(exc.step.upper(), "activation", message)])


def _options(exc: BaseException, message: str, _context: Mapping[str, Any]) -> status_pb2.Status:
    """INVALID_ARGUMENT on the request's field of the refused option (``options.det_thresh``)."""
    assert isinstance(exc, OptionsError)
    return rpc_status.invalid_argument(message, [(wire.option_field(exc.option), message, "out_of_range")])


def _request(exc: BaseException, message: str, _context: Mapping[str, Any]) -> status_pb2.Status:
    """INVALID_ARGUMENT on the field the RequestError names, with its reason."""
    assert isinstance(exc, RequestError)
    return rpc_status.invalid_argument(message, [(exc.field, message, exc.reason)])


def _stopped(exc: BaseException, message: str, _context: Mapping[str, Any]) -> status_pb2.Status:
    """DEADLINE_EXCEEDED for a request its deadline stopped between stages, CANCELLED for the others."""
    assert isinstance(exc, RequestStopped)
    return rpc_status.make(code_pb2.DEADLINE_EXCEEDED if exc.who == "deadline" else code_pb2.CANCELLED, message)


def _plugin(exc: BaseException, message: str, _context: Mapping[str, Any]) -> status_pb2.Status:
    """INVALID_ARGUMENT on ``options.plugins.options.<plugin>.<field>`` for options a plugin refused, on
    ``options.plugins.names`` for a plugin that is not installed or does not load."""
    if isinstance(exc, PluginConfigError):
        path = ".".join(p for p in ("options.plugins.options", exc.plugin, exc.field) if p)
        return rpc_status.invalid_argument(message, [(path, message, "bad_plugin_options")])
    return rpc_status.invalid_argument(message, [("options.plugins.names", message, "unknown_plugin")])


STATUS_TABLE: Final[Mapping[type[BaseException], Rule]] = {
    # a bad request: INVALID_ARGUMENT naming the field; nothing else is affected
    ImageError: Rule(code_pb2.INVALID_ARGUMENT, field="image", build=_image),
    OptionsError: Rule(code_pb2.INVALID_ARGUMENT, field="options", build=_options),
    RequestError: Rule(code_pb2.INVALID_ARGUMENT, field="request", build=_request),  # malformed, too long
    PluginError: Rule(code_pb2.INVALID_ARGUMENT, field="options.plugins", build=_plugin),
    # the GPU worker's queue and state
    QueueFull: Rule(code_pb2.RESOURCE_EXHAUSTED, retry=True),
    NotServing: Rule(code_pb2.UNAVAILABLE, retry=True),
    DeviceFailed: Rule(code_pb2.UNAVAILABLE, retry=True),
    DeadlineDropped: Rule(code_pb2.DEADLINE_EXCEEDED),
    CancelledDropped: Rule(code_pb2.CANCELLED, empty_message="client cancelled"),
    asyncio.CancelledError: Rule(code_pb2.CANCELLED, empty_message="client cancelled"),  # the client went
    ShutdownCancelled: Rule(code_pb2.CANCELLED, empty_message="agent shutdown: the grace period ended first"),
    RequestStopped: Rule(code_pb2.CANCELLED, build=_stopped),  # between stages; its `who` picks the code
    # model management: activation, the store, uploads
    ActivationFailed: Rule(code_pb2.FAILED_PRECONDITION, build=_activation),
    ActivationBusy: Rule(code_pb2.ABORTED),
    UploadBusy: Rule(code_pb2.ABORTED),
    VersionNotFound: Rule(code_pb2.NOT_FOUND),
    VersionConflict: Rule(code_pb2.ALREADY_EXISTS),
    NothingToRollBack: Rule(code_pb2.FAILED_PRECONDITION),
    ActiveVersionError: Rule(code_pb2.FAILED_PRECONDITION),
    UploadMismatch: Rule(code_pb2.FAILED_PRECONDITION),
    UploadIncomplete: Rule(code_pb2.FAILED_PRECONDITION),
    KeyFileError: Rule(code_pb2.FAILED_PRECONDITION),  # the agent's own trusted keys, not the bundle
    DowngradeRefused: Rule(code_pb2.FAILED_PRECONDITION),  # older than the high-water mark; needs an operator
    HighWaterUnreadable: Rule(code_pb2.FAILED_PRECONDITION),
    StorageFull: Rule(code_pb2.RESOURCE_EXHAUSTED),  # the board's disk, never the bundle's fault
    StorageUnavailable: Rule(code_pb2.UNAVAILABLE),
    UploadIdle: Rule(code_pb2.DEADLINE_EXCEEDED),
    StreamIdle: Rule(code_pb2.DEADLINE_EXCEEDED),
    OffsetMismatch: Rule(code_pb2.OUT_OF_RANGE),
    SignatureError: Rule(code_pb2.PERMISSION_DENIED),
    BundleTooLarge: Rule(code_pb2.INVALID_ARGUMENT, field="total_size", reason="too_large"),
    ChecksumMismatch: Rule(code_pb2.INVALID_ARGUMENT, field="sha256", reason="mismatch"),
    UploadRequestError: Rule(code_pb2.INVALID_ARGUMENT, field="chunk"),
    BundleError: Rule(code_pb2.INVALID_ARGUMENT, field="bundle"),  # format, unsafe entries, integrity
}


def rule_for(kind: type[BaseException]) -> Rule | None:
    """The rule of `kind` or of its nearest mapped base; None when nothing in its MRO is mapped."""
    for base in kind.__mro__:
        rule = STATUS_TABLE.get(base)
        if rule is not None:
            return rule
    return None


def status_for(exc: BaseException, *, retry_after_s: float | None = None,
               **context: Any) -> status_pb2.Status:
    """The status `exc` leaves as. `retry_after_s`: the service's retry hint for the rules that send one;
    `context` (e.g. ``request_id=``) goes into the log line of an INTERNAL error."""
    rule = rule_for(type(exc))
    if rule is None:
        incident = rpc_status.new_incident_id()
        log.error("internal_error", **context, incident_id=incident, error=f"{type(exc).__name__}: {exc}",
                  exc_info=exc)
        return rpc_status.internal(INTERNAL_MESSAGE, incident)
    message = str(exc) or rule.empty_message
    if rule.build is not None:
        return rule.build(exc, message, context)
    if rule.field:
        return rpc_status.invalid_argument(message, [(rule.field, message, rule.reason)])
    if rule.retry and retry_after_s is not None:
        return rpc_status.make(rule.code, message, rpc_status.retry_info(retry_after_s))
    return rpc_status.make(rule.code, message)
