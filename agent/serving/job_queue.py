"""The bounded queue in front of the GPU worker (DESIGN.md, "One request, end to end", step 2): jobs wait here
for a detection lane; a failed device's jobs, handed in again, go first. It counts the jobs not yet settled
(queued, or on their device stages), so that a stopping worker can wait for none, and it tells its listeners
whenever a job leaves (a stream waiting for room may try again).

Fair between calls: jobs wait in one line per caller (a stream, or a single request, which is its own caller),
and the lanes take from the callers in turn (round robin), so a stream whose next frame is always ready gets
one turn in each round like every other call. A caller may have at most `per_caller` jobs in the worker
(queued, or on their way through the lanes, until their answer): a stream waits for room past that (HTTP/2 flow
control then holds its client back), so it can neither fill the queue that single requests need nor crowd the
lanes' batches, which take requests in the order they came."""

from __future__ import annotations

import itertools
import queue
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable

from vkocr.agent.serving.errors import DeviceFailed, NotServing, QueueFull
from vkocr.agent.serving.jobs import Job, settle
from vkocr.log import get_logger

log = get_logger(__name__)

_single_callers = itertools.count()


class JobQueue:
    def __init__(self, size: int, per_caller: int | None = None) -> None:
        self._size = size
        self.per_caller = per_caller or size
        self._waiting: OrderedDict[object, deque[Job]] = OrderedDict()  # by caller, in turn order
        self._in_worker: Counter[object] = Counter()  # by caller: queued, or in the lanes until answered
        self._depth = 0
        self._changed = threading.Condition()  # notified when a job is queued or taken
        self._handed_back: queue.SimpleQueue[Job] = queue.SimpleQueue()  # a failed device's, served first
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
                self._handed_back.put(job)

    def take(self, timeout: float) -> Job | None:
        """The next job (a handed-back one first), None after `timeout`."""
        try:
            return self._handed_back.get_nowait()
        except queue.Empty:
            pass
        job = self._next(timeout)
        if job is not None:
            self.notify_room()
        return job

    def _next(self, timeout: float) -> Job | None:
        """The first job of the caller whose turn it is (that caller then goes to the end of the line)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._depth > 0, timeout):
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
            job = self._next(0)
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
