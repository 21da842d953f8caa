"""The bounded queue in front of the GPU worker (DESIGN.md, "One request, end to end", step 2): jobs wait here
for a detection lane; a failed device's jobs, handed in again, go first. It counts the jobs not yet settled
(queued, or on their device stages), so that a stopping worker can wait for none, and it tells its listeners
whenever a job leaves (a stream waiting for room may try again). A job leaves it running (`take`), or dropped
when its answer is no longer wanted: no GPU work is spent on it.

Fair between calls: jobs wait in one line per caller (a stream, or a single request, which is its own caller),
and the lanes take from the callers in turn (round robin), so a stream whose next frame is always ready gets
one turn in each round like every other call. A caller may have at most `per_caller` jobs in the worker
(queued, or on their way through the lanes, until their answer): a stream waits for room past that (HTTP/2 flow
control then holds its client back), so it can neither fill the queue that single requests need nor crowd the
lanes' batches, which take requests in the order they came."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable

from vkocr.agent.serving.errors import DeviceFailed, NotServing, QueueFull
from vkocr.agent.serving.jobs import Job, dropped_error, settle
from vkocr.log import get_logger

log = get_logger(__name__)

_single_callers = itertools.count()


class JobQueue:
    def __init__(self, size: int, per_caller: int | None = None,
                 dropped: Callable[[str], None] = lambda why: None) -> None:
        """`dropped(why)` counts a job dropped as it is taken ("cancelled" or "deadline")."""
        self._size = size
        self._dropped = dropped
        self.per_caller = per_caller or size
        self._waiting: OrderedDict[object, deque[Job]] = OrderedDict()  # by caller, in turn order
        self._in_worker: Counter[object] = Counter()  # by caller: queued, or in the lanes until answered
        self._depth = 0
        # notified when a job is queued, handed back or taken, and when a lane must look up from its take (wake)
        self._changed = threading.Condition()
        self._handed_back: deque[Job] = deque()  # a failed device's, served first
        self._settled = threading.Condition()  # notified when a job leaves the queue or its device stages
        self._unsettled = 0  # jobs queued or on their device stages
        self._room_listeners: tuple[Callable[[], None], ...] = ()

    @property
    def capacity(self) -> int:
        return self._size

    def depth(self) -> int:
        return self._depth

    def put(self, job: Job, *, block: bool = False, timeout: float | None = None) -> None:
        """Queue a job; QueueFull when the queue is full, or its caller has `per_caller` jobs in the worker
        (after `timeout` when blocking)."""
        caller = job.caller or ("single", next(_single_callers))
        self.settle(+1)
        with self._changed:
            if not self._changed.wait_for(lambda: self._has_room(caller), timeout if block else 0):
                self.settle(-1)
                if self._depth >= self._size:
                    raise QueueFull(f"queue full ({self._size} requests waiting for the GPU)")
                raise QueueFull(f"this stream has {self.per_caller} requests at the GPU already")
            self._waiting.setdefault(caller, deque()).append(job)
            self._depth += 1
            self._in_worker[caller] += 1
            self._changed.notify_all()
        job.future.add_done_callback(lambda _: self._answered(caller))

    def _has_room(self, caller: object) -> bool:
        return self._depth < self._size and self._in_worker[caller] < self.per_caller

    def _answered(self, caller: object) -> None:
        """A caller's job has its answer (any thread): room for its next."""
        with self._changed:
            self._in_worker[caller] -= 1
            if self._in_worker[caller] <= 0:
                del self._in_worker[caller]
            self._changed.notify_all()
        self.notify_room()

    def retry(self, jobs: list[Job], rebuilt: bool, error: BaseException) -> None:
        """A failed device's jobs: handed in again once, ahead of the queue, when the device was `rebuilt`; else,
        or at their second failure, DeviceFailed."""
        for job in jobs:
            if not rebuilt or job.attempts >= 2:
                settle(job.future, error=DeviceFailed(f"device failure: {error}"))
                self.settle(-1)
            else:
                job.attempts += 1
                with self._changed:
                    self._handed_back.append(job)
                    self._changed.notify_all()

    def take(self, until: Callable[[], bool]) -> Job | None:
        """The next job (a handed-back one first), marked running, once there is one; a job whose answer is no
        longer wanted (cancelled, or past its deadline) is dropped on the way. None as soon as `until()` is true
        (asked whenever the queue changes or is woken: `wake`): an idle lane sleeps here, nothing polls."""
        while True:
            with self._changed:
                self._changed.wait_for(lambda: until() or bool(self._handed_back) or self._depth > 0)
                if until():
                    return None
                job = self._handed_back.popleft() if self._handed_back else self._next()
            self.notify_room()
            if job is not None and self._begin(job):
                return job

    def _begin(self, job: Job) -> bool:
        """Mark the job running; False when it is dropped instead. A job handed in again after a device failure
        is running already."""
        if job.attempts:
            return True
        job.attempts = 1
        job.started = time.monotonic()
        waited_ms = (job.started - job.enqueued) * 1e3
        who = job.begin()
        if who is None:
            return True
        self._dropped("deadline" if who == "deadline" else "cancelled")
        settle(job.future, error=dropped_error(who, waited_ms))
        log.info("request_dropped", request_id=job.request_id, who=who, waited_ms=round(waited_ms))
        self.settle(-1)
        return False

    def wake(self) -> None:
        """Make a lane waiting in `take` ask its `until()` again (the flow stops, or is held)."""
        with self._changed:
            self._changed.notify_all()

    def _next(self) -> Job | None:
        """The first job of the caller whose turn it is (that caller then goes to the end of the line), None
        when none is queued."""
        with self._changed:
            if self._depth == 0:
                return None
            caller, waiting = next(iter(self._waiting.items()))
            job = waiting.popleft()
            del self._waiting[caller]
            if waiting:
                self._waiting[caller] = waiting  # its next turn after every other caller's
            self._depth -= 1
            self._changed.notify_all()
            return job

    def fail_all(self, why: str) -> None:
        """Fail every queued job with NotServing(why), never silently dropped."""
        while True:
            job = self._next()
            if job is None:
                return
            settle(job.future, error=NotServing(why))
            self.settle(-1)
            self.notify_room()

    def settle(self, change: int) -> None:
        """`change` jobs more (or fewer) are queued or on their device stages."""
        with self._settled:
            self._unsettled += change
            self._settled.notify_all()

    def wait_settled(self, timeout: float) -> bool:
        """Wait until no job is queued or on its device stages; False after `timeout`."""
        with self._settled:
            return self._settled.wait_for(lambda: self._unsettled == 0, timeout)

    def add_room_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` (any thread; it must not block) whenever a job may find room; returns its remover."""
        self._room_listeners = (*self._room_listeners, listener)

        def remove() -> None:
            self._room_listeners = tuple(x for x in self._room_listeners if x is not listener)

        return remove

    def notify_room(self) -> None:
        for listener in self._room_listeners:
            try:
                listener()
            except Exception as exc:  # noqa: BLE001 - a listener's fault must not stop the worker
                log.warning("room_listener_failed", error=repr(exc))
