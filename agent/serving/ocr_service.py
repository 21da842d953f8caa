"""vkocr.v1.OcrService: Recognize and RecognizeStream on the asyncio gRPC server.

A request is admitted on a decode thread (agent/serving/admission.py: options parsed and range-checked, plugin
chain built or found in the cache, image decoded and checked against the agent's pixel bound; never on the event
loop, never on the GPU worker), then it is queued for the GPU worker; its answer is converted back on the loop.
Every failure becomes a status with a reason (the table of agent/serving/status_table.py); nothing one request
does reaches another. A stream answers every frame it read, in order: one that does not parse or is refused gets
an answer with its id and ``error``, and the stream goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import status_pb2 as rpc_status_pb2

from vkocr.agent.errors import ShutdownCancelled, StopWho, StreamIdle
from vkocr.agent.serving import rpc_status, wire
from vkocr.agent.serving.admission import MAX_REQUEST_ID_CHARS, admit
from vkocr.agent.serving.decode_processes import DecodeProcesses
from vkocr.agent.serving.errors import DeadlineDropped, NotServing, QueueFull
from vkocr.agent.serving.jobs import Job, deadline_passed
from vkocr.agent.serving.malformed import MalformedRequest, wire_size
from vkocr.agent.serving.state import ServingState
from vkocr.agent.serving.stats import RequestStats
from vkocr.agent.serving.status_table import status_for
from vkocr.agent.serving.worker import GpuWorker
from vkocr.log import get_logger
from vkocr.v1 import ocr_pb2, ocr_pb2_grpc

log = get_logger("vkocr.agent.requests")


@dataclass
class RequestLog:
    """What the one log line of a request says."""

    request_id: str
    method: str
    peer: str
    bytes_in: int
    started: float
    deadline: float | None = None  # time.monotonic() when the client's deadline passes
    image: tuple[int, int] | None = None
    lines: int | None = None
    timings_ms: dict[str, float] | None = None


class StreamCaller:
    """A stream at the GPU queue: the caller the queue gives a turn like any other call (agent/serving/
    job_queue.py), and the lock that makes its frames take their places there in the order they were read."""

    def __init__(self) -> None:
        self.in_order = asyncio.Lock()


class OcrService(ocr_pb2_grpc.OcrServiceServicer):
    def __init__(self, worker: GpuWorker, stats: RequestStats, metrics: Any,
                 *, retry_after_s: float, stream_window: int, decode_threads: int = 4, decode_processes: int = 0,
                 stream_idle_s: float = 300.0) -> None:
        self.worker = worker
        self.stats = stats
        self.metrics = metrics
        self.retry_after_s = retry_after_s
        self.stream_window = stream_window
        self.stream_idle_s = stream_idle_s
        # with decode processes, a decode thread checks the request and waits for its image's process
        self._decoders = DecodeProcesses(decode_processes) if decode_processes else None
        self._decode = ThreadPoolExecutor(max(decode_threads, decode_processes), thread_name_prefix="vkocr-decode")
        # Streams waiting for room in the worker's queue wait on `_room`, which the worker's listener sets
        # (through the loop) when a job leaves the queue or the state changes; only while someone waits.
        self._room = asyncio.Event()
        self._room_loop: asyncio.AbstractEventLoop | None = None
        self._room_waiters = 0
        self._stop_listening = worker.add_room_listener(self._room_changed)

    def close(self) -> None:
        self._stop_listening()
        self._decode.shutdown(wait=False, cancel_futures=True)
        if self._decoders is not None:
            self._decoders.close()

    # -- RPCs ---------------------------------------------------------------------------------------------------

    async def Recognize(self, request: ocr_pb2.RecognizeRequest, context: grpc.aio.ServicerContext
                        ) -> ocr_pb2.RecognizeResponse:
        record = self._start(request, "Recognize", context.peer())
        remaining = context.time_remaining()
        deadline = record.deadline = time.monotonic() + remaining if remaining is not None else None
        try:
            response = await self._answer(request, record, deadline, block=False)
        except asyncio.CancelledError as exc:  # the client went: log and count it, then let gRPC finish it
            self._failure(exc, record)
            raise
        except Exception as exc:  # noqa: BLE001
            await rpc_status.abort_async(context, self._failure(exc, record))
        self._done(record, "OK")
        return response

    async def RecognizeStream(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> Any:
        """Answers in request order. At most `stream_window` requests are read ahead of their answers: past
        that the reader stops reading, and HTTP/2 flow control holds the client back."""
        peer = context.peer()
        remaining = context.time_remaining()
        deadline = time.monotonic() + remaining if remaining is not None else None
        window: asyncio.Queue[asyncio.Task[ocr_pb2.RecognizeStreamResponse] | None] = asyncio.Queue(
            self.stream_window)
        reader_error: list[BaseException] = []  # why reading stopped before the client's end of the stream
        # every answer started, to cancel at the end
        answers: set[asyncio.Task[ocr_pb2.RecognizeStreamResponse]] = set()
        caller = StreamCaller()

        def busy() -> bool:  # an answer in the works or not yet taken: the client is waiting, not idle
            return bool(answers) or not window.empty()

        async def read() -> None:
            frames = aiter(request_iterator)
            try:
                while (frame := await self._next_frame(frames, busy)) is not None:
                    request = frame if isinstance(frame, MalformedRequest) else frame.request
                    record = self._start(request, "RecognizeStream", peer)
                    record.deadline = deadline
                    task = asyncio.ensure_future(self._stream_answer(request, record, deadline, caller))
                    answers.add(task)
                    task.add_done_callback(answers.discard)
                    await window.put(task)
            except asyncio.CancelledError:  # the stream is over: no waiting for room in a window nobody empties
                with contextlib.suppress(asyncio.QueueFull):
                    window.put_nowait(None)
                raise
            except BaseException as exc:  # noqa: BLE001 - the client went, or sent something gRPC refused
                reader_error.append(exc)
            await window.put(None)

        reader = asyncio.ensure_future(read())
        try:
            while (task := await window.get()) is not None:
                yield await task
        finally:  # the client went, or the stream ended: nothing of it keeps running
            reader.cancel()
            for task in list(answers):
                task.cancel()
        if reader_error and not isinstance(reader_error[0], asyncio.CancelledError):
            # Every frame read was answered, but the stream broke before the client's end: not OK.
            log.warning("stream_reader_ended", peer=peer, error=repr(reader_error[0]))
            await rpc_status.abort_async(context, status_for(reader_error[0], peer=peer))

    async def _next_frame(self, frames: Any, busy: Any) -> Any:
        """The stream's next frame, None at its end; StreamIdle when none came for stream_idle_s while nothing
        of the stream was in the works (a client waiting on a slow answer is not idle)."""
        pending = asyncio.ensure_future(_first(frames))
        try:
            while True:
                done, _ = await asyncio.wait({pending}, timeout=self.stream_idle_s)
                if done:
                    return pending.result()
                if not busy():
                    raise StreamIdle(f"the stream sent no request for {self.stream_idle_s:g} s ([server] "
                                     "stream_idle_s on the agent): open a new one")
        finally:
            pending.cancel()

    # -- one request --------------------------------------------------------------------------------------------

    async def _stream_answer(self, request: ocr_pb2.RecognizeRequest | MalformedRequest, record: RequestLog,
                             deadline: float | None, caller: StreamCaller) -> ocr_pb2.RecognizeStreamResponse:
        try:
            response = await self._answer(request, record, deadline, block=True, caller=caller)
        except asyncio.CancelledError as exc:
            self._failure(exc, record)
            raise
        except Exception as exc:  # noqa: BLE001
            status = self._failure(exc, record)
            return ocr_pb2.RecognizeStreamResponse(request_id=record.request_id, error=status)
        self._done(record, "OK")
        return ocr_pb2.RecognizeStreamResponse(request_id=record.request_id, response=response)

    async def _answer(self, request: ocr_pb2.RecognizeRequest | MalformedRequest, record: RequestLog,
                      deadline: float | None, *, block: bool, caller: StreamCaller | None = None
                      ) -> ocr_pb2.RecognizeResponse:
        """Decode, queue for the GPU worker, wait, convert. `block`: wait for queue room (streams, which are
        bounded by their window) instead of failing with RESOURCE_EXHAUSTED."""
        with self.stats.track():
            if isinstance(request, MalformedRequest):  # a stream's frame: answered with its refusal
                raise request.refusal(record.method)
            pipeline = self.worker.pipeline
            if pipeline is None:
                raise NotServing("models not loaded")
            # the serving pipeline's options are the deployment's (with its bundle's) defaults
            admitted = await asyncio.get_running_loop().run_in_executor(
                self._decode, admit, request, pipeline, self._decoders)
            image = admitted.request.image
            record.image = (image.shape[1], image.shape[0])
            job = Job(record.request_id, admitted.request, deadline, caller=caller)
            try:
                future = await self._submit(job, block, deadline, caller)
                result = await asyncio.wrap_future(future)
            except asyncio.CancelledError:  # the worker drops the job, or stops it at its next stage boundary
                job.cancel(self._who_cancelled(deadline))
                raise
            result.timings_ms["decode"] = result.timings_ms.get("decode", 0.0) + admitted.decode_ms
            result.timings_ms["total"] = (time.monotonic() - record.started) * 1e3
            record.lines, record.timings_ms = len(result.lines), result.timings_ms
            return wire.result_to_proto(result, record.request_id, job.model_version, job.device_name,
                                        record.image)

    async def _submit(self, job: Job, block: bool, deadline: float | None, caller: StreamCaller | None) -> Any:
        if not block:
            return self.worker.submit(job)
        if caller is None:
            return await self._submit_when_room(job, deadline)
        async with caller.in_order:
            return await self._submit_when_room(job, deadline)

    async def _submit_when_room(self, job: Job, deadline: float | None) -> Any:
        self._room_loop = asyncio.get_running_loop()
        self._room_waiters += 1  # before the first try: room made after it wakes this waiter
        try:
            while True:
                self._room.clear()
                try:
                    return self.worker.submit(job)
                except QueueFull:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    await asyncio.wait_for(self._room.wait(), timeout)
                except TimeoutError:
                    pass  # the deadline: one more try, then QueueFull
        finally:
            self._room_waiters -= 1

    def _who_cancelled(self, deadline: float | None) -> StopWho:
        """Why gRPC cancelled a request's handler: the agent's shutdown (the server cancels what its grace
        period did not finish), the request's deadline, or else its client."""
        if self.worker.state.get().state is ServingState.DRAINING:
            return "shutdown"
        return "deadline" if deadline_passed(deadline) else "client"

    def _room_changed(self) -> None:
        """The worker's listener (any thread): wake the streams waiting for room."""
        loop = self._room_loop
        if self._room_waiters and loop is not None:
            try:
                loop.call_soon_threadsafe(self._room.set)
            except RuntimeError:  # the loop closed meanwhile
                pass

    # -- bookkeeping ----------------------------------------------------------------------------------------------

    @staticmethod
    def _start(request: ocr_pb2.RecognizeRequest | MalformedRequest, method: str, peer: str) -> RequestLog:
        if isinstance(request, MalformedRequest):
            given, size = wire.salvaged_request_id(request.data), len(request.data)
        else:
            given, size = request.request_id, wire_size(request)
        # an id over its limit is refused (admission.py); its answer and log line carry the first part
        request_id = given[:MAX_REQUEST_ID_CHARS] or f"req-{secrets.token_hex(6)}"
        return RequestLog(request_id, method, peer, size, time.monotonic())

    def _done(self, record: RequestLog, code: str, **extra: Any) -> None:
        seconds = time.monotonic() - record.started
        self.stats.record(seconds, ok=code == "OK")
        if self.metrics is not None:
            self.metrics.observe_request(record.method, code, seconds, record.timings_ms or {})
        stages = {k: round(v, 2) for k, v in (record.timings_ms or {}).items()}
        log.info("request", request_id=record.request_id, method=record.method, peer=record.peer,
                 bytes_in=record.bytes_in, image=record.image, lines=record.lines, status=code,
                 ms=round(seconds * 1e3, 2), stages_ms=stages, **extra)

    def _failure(self, exc: BaseException, record: RequestLog) -> rpc_status_pb2.Status:
        """The status a failed request gets (agent/serving/status_table.py); logged once, with an incident id for
        internal errors."""
        if isinstance(exc, asyncio.CancelledError):
            # While the agent stops, the server cancels what its grace period did not finish (a client that
            # leaves during the drain is counted as the shutdown too; the agent cannot tell the two apart).
            who = self._who_cancelled(record.deadline)
            if who == "shutdown":
                exc = ShutdownCancelled()
            elif who == "deadline":
                exc = DeadlineDropped("the deadline passed before the answer was ready")
        if isinstance(exc, QueueFull):
            self.stats.rejected()
            if self.metrics is not None:
                self.metrics.rejected()
        status = status_for(exc, retry_after_s=self.retry_after_s, request_id=record.request_id)
        self._done(record, rpc_status.code_name(status.code), error=status.message)
        return status


async def _first(frames: Any) -> Any:
    """The next item of an async iterator, or None at its end."""
    try:
        return await anext(frames)
    except StopAsyncIteration:
        return None
