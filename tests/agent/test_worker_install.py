"""GpuWorker.install: a pipeline handed to the worker through a future, and the waits that replaced polling
(stop's grace period). Real pipelines on the test device, real requests; nothing here depends on timing."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.agent.agents import lot_number, rec_job
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.serving.state import ServingState, StateBoard
from vkocr.agent.serving.worker import GpuWorker


def never_opened() -> OcrPipeline:
    raise AssertionError("the worker opened a pipeline of its own instead of serving the installed one")


@pytest.fixture
def worker_with(first: OcrPipeline) -> Iterator[GpuWorker]:
    """A worker started by installing `first` (its factory is never used)."""
    worker = GpuWorker(never_opened, StateBoard(), model_version="")
    assert not worker.started
    done = worker.install(first, "v1")
    assert worker.started
    assert done.result(120) is first
    yield worker
    worker.stop(60)


def test_install_starts_the_worker_with_the_pipeline(worker_with: GpuWorker, first: OcrPipeline) -> None:
    worker = worker_with
    assert worker.pipeline is first and worker.model_version == "v1" and worker.loaded.is_set()
    snapshot = worker.state.get()
    assert (snapshot.state, snapshot.model_version) == (ServingState.SERVING, "v1")
    assert worker.submit(rec_job(first, 1)).result(120).lines[0].text == lot_number(1)
    with pytest.raises(RuntimeError, match="already started"):
        worker.start()


def test_install_swaps_and_closes_the_old_pipeline(worker_with: GpuWorker, first: OcrPipeline) -> None:
    worker = worker_with
    second = OcrPipeline.open("llvmpipe")
    done = worker.install(second, "v2")
    assert done.result(120) is second
    assert worker.pipeline is second and worker.model_version == "v2"
    assert worker.state.get().model_version == "v2"
    assert first.device is None  # closed by the worker after the swap
    assert worker.submit(rec_job(second, 2)).result(120).lines[0].text == lot_number(2)


def test_an_abandoned_install_is_closed_and_never_served(worker_with: GpuWorker, first: OcrPipeline) -> None:
    worker = worker_with
    second = OcrPipeline.open("llvmpipe")
    with worker.held():
        job = worker.submit(rec_job(first, 3))
        assert worker.queue_depth() == 1  # held: no lane takes it, and the install cannot begin
        done = worker.install(second, "v2")
        assert not done.done()
        assert done.cancel()
    assert job.result(120).lines[0].text == lot_number(3)
    # The next job runs after the abandoned message was met: by then the worker closed `second`.
    assert worker.submit(rec_job(first, 4)).result(120).lines[0].text == lot_number(4)
    assert second.device is None
    assert worker.pipeline is first and worker.model_version == "v1"
    assert first.device is not None


def test_stop_lets_a_queued_job_finish_within_its_grace(first: OcrPipeline) -> None:
    worker = GpuWorker(never_opened, StateBoard(), model_version="")
    worker.install(first, "v1").result(120)
    stopped = threading.Event()

    def stop() -> None:
        worker.stop(600)
        stopped.set()

    with worker.held():
        job = worker.submit(rec_job(first, 5))
        stopper = threading.Thread(target=stop)
        stopper.start()
        assert not stopped.wait(0.2)  # holding the worker holds the stop too (either way, nothing is timed)
    stopper.join(300)
    assert stopped.is_set()
    assert job.result(0).lines[0].text == lot_number(5)  # answered, not failed as NotServing
    assert worker.pipeline is None and first.device is None
