"""The GPU queue's take (agent/serving/job_queue.py) sleeps until there is work or its lane must look up: a job
put, a job handed back after a device failure, or a wake (the flow stops or is held). Nothing polls, so a take
with nothing to do never comes back empty on its own; nothing put is lost. Real jobs of real requests."""

from __future__ import annotations

import threading

import numpy as np

from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.plugin_chains import PluginChains
from vkocr.agent.ocr.request import OcrRequest
from vkocr.agent.serving.errors import CancelledDropped
from vkocr.agent.serving.job_queue import JobQueue
from vkocr.agent.serving.jobs import Job

WAIT_S = 60.0  # generous: the machine may be loaded; a correct take answers at once
ASLEEP_S = 0.5  # how long a take with nothing to do is watched: a polling take would come back meanwhile


def job(name: str) -> Job:
    opts = OcrOptions()
    image = np.random.default_rng(len(name)).integers(0, 256, (40, 120, 3), np.uint8)
    return Job(name, OcrRequest.of(image, opts, PluginChains().chain_for(opts)))


def taking(queue: JobQueue, until: threading.Event) -> tuple[threading.Thread, list[Job | None]]:
    """A lane's take on its own thread; what it took lands in the list."""
    got: list[Job | None] = []
    thread = threading.Thread(target=lambda: got.append(queue.take(until.is_set)), daemon=True)
    thread.start()
    return thread, got


def asleep(thread: threading.Thread) -> bool:
    thread.join(ASLEEP_S)
    return thread.is_alive()


def test_an_idle_take_sleeps_until_a_job_is_put_and_takes_it_running() -> None:
    queue = JobQueue(4)
    thread, got = taking(queue, threading.Event())
    assert asleep(thread) and got == []  # no timeout of its own: it did not come back empty
    first = job("first")
    queue.put(first)
    thread.join(WAIT_S)
    assert got == [first] and first.future.running() and first.attempts == 1


def test_a_wake_makes_an_idle_take_give_up_and_loses_nothing() -> None:
    queue = JobQueue(4)
    look_up = threading.Event()  # the flow's "stopping or held"
    thread, got = taking(queue, look_up)
    assert asleep(thread)
    look_up.set()
    queue.wake()
    thread.join(WAIT_S)
    assert not thread.is_alive() and got == [None]
    later = job("later")
    queue.put(later)  # put while no lane takes: it waits for the next take
    assert queue.depth() == 1
    assert queue.take(threading.Event().is_set) is later and queue.depth() == 0


def test_a_job_handed_back_wakes_an_idle_take_and_goes_before_the_queue() -> None:
    queue = JobQueue(4)
    first, queued = job("first"), job("queued")
    queue.put(first)
    assert queue.take(threading.Event().is_set) is first
    thread, got = taking(queue, threading.Event())
    assert asleep(thread)
    queue.retry([first], rebuilt=True, error=RuntimeError("device lost"))
    thread.join(WAIT_S)
    assert got == [first] and first.attempts == 2
    queue.put(queued)
    assert queue.take(threading.Event().is_set) is queued


def test_a_cancelled_job_is_dropped_on_the_way_and_the_next_one_taken() -> None:
    dropped: list[str] = []
    queue = JobQueue(4, dropped=dropped.append)
    gone, wanted = job("gone"), job("wanted")
    gone.cancel("client")
    queue.put(gone)
    queue.put(wanted)
    assert queue.take(threading.Event().is_set) is wanted
    assert dropped == ["cancelled"] and isinstance(gone.future.exception(0), CancelledDropped)
