"""vkocr.v1.Status: the agent's state once (Get) or as a stream (Watch): on every change of serving state, device
or model version, and at least every interval."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from vkocr.agent.serving import rpc_status
from vkocr.agent.serving.errors import status_for
from vkocr.agent.serving.sensors import serving_device_sensors
from vkocr.agent.serving.state import StateBoard, StateSnapshot
from vkocr.agent.serving.stats import RequestStats
from vkocr.agent.serving.worker import GpuWorker
from vkocr.v1 import status_pb2, status_pb2_grpc

MIN_INTERVAL_S = 0.05


class StatusService(status_pb2_grpc.StatusServicer):
    def __init__(self, state: StateBoard, worker: GpuWorker, stats: RequestStats, *, interval_s: float) -> None:
        self.state = state
        self.worker = worker
        self.stats = stats
        self.interval_s = interval_s

    def snapshot(self, sequence: int = 0) -> status_pb2.AgentStatus:
        state = self.state.get()
        numbers = self.stats.snapshot()
        used, reserved = self.worker.pool_usage()
        depth = self.worker.queue_depth()
        sensors = serving_device_sensors(state.backend, state.device)
        now = timestamp_pb2.Timestamp()
        now.GetCurrentTime()
        message = status_pb2.AgentStatus(
            sequence=sequence, time=now, state=status_pb2.ServingState.Value(state.state.value),
            reason=state.reason, device=state.device, backend=state.backend, backend_reason=state.backend_reason,
            model_version=state.model_version,
            queue_depth=depth, queue_capacity=self.worker.queue_capacity, in_flight=numbers.in_flight,
            latency_p50_ms=numbers.p50_ms, latency_p99_ms=numbers.p99_ms, latency_window_s=numbers.window_s,
            requests_total=numbers.requests_total, errors_total=numbers.errors_total,
            rejected_total=numbers.rejected_total, pool_used_bytes=used, pool_reserved_bytes=reserved,
            uptime_s=self.state.uptime_s(), device_rebuilds=state.device_rebuilds,
            plans=[status_pb2.ModelPlans(model=m.model, plans=m.plans, plan_memory_bytes=m.plan_memory_bytes,
                                         recorded_total=m.recorded_total, distinct_shapes=m.distinct_shapes)
                   for m in self.worker.plan_stats.models])
        if sensors is not None and sensors.temperature_c is not None:
            message.temperature_c = sensors.temperature_c
        if sensors is not None and sensors.power_w is not None:
            message.power_w = sensors.power_w
        return message

    async def Get(self, request: status_pb2.GetStatusRequest, context: grpc.aio.ServicerContext
                  ) -> status_pb2.AgentStatus:
        return await self._snapshot(context)

    async def _snapshot(self, context: grpc.aio.ServicerContext, sequence: int = 0) -> status_pb2.AgentStatus:
        """`snapshot` off the event loop; a failure leaves as the status of the agent's one table."""
        try:
            snapshot = await asyncio.get_running_loop().run_in_executor(None, self.snapshot, sequence)
        except Exception as exc:  # noqa: BLE001 - every failure leaves as a status (agent/serving/errors.py)
            await rpc_status.abort_async(context, status_for(exc))
        return snapshot

    async def Watch(self, request: status_pb2.WatchStatusRequest, context: grpc.aio.ServicerContext) -> Any:
        interval = interval_seconds(request.interval) if request.HasField("interval") else 0.0
        if interval and interval < MIN_INTERVAL_S:
            status = rpc_status.invalid_argument(
                f"interval must be at least {MIN_INTERVAL_S * 1e3:.0f} ms",
                [("interval", f"{interval * 1e3:.1f} ms is below the minimum")])
            await rpc_status.abort_async(context, status)
        interval = interval or self.interval_s
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def on_change(_snapshot: StateSnapshot) -> None:
            loop.call_soon_threadsafe(changed.set)

        unsubscribe = self.state.subscribe(on_change)
        try:
            sequence = 0
            while True:
                changed.clear()
                yield await self._snapshot(context, sequence)
                sequence += 1
                try:
                    await asyncio.wait_for(changed.wait(), interval)
                except TimeoutError:
                    pass
        finally:
            unsubscribe()


def interval_seconds(duration: duration_pb2.Duration) -> float:
    return duration.seconds + duration.nanos / 1e9
