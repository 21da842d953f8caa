"""Rich gRPC error statuses (``google.rpc.Status`` with details), built once, sent two ways, read back.

Every builder returns a ``google.rpc.status_pb2.Status``: that is what a ``RecognizeStream`` answer carries in
its ``error`` field, and ``as_grpc_status`` turns the same message into the ``grpc.Status`` that
``context.abort_with_status`` sends (the rich message rides in the ``grpc-status-details-bin`` trailer, so
clients without google.rpc still see the code and the message). The client side, ``describe_rpc_error`` and
``describe_status``, turns either back into one readable line. Which exception gets which status is decided in
one place, agent/serving/status_table.py.

Every status is bounded (``bounded``): a message that echoes a client's 4,000-character name would otherwise
make trailers larger than a client accepts (8 KiB of metadata by default; the client then sees
RESOURCE_EXHAUSTED instead of the error). Messages and detail texts are cut with an ellipsis, details past
the budget are dropped: the message (percent-encoded in ``grpc-message``, at most 3 bytes per byte) and the
status (base64 in ``grpc-status-details-bin``) stay under 4.5 KiB together.
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
MAX_MESSAGE_BYTES = 512  # UTF-8 bytes of a status message, ellipsis included
MAX_DETAIL_TEXT_BYTES = 256  # of each description and field path in the details
MAX_VIOLATIONS = 16  # field violations or precondition failures per detail
MAX_STATUS_BYTES = 2048  # the serialised status, details included
ELLIPSIS = "…"


class Violation(NamedTuple):
    """One bad field of a request: ``field`` is a path such as ``image`` or ``options.det_thresh``."""

    field: str
    description: str
    reason: str = ""  # machine-readable, e.g. an ImageError reason ("too_large")


# --- server side: builders ----------------------------------------------------------------------------------


def make(code: int, message: str, *details: Message) -> status_pb2.Status:
    """A status with ``code`` (a ``google.rpc.Code``), ``message`` and each detail packed into an Any,
    bounded in size (``bounded``)."""
    packed = []
    for detail in details:
        any_detail = any_pb2.Any()
        any_detail.Pack(detail)
        packed.append(any_detail)
    return bounded(status_pb2.Status(code=code, message=message, details=packed))


def truncated(text: str, limit: int) -> str:
    """`text` in at most `limit` UTF-8 bytes: cut at a character boundary, with an ellipsis when cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[:limit - len(ELLIPSIS.encode())].decode(errors="ignore") + ELLIPSIS


def bounded(status: status_pb2.Status) -> status_pb2.Status:
    """`status` within the size budget: message and detail texts cut, violations past MAX_VIOLATIONS and
    details past MAX_STATUS_BYTES dropped (a status within it comes back unchanged)."""
    out = status_pb2.Status(code=status.code, message=truncated(status.message, MAX_MESSAGE_BYTES))
    for detail in status.details:
        out.details.append(_bounded_detail(detail, MAX_STATUS_BYTES - out.ByteSize()))
        if out.ByteSize() > MAX_STATUS_BYTES:
            del out.details[-1]
            break
    return out


_PACKING_BYTES = 100  # an Any's type URL and the length prefixes around a detail


def _fill(message: Message, kept: Any, entries: Any, fields: tuple[str, ...], room: int) -> None:
    """Copy `entries` into the repeated field `kept` of `message`, their text `fields` cut, while the message
    fits in `room` bytes (the first entry always; at most MAX_VIOLATIONS)."""
    for entry in entries[:MAX_VIOLATIONS]:
        kept.add(**{name: truncated(getattr(entry, name), MAX_DETAIL_TEXT_BYTES) for name in fields})
        if message.ByteSize() + _PACKING_BYTES > room and len(kept) > 1:
            del kept[-1]
            break


def _bounded_detail(detail: any_pb2.Any, room: int) -> any_pb2.Any:
    """A BadRequest or PreconditionFailure with its texts cut and as many entries as fit in `room` bytes;
    any other detail as it is (RetryInfo, ErrorInfo: the agent's own words; MAX_STATUS_BYTES bounds them)."""
    small: Message
    bad = error_details_pb2.BadRequest()
    failure = error_details_pb2.PreconditionFailure()
    if detail.Unpack(bad):
        small = error_details_pb2.BadRequest()
        _fill(small, small.field_violations, bad.field_violations, ("field", "description", "reason"), room)
    elif detail.Unpack(failure):
        small = error_details_pb2.PreconditionFailure()
        _fill(small, small.violations, failure.violations, ("type", "subject", "description"), room)
    else:
        return detail
    packed = any_pb2.Any()
    packed.Pack(small)
    return packed


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
    """The same status for ``context.abort_with_status``: code, message, and the rich status as a trailer;
    bounded, whoever built it."""
    return rpc_status.to_status(bounded(status))


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
