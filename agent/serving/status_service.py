"""vkocr.v1.StatusService: the agent's state once (GetStatus) or as a stream (WatchStatus): on every change of
serving state, device or model version, and at least every interval."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import grpc
from google.protobuf import timestamp_pb2

from vkocr.agent.serving import rpc_status
from vkocr.agent.serving.durations import duration_from_ms, duration_from_s, seconds_of
from vkocr.agent.serving.proto_enums import value_name
from vkocr.agent.serving.sensors import serving_device_sensors
from vkocr.agent.serving.state import StateBoard, StateSnapshot
from vkocr.agent.serving.stats import RequestStats
from vkocr.agent.serving.status_table import status_for
from vkocr.agent.serving.worker import GpuWorker
from vkocr.v1 import status_pb2, status_pb2_grpc

MIN_INTERVAL_S = 0.05


class StatusService(status_pb2_grpc.StatusServiceServicer):
    def __init__(self, state: StateBoard, worker: GpuWorker, stats: RequestStats, *, interval_s: float,
                 max_watches_per_connection: int = 16) -> None:
        self.state = state
        self.worker = worker
        self.stats = stats
        self.interval_s = interval_s
        # Below the connection's HTTP/2 stream limit, so that the watch past it reaches us and is answered
        # RESOURCE_EXHAUSTED (gRPC core refuses a stream over the limit as UNAVAILABLE, with no message), and
        # the connection keeps streams for health checks and OCR calls.
        self.max_watches_per_connection = max_watches_per_connection
        self._watches: Counter[str] = Counter()  # open watches by peer: one peer address is one connection

    def snapshot(self, sequence: int = 0) -> status_pb2.AgentStatus:
        state = self.state.get()
        numbers = self.stats.snapshot()
        used, reserved = self.worker.pool_usage()
        depth = self.worker.queue_depth()
        sensors = serving_device_sensors(state.backend, state.device)
        now = timestamp_pb2.Timestamp()
        now.GetCurrentTime()
        message = status_pb2.AgentStatus(
            sequence=sequence, time=now, state=value_name(status_pb2.ServingState, state.state.value),
            reason=state.reason, device=state.device, backend=value_name(status_pb2.Backend, state.backend),
            backend_reason=state.backend_reason, precision=state.precision, precision_reason=state.precision_reason,
            model_version=state.model_version,
            queue_depth=depth, queue_capacity=self.worker.queue_capacity, in_flight=numbers.in_flight,
            latency_p50=duration_from_ms(numbers.p50_ms), latency_p99=duration_from_ms(numbers.p99_ms),
            latency_window=duration_from_s(numbers.window_s),
            requests_total=numbers.requests_total, errors_total=numbers.errors_total,
            rejected_total=numbers.rejected_total, pool_used_bytes=used, pool_reserved_bytes=reserved,
            uptime=duration_from_s(self.state.uptime_s()), device_rebuilds=state.device_rebuilds,
            plans=[status_pb2.ModelPlans(model=value_name(status_pb2.ModelKind, m.model), plans=m.plans,
                                         plan_memory_bytes=m.plan_memory_bytes, recorded_total=m.recorded_total,
                                         distinct_shapes=m.distinct_shapes)
                   for m in self.worker.plan_stats.models])
        if sensors is not None and sensors.temperature_c is not None:
            message.temperature_c = sensors.temperature_c
        if sensors is not None and sensors.power_w is not None:
            message.power_w = sensors.power_w
        return message

    async def GetStatus(self, request: status_pb2.GetStatusRequest, context: grpc.aio.ServicerContext
                        ) -> status_pb2.GetStatusResponse:
        return status_pb2.GetStatusResponse(status=await self._snapshot(context))

    async def _snapshot(self, context: grpc.aio.ServicerContext, sequence: int = 0) -> status_pb2.AgentStatus:
        """`snapshot` off the event loop; a failure leaves as the status of the agent's one table."""
        try:
            snapshot = await asyncio.get_running_loop().run_in_executor(None, self.snapshot, sequence)
        except Exception as exc:  # noqa: BLE001 - every failure leaves as a status (agent/serving/status_table.py)
            await rpc_status.abort_async(context, status_for(exc))
        return snapshot

    async def WatchStatus(self, request: status_pb2.WatchStatusRequest, context: grpc.aio.ServicerContext
                          ) -> Any:
        interval = seconds_of(request.interval) if request.HasField("interval") else 0.0
        if interval and interval < MIN_INTERVAL_S:
            status = rpc_status.invalid_argument(
                f"interval must be at least {MIN_INTERVAL_S * 1e3:.0f} ms",
                [("interval", f"{interval * 1e3:.1f} ms is below the minimum")])
            await rpc_status.abort_async(context, status)
        interval = interval or self.interval_s
        peer = context.peer()
        if self._watches[peer] >= self.max_watches_per_connection:
            await rpc_status.abort_async(context, rpc_status.resource_exhausted(
                f"this connection already has {self._watches[peer]} status watches open, at most "
                f"{self.max_watches_per_connection} per connection: close one, or open another connection",
                retry_after_s=1.0))
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def on_change(_snapshot: StateSnapshot) -> None:
            loop.call_soon_threadsafe(changed.set)

        unsubscribe = self.state.subscribe(on_change)
        self._watches[peer] += 1
        ended = False

        def end(_context: object = None) -> None:
            # when the call ends, however: a client that went is seen at once, while this generator would only
            # be closed at its next write, or by the garbage collector
            nonlocal ended
            if not ended:
                ended = True
                unsubscribe()
                self._watches[peer] -= 1
                if not self._watches[peer]:
                    del self._watches[peer]

        context.add_done_callback(end)
        try:
            sequence = 0
            while True:
                changed.clear()
                yield status_pb2.WatchStatusResponse(status=await self._snapshot(context, sequence))
                sequence += 1
                try:
                    await asyncio.wait_for(changed.wait(), interval)
                except TimeoutError:
                    pass
        finally:
            end()

