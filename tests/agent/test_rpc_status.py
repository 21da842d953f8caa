"""vkocr.agent.serving.rpc_status over a real gRPC round trip: a tiny loopback server aborts with each rich status, the
client decodes the code, the message and every detail."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status as grpc_rpc_status

from vkocr.agent.serving import rpc_status

STATUSES: dict[str, Callable[[], status_pb2.Status]] = {
    "invalid": lambda: rpc_status.invalid_argument(
        "bad request",
        [("image", "raw image is 0×4: no pixels", "empty"), ("options.det_thresh", "must be ≤ 1")],
    ),
    "exhausted": lambda: rpc_status.resource_exhausted("queue full (64 waiting)", retry_after_s=0.25),
    "internal": lambda: rpc_status.internal("unexpected error", incident_id="c0ffee42"),
    "unavailable": lambda: rpc_status.unavailable("models loading", retry_after_s=2.0),
    "unavailable_plain": lambda: rpc_status.unavailable("draining"),
    "deadline": lambda: rpc_status.deadline_exceeded("deadline passed while queued"),
    "cancelled": lambda: rpc_status.cancelled("client went away"),
    "denied": lambda: rpc_status.permission_denied("CN=intruder is not allowed to manage models"),
}

EXPECTED: dict[str, tuple[grpc.StatusCode, str]] = {
    "invalid": (grpc.StatusCode.INVALID_ARGUMENT,
                ("INVALID_ARGUMENT: bad request; image: raw image is 0×4: no pixels (empty); "
                 "options.det_thresh: must be ≤ 1")),
    "exhausted": (grpc.StatusCode.RESOURCE_EXHAUSTED,
                  "RESOURCE_EXHAUSTED: queue full (64 waiting); retry after 0.25 s"),
    "internal": (grpc.StatusCode.INTERNAL, "INTERNAL: unexpected error; incident c0ffee42"),
    "unavailable": (grpc.StatusCode.UNAVAILABLE, "UNAVAILABLE: models loading; retry after 2 s"),
    "unavailable_plain": (grpc.StatusCode.UNAVAILABLE, "UNAVAILABLE: draining"),
    "deadline": (grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED: deadline passed while queued"),
    "cancelled": (grpc.StatusCode.CANCELLED, "CANCELLED: client went away"),
    "denied": (grpc.StatusCode.PERMISSION_DENIED,
               "PERMISSION_DENIED: CN=intruder is not allowed to manage models"),
}


def _fail(request: bytes, context: grpc.ServicerContext) -> bytes:
    name = request.decode()
    if name == "plain":  # a status without rich details, as a server without google.rpc sends it
        context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
    rpc_status.abort(context, STATUSES[name]())


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    methods = {"Fail": grpc.unary_unary_rpc_method_handler(_fail)}
    handler = grpc.method_handlers_generic_handler("test.Errors", methods)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as chan:
        yield chan
    server.stop(None)


def _call(channel: grpc.Channel, name: str) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        channel.unary_unary("/test.Errors/Fail")(name.encode(), timeout=5)
    return info.value


@pytest.mark.parametrize("name", sorted(STATUSES))
def test_status_travels_and_reads_back(channel: grpc.Channel, name: str) -> None:
    err = _call(channel, name)
    code, description = EXPECTED[name]
    assert err.code() is code
    assert rpc_status.describe_rpc_error(err) == description
    # The trailer carries exactly the message the stream form would carry: one definition, two forms.
    assert grpc_rpc_status.from_call(err) == STATUSES[name]()
    assert rpc_status.describe_status(STATUSES[name]()) == description


def test_details_are_the_standard_google_rpc_messages(channel: grpc.Channel) -> None:
    rich = grpc_rpc_status.from_call(_call(channel, "invalid"))
    bad = error_details_pb2.BadRequest()
    assert rich is not None and rich.code == code_pb2.INVALID_ARGUMENT and rich.details[0].Unpack(bad)
    violations = [(v.field, v.reason) for v in bad.field_violations]
    assert violations == [("image", "empty"), ("options.det_thresh", "")]
    info = error_details_pb2.ErrorInfo()
    rich = grpc_rpc_status.from_call(_call(channel, "internal"))
    assert rich is not None and rich.details[0].Unpack(info)
    assert (info.reason, info.domain) == ("INTERNAL", "vkocr")
    assert dict(info.metadata) == {"incident_id": "c0ffee42"}
    retry = error_details_pb2.RetryInfo()
    rich = grpc_rpc_status.from_call(_call(channel, "exhausted"))
    assert rich is not None and rich.details[0].Unpack(retry)
    assert retry.retry_delay.ToTimedelta().total_seconds() == 0.25


@pytest.fixture(scope="module")
def aio_channel() -> Iterator[grpc.Channel]:
    """The same method on an asyncio server (the agent's kind), its loop in a thread of its own."""

    async def fail(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await rpc_status.abort_async(context, STATUSES[request.decode()]())

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        methods = {"Fail": grpc.unary_unary_rpc_method_handler(fail)}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Errors", methods),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as chan:
        yield chan
    asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


@pytest.mark.parametrize("name", ["invalid", "exhausted", "internal"])
def test_asyncio_server_sends_the_same(aio_channel: grpc.Channel, name: str) -> None:
    err = _call(aio_channel, name)
    assert (err.code(), rpc_status.describe_rpc_error(err)) == EXPECTED[name]
    assert grpc_rpc_status.from_call(err) == STATUSES[name]()


def test_status_without_rich_details_still_reads(channel: grpc.Channel) -> None:
    err = _call(channel, "plain")
    assert rpc_status.describe_rpc_error(err) == "NOT_FOUND: no such thing"


def test_unknown_method_and_unknown_codes_read(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as info:
        channel.unary_unary("/test.Errors/Nope")(b"", timeout=5)
    assert rpc_status.describe_rpc_error(info.value).startswith("UNIMPLEMENTED: ")
    odd = status_pb2.Status(code=42, message="from the future")
    odd.details.add().Pack(error_details_pb2.DebugInfo(detail="x"))
    assert rpc_status.describe_status(odd) == (
        "CODE_42: from the future; [type.googleapis.com/google.rpc.DebugInfo]"
    )


def test_incident_ids_differ() -> None:
    ids = {rpc_status.new_incident_id() for _ in range(50)}
    assert len(ids) == 50 and all(len(i) == 12 for i in ids)


def test_a_description_repeating_the_message_is_said_once() -> None:
    message = "image data is not a recognised image"
    status = rpc_status.invalid_argument(message, [("image", message, "corrupt"), ("options", "fine")])
    assert rpc_status.describe_status(status) == (
        "INVALID_ARGUMENT: image data is not a recognised image; field image (corrupt); options: fine"
    )
