"""GPU lanes: a second pipeline on the test device beside the worker's own, taking requests from the same queue
(agent/serving/lanes.py). Real pipelines on lavapipe (named), real requests. Nothing here depends on timing: a
request held inside its device stages proves that another runs meanwhile, or the test waits until it fails."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field

import pytest

from tests.agent.agents import lot_number, rec_job, wait_for
from vkocr.agent.errors import StopWho
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.serving.config import MAX_GPU_LANES, ConfigError, load_config
from vkocr.agent.serving.jobs import Job
from vkocr.agent.serving.lanes import lane_count
from vkocr.agent.serving.state import ServingState, StateBoard
from vkocr.agent.serving.worker import GpuWorker
from vkocr.postproc.result import OcrResult

WAIT_S = 120


def open_lavapipe() -> OcrPipeline:
    return OcrPipeline.open("llvmpipe")


@dataclass
class HeldJob(Job):
    """A job that, once on its device stages, stops at its first stage boundary until `release` is set."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def stop_reason(self) -> StopWho | None:
        if self.future.running():  # asked between stages (and once before, when it is not running yet)
            self.entered.set()
            assert self.release.wait(WAIT_S)
        return super().stop_reason()


@pytest.fixture
def two_lanes(first: OcrPipeline) -> Iterator[GpuWorker]:
    """A worker started with `first` and one lane beside it, once the lane serves (its factory opens a pipeline
    only after a device loss)."""
    worker = GpuWorker(open_lavapipe, StateBoard(), model_version="", lanes=2)
    assert worker.install(first, "v1").result(WAIT_S) is first
    wait_for(lambda: worker.lanes_serving == 2, WAIT_S)
    yield worker
    worker.stop(60)


@pytest.mark.parametrize("bad", [0, MAX_GPU_LANES + 1])
def test_a_lane_count_outside_the_range_is_refused(bad: int) -> None:
    assert load_config(None, env={}).server.gpu_lanes == 1
    with pytest.raises(ConfigError, match=rf"\[server\]: gpu_lanes must be 1 to {MAX_GPU_LANES}, got {bad}"):
        load_config(None, env={}, overrides={"server.gpu_lanes": bad})


def test_lanes_on_vulkan_and_one_on_the_cpu_backend(first: OcrPipeline) -> None:
    assert lane_count(1, first) == 1 and lane_count(3, first) == 3
    cpu = OcrPipeline.open("cpu")
    try:
        assert lane_count(4, cpu) == 1  # onnxruntime already uses every core
        assert cpu.sibling() is None
    finally:
        cpu.close()


def test_a_request_runs_on_one_lane_while_another_is_inside_its_stages(two_lanes: GpuWorker,
                                                                        first: OcrPipeline) -> None:
    worker = two_lanes
    held = rec_job(first, 1, HeldJob)
    assert isinstance(held, HeldJob)
    answer = worker.submit(held)
    assert held.entered.wait(WAIT_S)  # one lane holds it in the middle of its stages
    try:
        # With one lane this would wait until `held` were released: it is answered meanwhile.
        others = [worker.submit(rec_job(first, i)) for i in range(2, 6)]
        assert [f.result(WAIT_S).lines[0].text for f in others] == [lot_number(i) for i in range(2, 6)]
        assert not answer.done()
    finally:
        held.release.set()
    assert answer.result(WAIT_S).lines[0].text == lot_number(1)


def test_answers_stay_with_their_requests_across_lanes(two_lanes: GpuWorker, first: OcrPipeline) -> None:
    worker = two_lanes
    futures: dict[int, Future[OcrResult]] = {}
    for i in range(7, 31):  # more than both lanes hold, submitted at once from several threads
        futures[i] = worker.submit(rec_job(first, i))
    texts = {i: [line.text for line in f.result(WAIT_S).lines] for i, f in futures.items()}
    assert texts == {i: [lot_number(i)] for i in futures}


def test_a_swap_stops_the_lanes_first_and_starts_them_from_the_new_pipeline(two_lanes: GpuWorker) -> None:
    worker = two_lanes
    [old_lane] = worker.lanes.pipelines()
    second = OcrPipeline.open("llvmpipe")
    assert worker.install(second, "v2").result(WAIT_S) is second
    assert old_lane.device is None  # closed before the swap completed: nothing of v1 serves after it
    wait_for(lambda: worker.lanes_serving == 2, WAIT_S)
    [new_lane] = worker.lanes.pipelines()
    assert new_lane is not old_lane and new_lane.options == second.options
    jobs = [rec_job(second, i) for i in range(40, 44)]
    results = [worker.submit(job).result(WAIT_S) for job in jobs]
    assert [r.lines[0].text for r in results] == [lot_number(i) for i in range(40, 44)]
    assert {job.model_version for job in jobs} == {"v2"}


def test_a_lost_device_on_any_lane_is_rebuilt_and_the_request_answered(two_lanes: GpuWorker,
                                                                        first: OcrPipeline) -> None:
    worker = two_lanes
    worker.inject_device_loss()  # every lane's device: whichever takes the request fails
    assert worker.submit(rec_job(first, 50)).result(WAIT_S).lines[0].text == lot_number(50)
    snapshot = worker.state.get()
    assert snapshot.state is ServingState.SERVING and snapshot.device_rebuilds == 1
    wait_for(lambda: worker.lanes_serving == 2, WAIT_S)  # the lanes came back beside the rebuilt pipeline
    assert worker.submit(rec_job(worker.pipeline, 51)).result(WAIT_S).lines[0].text == lot_number(51)


def test_a_held_worker_holds_its_lanes_too(two_lanes: GpuWorker, first: OcrPipeline) -> None:
    worker = two_lanes
    with worker.held():
        future = worker.submit(rec_job(first, 60))
        assert worker.queue_depth() == 1 and not future.done()  # no lane took it
    assert future.result(WAIT_S).lines[0].text == lot_number(60)
