"""The flow through the GPU (agent/serving/flow.py): detection lanes, the batcher, reading lanes, each lane on its
own stream of the test device. Real pipelines on lavapipe (named), real requests, every answer's text checked.
Nothing here depends on timing: a request held inside its stages proves that others move meanwhile, or the
test waits until it fails."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from tests.agent.agents import lot_number, rec_job, wait_for, word_pixels
from vkocr.agent.errors import StopWho
from vkocr.agent.ocr.lanes import LaneResources
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.serving.config import load_config
from vkocr.agent.serving.config_throughput import MAX_LANES, ThroughputConfig
from vkocr.agent.serving.errors import ConfigError
from vkocr.agent.serving.flow import Batcher, Waiting
from vkocr.agent.serving.jobs import Job
from vkocr.agent.serving.state import ServingState, StateBoard
from vkocr.agent.serving.worker import GpuWorker
from vkocr.postproc.result import OcrResult

WAIT_S = 120
LANES = LaneResources(streams=3, image_slots=10, queues=3)  # lavapipe has one queue: its streams share it


def open_lavapipe() -> OcrPipeline:
    return OcrPipeline.open("llvmpipe", lanes=LANES)


@dataclass
class HeldJob(Job):
    """A job that stops at its first stage boundary on a lane whose thread name starts with `where` (a detection
    or a reading lane) until `release` is set."""

    where: str = "vkocr-detect"
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def stop_reason(self) -> StopWho | None:
        if self.future.running() and threading.current_thread().name.startswith(self.where):
            self.entered.set()
            assert self.release.wait(WAIT_S)
        return super().stop_reason()


def submit_held(worker: GpuWorker, i: int, where: str) -> tuple[OcrPipeline, HeldJob, Future[OcrResult]]:
    """The worker's pipeline, and a HeldJob reading lot_number(i), submitted and held by a lane of `where`."""
    pipeline = worker.pipeline
    assert pipeline is not None
    held = rec_job(pipeline, i, HeldJob)
    assert isinstance(held, HeldJob)
    held.where = where
    answer = worker.submit(held)
    assert held.entered.wait(WAIT_S)
    return pipeline, held, answer


def serving(settings: ThroughputConfig, overlap: bool = True) -> GpuWorker:
    worker = GpuWorker(open_lavapipe, StateBoard(), model_version="v1", flow=settings, overlap=overlap)
    worker.start()
    assert worker.loaded.wait(WAIT_S) and worker.state.serving
    return worker


@pytest.fixture
def lanes() -> Iterator[GpuWorker]:
    """Two detection lanes and one reading lane; a read takes every ready request (up to 8) without waiting."""
    worker = serving(ThroughputConfig(detect_lanes=2, read_lanes=1, batch_requests=8, batch_wait_ms=0.0))
    yield worker
    worker.stop(60)


@pytest.mark.parametrize(("key", "bad"), [("throughput.detect_lanes", 0), ("throughput.read_lanes", MAX_LANES + 1),
                                          ("throughput.batch_requests", 0), ("throughput.batch_wait_ms", -1.0),
                                          ("throughput.batch_lines", 65), ("throughput.joint_batches", 0),
                                          ("throughput.joint_batches", 9), ("throughput.image_slots", -1),
                                          ("experimental.gpu_queues", 0)])
def test_a_lane_or_batch_setting_outside_its_range_is_refused(key: str, bad: float) -> None:
    section, _, name = key.partition(".")
    with pytest.raises(ConfigError, match=rf"\[{section}\]: {name} must be .* to .*, got {bad}"):
        load_config(None, env={}, overrides={key: bad})


def test_the_pipeline_gets_a_stream_per_lane_and_slots_for_the_batches() -> None:
    config = load_config(None, env={}, overrides={"throughput.detect_lanes": 3, "throughput.read_lanes": 2,
                                                  "throughput.batch_requests": 4})
    assert config.lane_resources() == LaneResources(streams=5, image_slots=3 + 2 * 4 + 2, queues=1)
    serial = load_config(None, env={}, overrides={"experimental.overlap": False, "throughput.image_slots": 7,
                                                  "experimental.gpu_queues": 4})
    assert serial.lane_resources() == LaneResources(streams=1, image_slots=7, queues=1)


def asleep_in_the_queue(thread: threading.Thread) -> bool:
    """Whether `thread` waits in the GPU queue's take with no timeout: asleep until woken, not polling."""
    frames, frame = [], sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    in_take = any(f.f_code.co_name == "take" and f.f_code.co_filename.endswith("job_queue.py") for f in frames)
    return in_take and any(f.f_code.co_name == "wait" and f.f_locals.get("timeout", 0) is None for f in frames)


def test_an_idle_lane_sleeps_in_the_queue_until_a_hold_or_a_stop_wakes_it() -> None:
    worker = serving(ThroughputConfig(detect_lanes=2, read_lanes=1))
    try:
        assert worker.pipeline is not None
        lanes = [t for t in threading.enumerate() if t.name.startswith("vkocr-detect")]
        wait_for(lambda: sum(asleep_in_the_queue(t) for t in lanes) == 1, WAIT_S)  # the other waits its turn
        clock = time.monotonic()
        with worker.held():  # the sleeping lane woke and looked up
            assert time.monotonic() - clock < 10.0
            queued = worker.submit(rec_job(worker.pipeline, 60))
            assert worker.queue_depth() == 1  # nothing taken inside the hold, nothing lost
        assert queued.result(WAIT_S).lines[0].text == lot_number(60)
        wait_for(lambda: sum(asleep_in_the_queue(t) for t in lanes) == 1, WAIT_S)
    finally:
        clock = time.monotonic()
        worker.stop(60)
    assert time.monotonic() - clock < 30.0 and not any(t.is_alive() for t in lanes)


def ready(job: Job, since: float = 0.0) -> Waiting:
    return Waiting(job, None, 0, since)  # type: ignore[arg-type]  # the batcher never looks inside


def test_a_lone_ready_request_is_taken_at_once_whatever_the_wait() -> None:
    batcher = Batcher()
    batcher.detection_began()
    batcher.detection_ended(ready(Job("a", None, None, None)))  # type: ignore[arg-type]
    # nothing else is in detection: nothing could join, so an hour's wait is not waited
    assert [w.job.request_id for w in batcher.take(8, wait_s=3600.0, timeout=WAIT_S)] == ["a"]


def test_a_read_takes_what_is_ready_oldest_first_and_no_more_than_its_limit() -> None:
    batcher = Batcher()
    for name in "abcde":
        batcher.detection_began()
        batcher.detection_ended(ready(Job(name, None, None, None)))  # type: ignore[arg-type]
    assert [w.job.request_id for w in batcher.take(3, wait_s=3600.0, timeout=WAIT_S)] == ["a", "b", "c"]
    assert [w.job.request_id for w in batcher.take(3, wait_s=3600.0, timeout=WAIT_S)] == ["d", "e"]
    assert batcher.take(3, wait_s=0.0, timeout=0.0) == []


def test_a_read_waits_for_a_request_in_detection_and_takes_it_with_the_first() -> None:
    batcher = Batcher()
    for _ in range(2):
        batcher.detection_began()
    batcher.detection_ended(ready(Job("first", None, None, None), since=time.monotonic()))  # type: ignore[arg-type]
    taken: list[list[str]] = []
    reader = threading.Thread(target=lambda: taken.append(
        [w.job.request_id for w in batcher.take(8, wait_s=3600.0, timeout=WAIT_S)]))
    reader.start()
    batcher.detection_ended(ready(Job("second", None, None, None)))  # type: ignore[arg-type]
    reader.join(WAIT_S)
    assert taken == [["first", "second"]]  # the wait ended when nothing more was in detection


def test_a_lone_request_is_answered_though_the_wait_is_an_hour() -> None:
    worker = serving(ThroughputConfig(detect_lanes=2, read_lanes=1, batch_requests=8, batch_wait_ms=3600e3))
    try:
        assert worker.pipeline is not None
        result = worker.submit(rec_job(worker.pipeline, 1)).result(WAIT_S)
        assert result.lines[0].text == lot_number(1) and "batch_wait" in result.timings_ms
    finally:
        worker.stop(60)


def test_ready_requests_are_read_together_and_each_gets_its_own_lines(lanes: GpuWorker) -> None:
    worker = lanes
    pipeline, held, first = submit_held(worker, 100, "vkocr-read")  # held after its recognition
    try:
        others = {i: worker.submit(rec_job(pipeline, i)) for i in range(101, 107)}
        wait_for(lambda: worker.waiting_to_read() == 6, WAIT_S)  # both detection lanes fed the batcher
    finally:
        held.release.set()
    assert first.result(WAIT_S).lines[0].text == lot_number(100)
    assert {i: [line.text for line in f.result(WAIT_S).lines] for i, f in others.items()} == {
        i: [lot_number(i)] for i in others}
    assert worker.read_batches() == (2, 7, 7)  # one read of the held request, then one of all six


def words_job(pipeline: OcrPipeline, i: int, words: int) -> Job:
    """Recognition only of `words` lot numbers in one line: a line as many times wider."""
    text = "-".join(lot_number(i + k) for k in range(words))
    options = pipeline.options.replace(use_det=False, use_cls=False)
    return Job(f"words-{i}-{words}", pipeline.request(word_pixels(text), options, decoded=True))


@pytest.fixture
def joint_lanes() -> Iterator[GpuWorker]:
    """`lanes`, with four recogniser batches in one submission (joint runs; 1 by default)."""
    worker = serving(ThroughputConfig(detect_lanes=2, read_lanes=1, batch_requests=8, batch_wait_ms=0.0,
                                      joint_batches=4))
    yield worker
    worker.stop(60)


def test_lines_of_several_widths_read_together_answer_as_each_read_alone(joint_lanes: GpuWorker) -> None:
    """One read of six requests whose lines have five widths: their batches share submissions (joint runs,
    throughput.joint_batches = 4, so two rounds), and every line reads exactly as it does in a read of its own."""
    worker = joint_lanes
    pipeline = worker.pipeline
    assert pipeline is not None and pipeline.stages.joint_batches == 4
    sizes = [(200, 1), (210, 2), (220, 3), (230, 4), (240, 5), (250, 2)]
    alone = {i: worker.submit(words_job(pipeline, i, n)).result(WAIT_S) for i, n in sizes}  # one read each
    reads = worker.read_batches()
    _, held, first = submit_held(worker, 100, "vkocr-read")
    try:
        others = {i: worker.submit(words_job(pipeline, i, n)) for i, n in sizes}
        wait_for(lambda: worker.waiting_to_read() == len(sizes), WAIT_S)
    finally:
        held.release.set()
    assert first.result(WAIT_S).lines[0].text == lot_number(100)
    for i, answer in others.items():
        got, own = answer.result(WAIT_S).lines, alone[i].lines
        assert [(line.text, line.score) for line in got] == [(line.text, line.score) for line in own], i
    assert worker.read_batches()[0] == reads[0] + 2  # the held request's read, then one of all six


def test_a_request_is_detected_on_one_lane_while_another_is_held_in_its_detection(lanes: GpuWorker) -> None:
    worker = lanes
    pipeline, held, answer = submit_held(worker, 1, "vkocr-detect")  # one detection lane holds it
    try:
        others = [worker.submit(rec_job(pipeline, i)) for i in range(2, 6)]
        assert [f.result(WAIT_S).lines[0].text for f in others] == [lot_number(i) for i in range(2, 6)]
        assert not answer.done()
    finally:
        held.release.set()
    assert answer.result(WAIT_S).lines[0].text == lot_number(1)


def test_answers_stay_with_their_requests_when_many_arrive_at_once(lanes: GpuWorker) -> None:
    worker = lanes
    pipeline = worker.pipeline
    assert pipeline is not None
    with ThreadPoolExecutor(8) as clients:  # more than the lanes hold, from several threads at once
        futures: dict[int, Future[OcrResult]] = dict(zip(range(7, 31), clients.map(
            lambda i: worker.submit(rec_job(pipeline, i), block=True, timeout=WAIT_S), range(7, 31))))
    texts = {i: [line.text for line in f.result(WAIT_S).lines] for i, f in futures.items()}
    assert texts == {i: [lot_number(i)] for i in futures}


def test_a_swap_drains_the_lanes_then_serves_the_new_pipeline_on_new_ones(lanes: GpuWorker) -> None:
    worker = lanes
    old = worker.pipeline
    assert old is not None
    second = open_lavapipe()
    assert worker.install(second, "v2").result(WAIT_S) is second
    assert old.device is None  # closed once its lanes ended: nothing of v1 serves after the swap
    jobs = [rec_job(second, i) for i in range(40, 44)]
    results = [worker.submit(job).result(WAIT_S) for job in jobs]
    assert [r.lines[0].text for r in results] == [lot_number(i) for i in range(40, 44)]
    assert {job.model_version for job in jobs} == {"v2"}


def test_a_lost_device_under_a_lane_is_rebuilt_and_the_request_answered(lanes: GpuWorker) -> None:
    worker = lanes
    assert worker.pipeline is not None
    worker.inject_device_loss()  # whichever lane submits next fails
    assert worker.submit(rec_job(worker.pipeline, 50)).result(WAIT_S).lines[0].text == lot_number(50)
    snapshot = worker.state.get()
    assert snapshot.state is ServingState.SERVING and snapshot.device_rebuilds == 1
    assert worker.submit(rec_job(worker.pipeline, 51)).result(WAIT_S).lines[0].text == lot_number(51)


def test_a_held_worker_holds_every_lane(lanes: GpuWorker) -> None:
    worker = lanes
    assert worker.pipeline is not None
    with worker.held():
        future = worker.submit(rec_job(worker.pipeline, 60))
        assert worker.queue_depth() == 1 and not future.done()  # no lane took it
    assert future.result(WAIT_S).lines[0].text == lot_number(60)


def test_with_the_overlap_off_one_lane_runs_each_request_whole() -> None:
    worker = serving(ThroughputConfig(detect_lanes=2, read_lanes=2), overlap=False)
    try:
        assert worker.flow_settings.lanes == (1, 0)
        assert worker.pipeline is not None
        futures = [worker.submit(rec_job(worker.pipeline, i)) for i in range(70, 73)]
        assert [f.result(WAIT_S).lines[0].text for f in futures] == [lot_number(i) for i in range(70, 73)]
        reads, requests, _ = worker.read_batches()
        assert reads == requests == 3  # one request a read
    finally:
        worker.stop(60)
