"""How requests flow through the GPU (DESIGN.md, "Throughput"): detection lanes, a batcher, reading lanes.

A request's work splits in two (agent/ocr/pipeline.py): `detect` (its image into a device image slot, detection,
DB's boxes on the host) and `read` (classification and recognition of its crops, CTC, its lines). A detection
lane is a thread with a stream of the device to itself (vk/streams.py) that takes queued requests one at a time
and runs their first half. A reading lane is a thread with its own stream that takes the requests waiting for
their second half, up to `batch_requests` of them, and reads them together: one classifier submission for all
their crops, one recogniser submission per line width for all of them (Triton's dynamic batching). So the host
work of one request (DB, crop geometry, CTC) runs while the GPU works on another's, and concurrent requests share
submissions; every line still goes back to its own request, in its order.

A reading lane that finds fewer than `batch_requests` ready waits up to `batch_wait_s` for more, and only while
other requests are in detection (they are the ones that could join): a lone request is never kept waiting, and no
request waits longer than that. An image slot is held from a request's detection to the end of its reading; a
detection lane takes a request only once it holds a free slot, so the slots bound the requests between the two
halves. With `overlap` off, one lane runs both halves of one request at a time, as the agent did before (to
measure what the overlap and the batching buy).

The flow knows nothing of queues, recovery or statistics: the GPU worker (agent/serving/worker.py) gives it the
requests (`take`), decides whether one still runs (`begin`), and is told how each ended (`done`), or that the
device failed under some (`failed`: it rebuilds and hands them in again).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from vkocr.agent.errors import RequestStopped
from vkocr.agent.ocr.pipeline import OcrPipeline, Stages
from vkocr.agent.ocr.request_halves import Detected
from vkocr.agent.serving.jobs import Job
from vkocr.engine.errors import VulkanError
from vkocr.log import get_logger
from vkocr.postproc.result import OcrResult

log = get_logger(__name__)

POLL_S = 0.05  # how often an idle lane looks up for a stop or a hold


@dataclass(frozen=True)
class FlowSettings:
    """server.detect_lanes, read_lanes, batch_requests, batch_wait_ms, batch_lines and overlap (config.py)."""

    detect_lanes: int = 1
    read_lanes: int = 1
    batch_requests: int = 8
    batch_wait_s: float = 0.002
    batch_lines: int = 16
    overlap: bool = True

    @property
    def streams(self) -> tuple[int, int]:
        """(detection, reading) lanes as they run on a GPU: one lane for both halves with the overlap off."""
        return (self.detect_lanes, self.read_lanes) if self.overlap else (1, 0)

    def lanes_for(self, pipeline: OcrPipeline) -> tuple[int, int]:
        """(detection, reading) lanes for this pipeline: off the GPU one lane for both halves (onnxruntime already
        runs each model on every core; two at once only contend for them)."""
        return self.streams if pipeline.device is not None else (1, 0)


class SlotPool:
    """The device's image slots: each is held by one request from its detection to the end of its reading."""

    def __init__(self, count: int) -> None:
        self._free = list(range(count - 1, -1, -1))
        self._cond = threading.Condition()

    def acquire(self, timeout: float) -> int | None:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._free), timeout):
                return None
            return self._free.pop()

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

    def take(self, limit: int, wait_s: float, timeout: float) -> list[Waiting]:
        """Up to `limit` ready requests, the oldest first; [] after `timeout` with none ready. With fewer than
        `limit`, waits up to `wait_s` from the first one's arrival for more, while some are in detection."""
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._ready), timeout):
                return []
            give_up = self._ready[0].since + wait_s
            while len(self._ready) < limit and self.detecting > 0:
                left = give_up - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return [self._ready.popleft() for _ in range(min(limit, len(self._ready)))]


Done = Callable[[Job, "OcrResult | BaseException"], None]


class Flow:
    """The lanes of one pipeline. `take(timeout)` gives the next request (None after `timeout`); `begin(job)`
    marks it running (False: it was dropped); `done(job, result or error)` ends it; `failed(jobs, error)` hands
    back requests whose device failed (the lane that saw it stops)."""

    def __init__(self, pipeline: OcrPipeline, settings: FlowSettings, *, take: Callable[[float], Job | None],
                 begin: Callable[[Job], bool], done: Done, failed: Callable[[list[Job], VulkanError], None]) -> None:
        self.pipeline, self.settings = pipeline, settings
        self._take, self._begin, self._done, self._failed = take, begin, done, failed
        self.slots = SlotPool(max(1, int(getattr(pipeline.stages, "image_slots", 1))))
        self.batcher = Batcher()
        self._stopping = threading.Event()  # no lane takes a new request; reading lanes drain, then all end
        self._holding = False
        self._gate = threading.Lock()  # held by a detection lane while it takes a request, and by held()
        self._active = 0  # requests taken and not yet done
        self._idle = threading.Condition()
        self.running: dict[str, None] = {}  # request ids taken and not yet done, oldest first
        self.batches: Counter[int] = Counter()  # reads by how many requests they held
        self.lines_read = 0  # crops those reads classified and recognised
        detect, read = settings.lanes_for(pipeline)
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
        self.batcher.wake()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()
        left = self.batcher.take(len(self.batcher), 0.0, 0.0) if len(self.batcher) else []
        if left:
            self._release(left)
            self._fail([w.job for w in left], VulkanError("read", "no reading lane was left to read this request"))

    def read_counts(self) -> tuple[Counter[int], int]:
        """(reads by the requests they held, crops they held) so far."""
        with self._idle:
            return Counter(self.batches), self.lines_read

    @property
    def idle(self) -> bool:
        return self._active == 0

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._active == 0, timeout)

    @contextmanager
    def held(self) -> Iterator[None]:
        """No lane takes a request inside (the ones in the flow finish first)."""
        with self._gate:  # no lane is between its check of the hold and its take
            self._holding = True
        try:
            self.wait_idle()
            yield
        finally:
            self._holding = False

    # -- the lanes ------------------------------------------------------------------------------------------------

    def _enter(self, job: Job) -> bool:
        with self._idle:
            self._active += 1
            self.running[job.request_id] = None
        if self._begin(job):
            return True
        self._leave(job)
        return False

    def _leave(self, job: Job) -> None:
        with self._idle:
            self._active -= 1
            self.running.pop(job.request_id, None)
            self._idle.notify_all()

    def _end(self, job: Job, outcome: OcrResult | BaseException) -> None:
        try:
            self._done(job, outcome)
        finally:
            self._leave(job)

    def _fail(self, jobs: list[Job], error: VulkanError) -> None:
        try:
            self._failed(jobs, error)
        finally:
            for job in jobs:
                self._leave(job)

    def _next(self) -> tuple[Job, int] | None:
        """A request and a free image slot for it, or None (stopping, holding, or nothing within POLL_S)."""
        if self._holding:
            time.sleep(POLL_S / 5)
            return None
        slot = self.slots.acquire(POLL_S)
        if slot is None:
            return None
        with self._gate:  # one lane waits for the queue at a time; a hold begins between two takes
            job = self._take(POLL_S) if not self._stopping.is_set() and not self._holding else None
            if job is not None and self._enter(job):
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
        lane = self.pipeline.lane(index)
        read_here = self.settings.lanes_for(self.pipeline)[1] == 0
        while not self._stopping.is_set():
            taken = self._next()
            if taken is None:
                continue
            job, slot = taken
            self.batcher.detection_began()
            ready = None
            try:
                detected = self.pipeline.detect(job.image, job.options, decoded=True, stop=job.stop_reason,
                                                lane=lane, slot=slot)
                if detected.slots and not read_here:
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
        lane = self.pipeline.lane(index)
        settings = self.settings
        while True:
            done = self._detecting_lanes == 0  # read before taking: what the last detection left is read first
            waiting = self.batcher.take(settings.batch_requests, settings.batch_wait_s, POLL_S)
            if not waiting:
                if done and self._stopping.is_set():
                    return
                continue
            if self._read(lane, waiting):
                return

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
        with self._idle:
            self.batches[len(waiting)] += 1
            self.lines_read += sum(len(w.detected.slots) for w in waiting)
        for w, outcome in zip(waiting, outcomes, strict=True):
            self._end(w.job, outcome)
        return False

    def _release(self, waiting: list[Waiting]) -> None:
        for w in waiting:
            self.slots.release(w.slot)
