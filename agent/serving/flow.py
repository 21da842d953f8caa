"""How requests flow through the GPU (DESIGN.md, "Throughput"): detection lanes, a batcher, reading lanes.

A request's work splits in two: `detect` (agent/ocr/detection.py: its image into a device image slot, detection,
DB's boxes on the host) and `read` (agent/ocr/reading.py: classification and recognition of its crops, CTC, its
lines). A detection lane is a thread with a stream of the device to itself (vk/streams.py) that takes queued
requests one at a time and runs their first half. A reading lane is a thread with its own stream that takes the
requests waiting for their second half, up to `batch_requests` of them, and reads them together: one classifier
submission for all their crops, one recogniser submission per line width for all of them (Triton's dynamic
batching). So the host work of one request (DB, crop geometry, CTC) runs while the GPU works on another's, and
concurrent requests share submissions; every line still goes back to its own request, in its order.

A reading lane that finds fewer than `batch_requests` ready waits up to `batch_wait_s` for more, and only while
other requests are in detection (they are the ones that could join): a lone request is never kept waiting, and no
request waits longer than that. An image slot is held from a request's detection to the end of its reading; a
detection lane takes a request only once it holds a free slot, so the slots bound the requests between the two
halves. With `overlap` off, one lane runs both halves of one request at a time, as the agent did before (to
measure what the overlap and the batching buy).

The flow knows nothing of queues or recovery: it talks to the GPU worker (agent/serving/worker.py) through one
interface, `JobSource`: the worker gives it the requests that still run (`take`, which blocks until there is one
or the flow stops or is held: `wake`), and is told how each ended (`end`), or that the lanes failed under some
(`fail`: it rebuilds and hands them in again).
Its reads are counted in the worker's `FlowCounts`, which outlive every flow, beside the worker's own counts.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from vkocr.agent.errors import RequestStopped
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.ocr.request_halves import Detected
from vkocr.agent.ocr.stages import Stages
from vkocr.agent.serving.config_throughput import ThroughputConfig
from vkocr.agent.serving.errors import ReadingLanesLost
from vkocr.agent.serving.jobs import Job
from vkocr.engine.errors import VulkanError
from vkocr.log import get_logger
from vkocr.postproc.result import OcrResult

log = get_logger(__name__)


def lanes_for(settings: ThroughputConfig, pipeline: OcrPipeline) -> tuple[int, int]:
    """(detection, reading) lanes for this pipeline: off the GPU one lane for both halves (onnxruntime already
    runs each model on every core; two at once only contend for them)."""
    return settings.lanes if pipeline.device is not None else (1, 0)


def shape_pipeline(settings: ThroughputConfig, pipeline: OcrPipeline) -> None:
    """Tell the pipeline which of its streams detect and which read, and how many lines a read batches: the
    GPU's plans answer a line alike in any batch size (tests/agent/ocr/test_image_slots.py); onnxruntime keeps the
    model set's own rec_batch."""
    pipeline.read_batch = settings.batch_lines if pipeline.device is not None else 0
    pipeline.stages.set_joint_batches(settings.joint_batches)
    pipeline.stages.set_lanes(*lanes_for(settings, pipeline))


class JobSource(Protocol):
    """What the flow asks of its owner, the GPU worker."""

    def take(self, until: Callable[[], bool]) -> Job | None:
        """The next request for a detection lane, marked running, once there is one (the source drops those whose
        answer is no longer wanted); None as soon as `until()` is true."""

    def wake(self) -> None:
        """Make a lane waiting in `take` ask its `until()` again."""

    def end(self, job: Job, outcome: OcrResult | BaseException) -> None:
        """A lane is done with the request: its answer, or why there is none."""

    def fail(self, jobs: list[Job], error: BaseException) -> None:
        """The device (or every reading lane) failed under these requests: rebuild and hand them in again."""


class FlowCounts:
    """What happened to a worker's requests, over every flow it ran (any thread): dropped before their GPU work
    (by "cancelled" or "deadline"), stopped between stages (by who: "client", "deadline"…), and the reads, by the
    requests they held, with the crops they held."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.dropped: Counter[str] = Counter()
        self.stopped: Counter[str] = Counter()
        self.batches: Counter[int] = Counter()
        self.lines = 0

    def drop(self, why: str) -> None:
        with self._lock:
            self.dropped[why] += 1

    def stop(self, who: str) -> None:
        with self._lock:
            self.stopped[who] += 1

    def read(self, requests: int, lines: int) -> None:
        with self._lock:
            self.batches[requests] += 1
            self.lines += lines

    def reads(self) -> tuple[int, int, int]:
        """(reads, requests they held, crops they held)."""
        with self._lock:
            return (sum(self.batches.values()), sum(size * n for size, n in self.batches.items()), self.lines)


class SlotPool:
    """The device's image slots: each is held by one request from its detection to the end of its reading."""

    def __init__(self, count: int) -> None:
        self._free = list(range(count - 1, -1, -1))
        self._cond = threading.Condition()
        self._closed = False

    def acquire(self) -> int | None:
        """A free slot, once there is one; None once the pool is closed."""
        with self._cond:
            self._cond.wait_for(lambda: bool(self._free) or self._closed)
            return None if self._closed else self._free.pop()

    def close(self) -> None:
        """Wake every lane waiting for a slot: none is handed out any more."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def release(self, slot: int) -> None:
        with self._cond:
            self._free.append(slot)
            self._cond.notify()


@dataclass
class Waiting:
    """A request between its halves: its job, what `detect` found, the slot its image holds and since when it
    waits."""

    job: Job
    detected: Detected
    slot: int
    since: float


class Batcher:
    """The requests between their halves, in the order their detection ended, and how many are in detection."""

    def __init__(self) -> None:
        self._ready: deque[Waiting] = deque()
        self._cond = threading.Condition()
        self.detecting = 0

    def detection_began(self) -> None:
        with self._cond:
            self.detecting += 1

    def detection_ended(self, ready: Waiting | None) -> None:
        """A detection lane is done with a request: `ready` waits for its reading (None: it needs none)."""
        with self._cond:
            self.detecting -= 1
            if ready is not None:
                self._ready.append(ready)
            self._cond.notify_all()

    def __len__(self) -> int:
        return len(self._ready)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def take(self, limit: int, wait_s: float, until: Callable[[], bool] = lambda: False,
             timeout: float | None = None) -> list[Waiting]:
        """Up to `limit` ready requests, the oldest first; [] when `until()` turns true (asked whenever the
        batcher is woken) or after `timeout` with none ready. With fewer than `limit`, waits up to `wait_s` from
        the first one's arrival for more, while some are in detection."""
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._ready) or until(), timeout) or not self._ready:
                return []
            give_up = self._ready[0].since + wait_s
            while len(self._ready) < limit and self.detecting > 0:
                left = give_up - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return [self._ready.popleft() for _ in range(min(limit, len(self._ready)))]


class Flow:
    """The lanes of one pipeline, fed and answered through `source` (the worker); each read counted in `counts`.
    A lane that sees the device fail hands its requests to `source.fail` and stops."""

    def __init__(self, pipeline: OcrPipeline, settings: ThroughputConfig, source: JobSource, counts: FlowCounts
                 ) -> None:
        self.pipeline, self.settings = pipeline, settings
        self.source, self.counts = source, counts
        self.slots = SlotPool(max(1, pipeline.stages.image_slots))
        self.batcher = Batcher()
        self._stopping = threading.Event()  # no lane takes a new request; reading lanes drain, then all end
        self._holding = False
        self._unheld = threading.Event()  # set while no hold is on (or the flow stops): lanes wait on it
        self._unheld.set()
        self._gate = threading.Lock()  # held by a detection lane while it takes a request, and by held()
        self._active = 0  # requests taken and not yet done
        self._idle = threading.Condition()
        self.running: dict[str, None] = {}  # request ids taken and not yet done, oldest first
        detect, read = lanes_for(settings, pipeline)
        self._threads = [threading.Thread(target=self._detect_lane, args=(i,), name=f"vkocr-detect-{i}",
                                          daemon=True) for i in range(detect)]
        self._detecting_lanes = detect  # alive: a reading lane ends only after the last, and the batcher is empty
        self._threads += [threading.Thread(target=self._read_lane, args=(detect + j,), name=f"vkocr-read-{j}",
                                           daemon=True) for j in range(read)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Take no new request; the requests inside finish (or fail), then every lane ends. Waits for them. What
        no reading lane was left to read (they all failed) is handed back as failed."""
        self._stopping.set()
        self._unheld.set()
        self.source.wake()  # a lane waiting in take gives up
        self.slots.close()
        self.batcher.wake()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()
        left = self.batcher.take(len(self.batcher), 0.0, timeout=0.0) if len(self.batcher) else []
        if left:
            self._release(left)
            self._fail([w.job for w in left], ReadingLanesLost("no reading lane was left to read this request"))

    @property
    def newest(self) -> str:
        """The request id of the newest request inside the lanes, "" when none is."""
        ids = list(self.running)
        return ids[-1] if ids else ""

    @property
    def idle(self) -> bool:
        return self._active == 0

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._active == 0, timeout)

    @contextmanager
    def held(self) -> Iterator[None]:
        """No lane takes a request inside (the ones in the flow finish first)."""
        self._holding = True
        self._unheld.clear()
        self.source.wake()  # a lane waiting in take gives up
        with self._gate:  # no lane is between its check of the hold and its take
            pass
        try:
            self.wait_idle()
            yield
        finally:
            self._holding = False
            self._unheld.set()

    # -- the lanes ------------------------------------------------------------------------------------------------

    def _enter(self, job: Job) -> None:
        with self._idle:
            self._active += 1
            self.running[job.request_id] = None

    def _leave(self, job: Job) -> None:
        with self._idle:
            self._active -= 1
            self.running.pop(job.request_id, None)
            self._idle.notify_all()

    def _end(self, job: Job, outcome: OcrResult | BaseException) -> None:
        try:
            self.source.end(job, outcome)
        finally:
            self._leave(job)

    def _fail(self, jobs: list[Job], error: BaseException) -> None:
        try:
            self.source.fail(jobs, error)
        finally:
            for job in jobs:
                self._leave(job)

    def _paused(self) -> bool:
        """Whether no lane may take a request now: the flow stops, or is held."""
        return self._stopping.is_set() or self._holding

    def _next(self) -> tuple[Job, int] | None:
        """A request and a free image slot for it, once there are both; None when the flow stops or is held."""
        self._unheld.wait()
        slot = self.slots.acquire()
        if slot is None:
            return None
        with self._gate:  # one lane waits for the queue at a time; a hold begins between two takes
            job = None if self._paused() else self.source.take(self._paused)
            if job is not None:
                self._enter(job)
                return job, slot
        self.slots.release(slot)
        return None

    def _detect_lane(self, index: int) -> None:
        try:
            self._detect_requests(index)
        finally:
            with self._idle:
                self._detecting_lanes -= 1
            self.batcher.wake()

    def _detect_requests(self, index: int) -> None:
        lane = self.pipeline.stream(index)
        read_here = lanes_for(self.settings, self.pipeline)[1] == 0
        while not self._stopping.is_set():
            taken = self._next()
            if taken is None:
                continue
            job, slot = taken
            self.batcher.detection_began()
            ready = None
            try:
                detected = self.pipeline.detect(job.request, stop=job.stop_reason, lane=lane, slot=slot)
                if detected.crops and not read_here:
                    ready = Waiting(job, detected, slot, time.monotonic())
                else:  # nothing to read, or no overlap: both halves on this lane
                    if self._read(lane, [Waiting(job, detected, slot, time.monotonic())]):
                        return
                    continue
            except VulkanError as exc:
                self.slots.release(slot)
                self._fail([job], exc)
                return
            except BaseException as exc:  # noqa: BLE001 - RequestStopped, bad input, a bug: its request's answer
                self.slots.release(slot)
                self._end(job, exc)
            finally:
                self.batcher.detection_ended(ready)

    def _read_lane(self, index: int) -> None:
        lane = self.pipeline.stream(index)
        settings = self.settings
        while True:
            waiting = self.batcher.take(settings.batch_requests, settings.batch_wait_s, self._drained)
            if not waiting:  # what the last detection left is read first: the batcher gives it before this
                return
            if self._read(lane, waiting):
                return

    def _drained(self) -> bool:
        """Whether a reading lane may end: the flow stops and no detection lane is left to make work."""
        return self._stopping.is_set() and self._detecting_lanes == 0

    def _read(self, lane: Stages, waiting: list[Waiting]) -> bool:
        """Read these requests together and end each; True when the device failed (the lane stops)."""
        now = time.monotonic()
        for w in waiting:
            w.detected.laps.timings["batch_wait"] = (now - w.since) * 1e3
        try:
            outcomes: list[OcrResult | RequestStopped] = self.pipeline.read([w.detected for w in waiting], lane=lane)
        except VulkanError as exc:
            self._release(waiting)
            self._fail([w.job for w in waiting], exc)
            return True
        except Exception as exc:  # noqa: BLE001 - a bug of ours: every request of the batch hears of it
            self._release(waiting)
            for w in waiting:
                self._end(w.job, exc)
            return False
        self._release(waiting)
        self.counts.read(len(waiting), sum(len(w.detected.crops) for w in waiting))
        for w, outcome in zip(waiting, outcomes, strict=True):
            self._end(w.job, outcome)
        return False

    def _release(self, waiting: list[Waiting]) -> None:
        for w in waiting:
            self.slots.release(w.slot)
