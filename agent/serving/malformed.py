"""Requests that are not valid protobuf are INVALID_ARGUMENT, for every service of the agent.

gRPC parses a request with the method's deserializer and, when that raises (bytes that are no message of the
type, or a message nested deeper than protobuf's recursion limit), answers UNKNOWN with the Python exception's
text. This interceptor gives every method a deserializer that never raises: a request that does not parse
becomes a ``MalformedRequest``, which the method's wrapper refuses with INVALID_ARGUMENT on field ``request``
(reason ``malformed``) through the status table, before the servicer sees it. Methods named in
``answered_per_frame`` (RecognizeStream, which answers each frame of its stream) get the MalformedRequest
itself in their request stream and answer it.

A method may also have a precheck (``prechecks``): a function of the request's bytes, run before they are parsed,
whose RequestError refuses the request the same way without parsing it (agent/serving/wire_precheck.py: what
would cost too much to parse on the event loop).

The deserializer also notes each message's size on the wire for `wire_size`: a request's log line reports it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import grpc

from vkocr.agent.errors import RequestError
from vkocr.agent.serving import rpc_status
from vkocr.agent.serving.status_table import status_for
from vkocr.log import get_logger

log = get_logger(__name__)

# (id, bytes) of the message this context's deserializer returned last. gRPC's asyncio server parses a request in
# the task that then runs its method (each frame of a stream too, as the method reads it), so there the method
# finds its own request's size. ByteSize() would encode the message again, under the GIL, on the event loop: about
# 1.9 ms a request on the H100 host (py-spy), 0.7-12 ms for a 1080p raw frame on the build machine, as its buffer's
# pages come reused or fresh (scripts/bench_wire.py).
_PARSED: ContextVar[tuple[int, int]] = ContextVar("parsed_request_size", default=(0, 0))


def wire_size(message: Any) -> int:
    """The bytes `message` took on the wire: noted when this context's deserializer parsed it, else ByteSize()."""
    ident, size = _PARSED.get()
    return size if ident == id(message) else int(message.ByteSize())


@dataclass(frozen=True)
class MalformedRequest:
    """A request message that did not parse: its bytes (bounded by the server's message size limit) and the
    parser's words."""

    data: bytes
    error: str
    refused: RequestError | None = None  # refused by a precheck, before parsing

    def refusal(self, method: str) -> RequestError:
        if self.refused is not None:
            return self.refused
        return RequestError(f"{method}: the request is not a valid protobuf message ({self.error})",
                            field="request", reason="malformed")


Precheck = Callable[[bytes], None]


def lenient(deserializer: Callable[[bytes], Any] | None, precheck: Precheck | None = None) -> Callable[[bytes], Any]:
    """`deserializer` that returns a MalformedRequest instead of raising, after `precheck` of the bytes."""

    def parse(data: bytes) -> Any:
        if deserializer is None:
            return data
        if precheck is not None:
            try:
                precheck(data)
            except RequestError as exc:
                return MalformedRequest(bytes(data), str(exc), refused=exc)
        try:
            message = deserializer(data)
        except Exception as exc:  # noqa: BLE001 - whatever the parser says, the bytes were the client's
            return MalformedRequest(bytes(data), f"{type(exc).__name__}: {exc}")
        _PARSED.set((id(message), len(data)))
        return message

    return parse


class MalformedRequests(grpc.aio.ServerInterceptor):
    def __init__(self, answered_per_frame: Collection[str] = (), prechecks: Mapping[str, Precheck] | None = None
                 ) -> None:
        self.answered_per_frame = frozenset(answered_per_frame)
        self.prechecks = dict(prechecks or {})

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        parse = lenient(handler.request_deserializer, self.prechecks.get(method))
        serialize = handler.response_serializer
        if method in self.answered_per_frame:
            return _with_deserializer(handler, parse)
        if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
            return grpc.unary_unary_rpc_method_handler(_unary(handler.unary_unary, method), parse, serialize)
        if handler.unary_stream is not None and _is_async(handler.unary_stream):
            return grpc.unary_stream_rpc_method_handler(_unary(handler.unary_stream, method), parse, serialize)
        if handler.stream_unary is not None and inspect.iscoroutinefunction(handler.stream_unary):
            return grpc.stream_unary_rpc_method_handler(_streamed(handler.stream_unary, method), parse, serialize)
        if handler.stream_stream is not None and _is_async(handler.stream_stream):
            return grpc.stream_stream_rpc_method_handler(_streamed(handler.stream_stream, method), parse,
                                                         serialize)
        return handler  # a synchronous behaviour (none of ours): gRPC's own parsing stays


def _is_async(behaviour: Any) -> bool:
    return inspect.iscoroutinefunction(behaviour) or inspect.isasyncgenfunction(behaviour)


def _with_deserializer(handler: grpc.RpcMethodHandler, parse: Callable[[bytes], Any]) -> grpc.RpcMethodHandler:
    kinds = {
        (False, False): (grpc.unary_unary_rpc_method_handler, handler.unary_unary),
        (False, True): (grpc.unary_stream_rpc_method_handler, handler.unary_stream),
        (True, False): (grpc.stream_unary_rpc_method_handler, handler.stream_unary),
        (True, True): (grpc.stream_stream_rpc_method_handler, handler.stream_stream),
    }
    make, behaviour = kinds[(handler.request_streaming, handler.response_streaming)]
    return make(behaviour, parse, handler.response_serializer)


async def _refuse(context: grpc.aio.ServicerContext, error: RequestError, method: str) -> None:
    log.warning("malformed_request", method=method, peer=context.peer(), error=str(error)[:200])
    await rpc_status.abort_async(context, status_for(error))


def _unary(behaviour: Any, method: str) -> Any:
    """A unary-request behaviour that refuses a MalformedRequest first."""
    if inspect.isasyncgenfunction(behaviour):
        async def answers(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            if isinstance(request, MalformedRequest):
                await _refuse(context, request.refusal(method), method)
            async for answer in behaviour(request, context):
                yield answer

        return answers

    async def answer(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, MalformedRequest):
            await _refuse(context, request.refusal(method), method)
        return await behaviour(request, context)

    return answer


def _streamed(behaviour: Any, method: str) -> Any:
    """A stream-request behaviour whose request stream raises RequestError at a MalformedRequest; the
    servicer may turn it into its own status, and one that lets it escape is refused here."""

    async def checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, MalformedRequest):
                raise request.refusal(method)
            yield request

    if inspect.isasyncgenfunction(behaviour):
        async def answers(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            try:
                async for answer in behaviour(checked(requests), context):
                    yield answer
            except RequestError as exc:
                await _refuse(context, exc, method)

        return answers

    async def answer(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        try:
            return await behaviour(checked(requests), context)
        except RequestError as exc:
            await _refuse(context, exc, method)

    return answer
