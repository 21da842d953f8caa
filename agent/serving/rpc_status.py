"""Rich gRPC error statuses (``google.rpc.Status`` with details), built once, sent two ways, read back.

Every builder returns a ``google.rpc.status_pb2.Status``: that is what a ``RecognizeStream`` answer carries in
its ``error`` field, and ``as_grpc_status`` turns the same message into the ``grpc.Status`` that
``context.abort_with_status`` sends (the rich message rides in the ``grpc-status-details-bin`` trailer, so
clients without google.rpc still see the code and the message). The client side, ``describe_rpc_error`` and
``describe_status``, turns either back into one readable line. Which exception gets which status is decided in
one place, agent/serving/errors.py.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, NamedTuple, NoReturn

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

DOMAIN = "vkocr"


class Violation(NamedTuple):
    """One bad field of a request: ``field`` is a path such as ``image`` or ``options.det_thresh``."""

    field: str
    description: str
    reason: str = ""  # machine-readable, e.g. an ImageError reason ("too_large")


# --- server side: builders ----------------------------------------------------------------------------------


def make(code: int, message: str, *details: Message) -> status_pb2.Status:
    """A status with ``code`` (a ``google.rpc.Code``), ``message`` and each detail packed into an Any."""
    packed = []
    for detail in details:
        any_detail = any_pb2.Any()
        any_detail.Pack(detail)
        packed.append(any_detail)
    return status_pb2.Status(code=code, message=message, details=packed)


def retry_info(retry_after_s: float) -> error_details_pb2.RetryInfo:
    """``google.rpc.RetryInfo``: a retry may succeed after ``retry_after_s`` seconds."""
    delay = duration_pb2.Duration()
    delay.FromTimedelta(timedelta(seconds=retry_after_s))
    return error_details_pb2.RetryInfo(retry_delay=delay)


def invalid_argument(
    message: str, violations: Iterable[tuple[str, str] | tuple[str, str, str]] = ()
) -> status_pb2.Status:
    """INVALID_ARGUMENT with ``google.rpc.BadRequest``: (field, description[, reason]) per bad field."""
    bad = error_details_pb2.BadRequest()
    for violation in violations:
        v = Violation(*violation)
        bad.field_violations.add(field=v.field, description=v.description, reason=v.reason)
    return make(code_pb2.INVALID_ARGUMENT, message, bad)


def resource_exhausted(message: str, retry_after_s: float) -> status_pb2.Status:
    """RESOURCE_EXHAUSTED (queue full) with ``google.rpc.RetryInfo``: when a retry may succeed."""
    return make(code_pb2.RESOURCE_EXHAUSTED, message, retry_info(retry_after_s))


def unavailable(message: str, retry_after_s: float | None = None) -> status_pb2.Status:
    """UNAVAILABLE (loading, rebuilding, draining), with ``google.rpc.RetryInfo`` when a wait is known."""
    if retry_after_s is None:
        return make(code_pb2.UNAVAILABLE, message)
    return make(code_pb2.UNAVAILABLE, message, retry_info(retry_after_s))


def internal(message: str, incident_id: str) -> status_pb2.Status:
    """INTERNAL with ``google.rpc.ErrorInfo`` (reason INTERNAL, domain vkocr, metadata ``incident_id``) so an
    operator can find the agent's log line for it."""
    metadata = {"incident_id": incident_id}
    info = error_details_pb2.ErrorInfo(reason="INTERNAL", domain=DOMAIN, metadata=metadata)
    return make(code_pb2.INTERNAL, message, info)


def deadline_exceeded(message: str) -> status_pb2.Status:
    return make(code_pb2.DEADLINE_EXCEEDED, message)


def cancelled(message: str) -> status_pb2.Status:
    return make(code_pb2.CANCELLED, message)


def permission_denied(message: str) -> status_pb2.Status:
    return make(code_pb2.PERMISSION_DENIED, message)


def unauthenticated(message: str) -> status_pb2.Status:
    return make(code_pb2.UNAUTHENTICATED, message)


def failed_precondition(
    message: str, violations: Iterable[tuple[str, str, str]] = ()
) -> status_pb2.Status:
    """FAILED_PRECONDITION with ``google.rpc.PreconditionFailure``: (type, subject, description) per failed
    check, e.g. ("SELF_TEST", "selftest/label.png", "expected 'LOT 42', read 'LOT 4Z'")."""
    failure = error_details_pb2.PreconditionFailure()
    for kind, subject, description in violations:
        failure.violations.add(type=kind, subject=subject, description=description)
    if not failure.violations:
        return make(code_pb2.FAILED_PRECONDITION, message)
    return make(code_pb2.FAILED_PRECONDITION, message, failure)


def new_incident_id() -> str:
    """A short random id for an INTERNAL error, logged with the exception and sent to the client."""
    return secrets.token_hex(6)


def as_grpc_status(status: status_pb2.Status) -> grpc.Status:
    """The same status for ``context.abort_with_status``: code, message, and the rich status as a trailer."""
    return rpc_status.to_status(status)


def abort(context: grpc.ServicerContext, status: status_pb2.Status) -> NoReturn:
    """End a synchronous server's RPC with ``status`` (``abort_with_status`` raises)."""
    context.abort_with_status(as_grpc_status(status))
    raise AssertionError("abort_with_status returned")  # pragma: no cover - only tells the type checker


async def abort_async(context: grpc.aio.ServicerContext, status: status_pb2.Status) -> NoReturn:
    """End an asyncio server's RPC with ``status``: code, message and the rich status trailer."""
    sent = as_grpc_status(status)
    await context.abort(sent.code, sent.details, sent.trailing_metadata)
    raise AssertionError("abort returned")  # pragma: no cover - only tells the type checker


# --- client side: reading them ------------------------------------------------------------------------------


def code_name(code: int) -> str:
    """``3`` → ``"INVALID_ARGUMENT"``; unknown numbers as ``"CODE_42"``."""
    try:
        return code_pb2.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


def describe_status(status: status_pb2.Status) -> str:
    """One line: ``"CODE_NAME: message"``, then each detail (field violations, retry delay, incident id)."""
    parts = [f"{code_name(status.code)}: {status.message}"]
    parts.extend(_describe_detail(detail, status.message) for detail in status.details)
    return "; ".join(part for part in parts if part)


def describe_rpc_error(err: grpc.RpcError) -> str:
    """One line for a failed call: its code name and details, plus rich details when the server sent some."""
    code = err.code() if isinstance(err, grpc.Call) else None
    details = err.details() if isinstance(err, grpc.Call) else str(err)
    try:
        rich = rpc_status.from_call(err) if isinstance(err, grpc.Call) else None
    except ValueError:  # a trailer that disagrees with the call's own code/details: trust the call
        rich = None
    if rich is not None:
        return describe_status(rich)
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    return f"{name}: {details or '(no details)'}"


def _describe_detail(detail: any_pb2.Any, message: str) -> str:
    bad = error_details_pb2.BadRequest()
    if detail.Unpack(bad):
        return "; ".join(_describe_violation(v, message) for v in bad.field_violations)
    retry = error_details_pb2.RetryInfo()
    if detail.Unpack(retry):
        return f"retry after {retry.retry_delay.ToTimedelta().total_seconds():g} s"
    failure = error_details_pb2.PreconditionFailure()
    if detail.Unpack(failure):  # what the message already says is not said twice
        return "; ".join(f"{v.type} {v.subject}: {v.description}" for v in failure.violations
                         if v.description not in message)
    info = error_details_pb2.ErrorInfo()
    if detail.Unpack(info):
        if "incident_id" in info.metadata:
            return f"incident {info.metadata['incident_id']}"
        extra: dict[str, Any] = dict(info.metadata)
        return f"{info.reason} ({info.domain})" + (f" {extra}" if extra else "")
    return f"[{detail.type_url}]"


def _describe_violation(violation: error_details_pb2.BadRequest.FieldViolation, message: str) -> str:
    # A description that repeats the status message is said once: "field image (corrupt)".
    said = f"field {violation.field}" if violation.description == message else (
        f"{violation.field}: {violation.description}")
    return said + (f" ({violation.reason})" if violation.reason else "")
