"""The bounded queue in front of the GPU worker (DESIGN.md, "One request, end to end", step 2): jobs wait here
for a detection lane; a failed device's jobs, handed in again, go first. It counts the jobs not yet settled
(queued, or on their device stages), so that a stopping worker can wait for none, and it tells its listeners
whenever a job leaves (a stream waiting for room may try again)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from vkocr.agent.serving.errors import DeviceFailed, NotServing, QueueFull
from vkocr.agent.serving.jobs import Job, settle
from vkocr.log import get_logger

log = get_logger(__name__)


class JobQueue:
    def __init__(self, size: int) -> None:
        self._jobs: queue.Queue[Job] = queue.Queue(size)
        self._handed_back: queue.SimpleQueue[Job] = queue.SimpleQueue()  # a failed device's, served first
        self._settled = threading.Condition()  # notified when a job leaves the queue or its device stages
        self._unsettled = 0  # jobs queued or on their device stages
        self._room_listeners: tuple[Callable[[], None], ...] = ()

    @property
    def capacity(self) -> int:
        return self._jobs.maxsize

    def depth(self) -> int:
        return self._jobs.qsize()

    def put(self, job: Job, *, block: bool = False, timeout: float | None = None) -> None:
        """Queue a job; QueueFull when the queue is full (after `timeout` when blocking)."""
        self.settle(+1)
        try:
            self._jobs.put(job, block=block, timeout=timeout)
        except queue.Full:
            self.settle(-1)
            raise QueueFull(f"queue full ({self._jobs.maxsize} requests waiting for the GPU)") from None

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
        try:
            job = self._jobs.get(timeout=timeout)
        except queue.Empty:
            return None
        self.notify_room()
        return job

    def fail_all(self, why: str) -> None:
        """Fail every queued job with NotServing(why), never silently dropped."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
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
