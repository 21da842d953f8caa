"""GPU lanes: more pipelines of the served models beside the GPU worker's own, each with its own Vulkan device
context, plans, buffers and thread, taking requests from the worker's queue (DESIGN.md, "Throughput").

One pipeline runs one request at a time, and between its GPU stages the host works (DB's contours, the crop
geometry, CTC, the Python between submissions): on the H200 the GPU idled half the time at 16 clients
(BENCHMARKS.md). A second pipeline's GPU work fills those gaps. Two requests in flight share nothing but the GPU.
On the H200 that did not pay: NVIDIA time-slices device contexts, so each lane's stages took up to twice as long,
and two lanes gave 0.89-1.16x the images/s of one (BENCHMARKS.md, session 19). One lane is the default.

The worker thread stays in charge (agent/serving/worker.py). It starts the lanes once its own pipeline serves,
stops them before a model swap or a device rebuild (each finishes the request it runs) and starts them again
from the pipeline it serves then; until a lane has opened and warmed its pipeline, the others serve without it.
A lane whose device fails hands its request back to the worker thread, which recovers as it always did, and the
lane stops.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from vkocr.agent.errors import AgentError
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.serving.jobs import Job
from vkocr.engine.errors import VulkanError
from vkocr.log import get_logger
from vkocr.postproc.result import OcrResult

log = get_logger(__name__)

LANE_POLL_S = 0.05  # how often an idle lane looks up from the queue for a stop or a hold


class LaneFailed(AgentError):
    """Raised by `Lane.recognize` when the lane's device fails on a request; never reaches a client: the request goes
    back to the worker thread, which serves it (and recovers the device if it must), and the lane stops."""


def lane_count(configured: int, pipeline: OcrPipeline | None) -> int:
    """Pipelines that serve side by side, this one first: `configured` (server.gpu_lanes) on a Vulkan device,
    one on the CPU backend (which already uses every core)."""
    return configured if pipeline is not None and pipeline.device is not None else 1


class Lane:
    """One more pipeline, opened as a sibling of the served one, on its own thread."""

    def __init__(self, index: int, source: OcrPipeline, lanes: Lanes) -> None:
        self.index = index
        self.pipeline: OcrPipeline | None = None  # set once opened and warmed
        self.busy = threading.Lock()  # held while the lane takes or runs a request
        self._lanes = lanes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(source,), name=f"vkocr-gpu-lane-{index}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self) -> None:
        self._thread.join()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def recognize(self, job: Job) -> OcrResult:
        """The request's device stages on this lane's pipeline; LaneFailed when its device fails."""
        assert self.pipeline is not None  # a lane takes requests only once opened
        try:
            return self.pipeline.recognize(job.image, job.options, decoded=True, stop=job.stop_reason)
        except VulkanError as exc:
            log.error("lane_device_failure", lane=self.index, request_id=job.request_id, error=str(exc))
            self._stop.set()
            raise LaneFailed(str(exc)) from exc

    def _run(self, source: OcrPipeline) -> None:
        # the device is opened, used and closed on this thread alone
        try:
            pipeline = source.sibling()
        except Exception as exc:  # noqa: BLE001 - the other lanes serve on without this one
            log.warning("lane_not_opened", lane=self.index, error=f"{type(exc).__name__}: {exc}")
            return
        if pipeline is None:
            return
        try:
            self._lanes.warm(pipeline, self._stop.is_set)
            self.pipeline = pipeline
            log.info("lane_serving", lane=self.index, device=pipeline.device_name)
            while not self._stop.is_set():
                with self.busy:
                    job = None if self._lanes.holding else self._lanes.take(LANE_POLL_S)
                    if job is not None:
                        self._lanes.serve(self, job)
                if job is None and self._lanes.holding:
                    time.sleep(LANE_POLL_S)
        finally:
            self.pipeline = None
            try:
                pipeline.close()
            except Exception as exc:  # noqa: BLE001 - a failed device may refuse even its destruction
                log.warning("lane_close_failed", lane=self.index, error=str(exc))


class Lanes:
    """The worker's extra lanes: started from the served pipeline, stopped before it changes.

    `take(timeout)` gives the next queued request or None; `serve(lane, job)` runs one on a lane (the worker's
    request path); `warm(pipeline, stopping)` records a new lane's plans before it serves."""

    def __init__(self, configured: int, take: Callable[[float], Job | None], serve: Callable[[Lane, Job], None],
                 warm: Callable[[OcrPipeline, Callable[[], bool]], Any]) -> None:
        self.configured = configured
        self.take, self.serve, self.warm = take, serve, warm
        self.holding = False  # held(): lanes take no request meanwhile
        self._lanes: list[Lane] = []
        self._lock = threading.Lock()

    def start(self, pipeline: OcrPipeline | None) -> None:
        """Lanes beside `pipeline` up to the configured count (none when it is not on a Vulkan GPU); the ones
        still running are kept."""
        wanted = lane_count(self.configured, pipeline) - 1
        with self._lock:
            self._lanes = [lane for lane in self._lanes if lane.alive]
            used = {lane.index for lane in self._lanes}
            free = (i for i in range(1, wanted + 1) if i not in used)
            for _ in range(wanted - len(self._lanes)):
                assert pipeline is not None  # wanted > 0 only with a Vulkan pipeline
                self._lanes.append(Lane(next(free), pipeline, self))

    def stop(self) -> None:
        """Stop every lane and wait for it: each finishes the request it runs and closes its device."""
        with self._lock:
            lanes, self._lanes = self._lanes, []
        for lane in lanes:
            lane.stop()
        for lane in lanes:
            lane.join()

    @contextmanager
    def held(self) -> Iterator[None]:
        """No lane takes a request inside (the ones running finish first)."""
        self.holding = True
        try:
            with ExitStack() as stack:
                for lane in self.serving():
                    stack.enter_context(lane.busy)
                yield
        finally:
            self.holding = False

    def serving(self) -> list[Lane]:
        """The lanes whose pipeline is open and warm."""
        with self._lock:
            return [lane for lane in self._lanes if lane.pipeline is not None]

    def pipelines(self) -> list[OcrPipeline]:
        return [p for lane in self.serving() if (p := lane.pipeline) is not None]

    def devices(self, primary: OcrPipeline | None) -> list[Any]:
        """The Vulkan devices of `primary` and of every serving lane."""
        pipelines = [primary, *self.pipelines()]
        return [p.device for p in pipelines if p is not None and p.device is not None]


def memory_usage(devices: list[Any]) -> tuple[int, int]:
    """(bytes in live allocations, bytes allocated from the driver) of these devices' pools together."""
    used = reserved = 0
    for device in devices:
        try:
            lane_used, lane_reserved = device.memory_usage()
        except Exception:  # noqa: BLE001 - a device being rebuilt: report nothing, not fail the status stream
            continue
        used, reserved = used + int(lane_used), reserved + int(lane_reserved)
    return used, reserved
