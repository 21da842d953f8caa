"""Warm start: the agent records the plans of `[plans] warm_shapes` before it reports SERVING, and shows its
plans per model in the status stream and the metrics.

The first part runs the warm-up, the ledger and the worker on stand-in stages (no device: every order and
failure is exact); the second a real agent on the test device with one small size, 320x240 (lavapipe is
slow): SERVING comes after the plans, and the first request of that size records no det plan.
"""

from __future__ import annotations

import io
import math
import os
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from tests.agent.agents import FONT, agent_config, word_pixels
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.ocr.plan_shapes import warm_plan_shapes
from vkocr.agent.ocr.request import OcrRequest
from vkocr.agent.ocr.request_halves import Detected, Laps, StopCheck
from vkocr.agent.ocr.stages import NoPlanStages
from vkocr.agent.serving.background import start_agent
from vkocr.agent.serving.client import OcrClient
from vkocr.agent.serving.config_throughput import ThroughputConfig
from vkocr.agent.serving.jobs import Job
from vkocr.agent.serving.metrics import Metrics
from vkocr.agent.serving.plans import ModelPlans, PlanLedger, PlanStats, largest_first, warm_pipeline
from vkocr.agent.serving.proto_enums import enum_name
from vkocr.agent.serving.server import Agent
from vkocr.agent.serving.state import ServingState, StateBoard, StateSnapshot
from vkocr.agent.serving.worker import GpuWorker
from vkocr.engine.errors import DeviceLost, OutOfMemory, VulkanError
from vkocr.postproc.registry import build_chain
from vkocr.v1 import status_pb2

SIZES = [(320, 240), (1280, 720)]
DETECT_LANES = ThroughputConfig().detect_lanes  # each records its own det plans


class StandInStages(NoPlanStages):
    """Stages that record nothing on a device: `prepare` notes the shape (or fails for those in `fail`)."""

    backend = "stand-in"
    max_batch = 8
    warms = True

    def __init__(self, fail: dict[tuple[str, tuple[int, ...]], Exception] | None = None) -> None:
        self.fail = fail or {}
        self.prepared: list[tuple[str, tuple[int, ...]]] = []
        self.shapes: dict[str, set[tuple[int, ...]]] = {"det": set(), "cls": set(), "rec": set()}
        self.recordings: Counter[str] = Counter()

    def prepare(self, role: str, shape: tuple[int, ...]) -> None:
        if (role, shape) in self.fail:
            raise self.fail[(role, shape)]
        self.prepared.append((role, shape))
        self.record(role, shape)

    def record(self, role: str, shape: tuple[int, ...]) -> None:
        if shape not in self.shapes[role]:
            self.shapes[role].add(shape)
            self.recordings[role] += 1

    def plan_stats(self) -> dict[str, dict[str, Any]]:
        return {role: {"plans": len(shapes), "recordings": self.recordings[role], "distinct_shapes": len(shapes),
                       "plan_memory_bytes": 1000 * len(shapes), "build_ms": []}
                for role, shapes in self.shapes.items()}

    def recordings_total(self) -> int:
        return sum(self.recordings.values())

    def close(self) -> None:
        pass


class CpuLikeStages(NoPlanStages):
    """What the NumPy backend offers: nothing to warm, no plans."""

    backend = "cpu (numpy)"
    max_batch = 8

    def close(self) -> None:
        pass


class StandInPipeline(OcrPipeline):
    """A pipeline on stand-in stages whose requests record one det plan (1, 3, 32, 32), or fail once."""

    def __init__(self, stages: Any, fail_first: Exception | None = None) -> None:
        super().__init__(stages, ["a"], OcrOptions())
        self.fail_first = fail_first

    def detect(self, request: OcrRequest, *, stop: StopCheck | None = None, lane: Any = None,
               slot: int = 0) -> Detected:
        if self.fail_first is not None:
            error, self.fail_first = self.fail_first, None
            raise error
        self.stages.record("det", (1, 3, 32, 32))
        return Detected(request, [], [], Laps(lambda: 0.0, stop))


def stand_in(stages: Any = None) -> OcrPipeline:
    return StandInPipeline(stages or StandInStages())


# --- the warm-up ------------------------------------------------------------------------------------------


def test_the_warm_up_prepares_every_shape_largest_first_and_logs_it() -> None:
    pipeline = stand_in()
    expected = warm_plan_shapes(SIZES, pipeline.options, StandInStages.max_batch)
    with capture_logs() as logs:
        report = warm_pipeline(pipeline, SIZES)
    stages = pipeline.stages
    assert isinstance(stages, StandInStages)
    assert sorted(stages.prepared) == sorted(expected) and len(stages.prepared) == len(expected)
    for role in ("det", "cls", "rec"):  # model by model, each one's largest input first
        sizes = [math.prod(shape) for r, shape in stages.prepared if r == role]
        assert sizes and sizes == sorted(sizes, reverse=True), role
    assert [r for r, _ in stages.prepared] == sorted((r for r, _ in stages.prepared), key=["det", "cls", "rec"].index)
    assert (report.shapes, report.prepared, report.recorded, report.skipped) == (len(expected),) * 3 + (0,)
    (event,) = [e for e in logs if e["event"] == "plans_warmed"]
    assert event["count"] == len(expected) and event["recorded"] == len(expected) and event["ms"] >= 0
    assert event["plans"] == {role: len(shapes) for role, shapes in stages.shapes.items()}


def test_largest_first_keeps_each_models_shapes_together() -> None:
    shapes = [("det", (1, 3, 8, 8)), ("cls", (1, 3, 4, 4)), ("det", (1, 3, 16, 8)), ("cls", (4, 3, 4, 4))]
    assert largest_first(shapes) == [("det", (1, 3, 16, 8)), ("det", (1, 3, 8, 8)), ("cls", (4, 3, 4, 4)),
                                     ("cls", (1, 3, 4, 4))]


def test_a_shape_that_fails_is_logged_and_skipped() -> None:
    shapes = largest_first(warm_plan_shapes(SIZES, OcrOptions(), StandInStages.max_batch))
    bad = shapes[0]
    pipeline = stand_in(StandInStages({bad: OutOfMemory("vkAllocateMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY")}))
    with capture_logs() as logs:
        report = warm_pipeline(pipeline, SIZES)
    (warning,) = [e for e in logs if e["event"] == "plan_warm_failed"]
    assert warning["log_level"] == "warning" and warning["model"] == bad[0] and warning["shape"] == list(bad[1])
    assert "VK_ERROR_OUT_OF_DEVICE_MEMORY" in warning["error"]
    assert (report.prepared, report.skipped) == (len(shapes) - 1, 1)
    assert [e["count"] for e in logs if e["event"] == "plans_warmed"] == [len(shapes) - 1]


def test_a_lost_device_ends_the_warm_up() -> None:
    shapes = largest_first(warm_plan_shapes(SIZES, OcrOptions(), StandInStages.max_batch))
    pipeline = stand_in(StandInStages({shapes[2]: DeviceLost("vkQueueSubmit", "VK_ERROR_DEVICE_LOST")}))
    with capture_logs() as logs:
        report = warm_pipeline(pipeline, SIZES)
    assert (report.prepared, report.skipped) == (2, len(shapes) - 2)
    assert [e["skipped"] for e in logs if e["event"] == "plan_warm_stopped"] == [len(shapes) - 2]


def test_nothing_to_warm_on_the_cpu_backend_or_without_sizes() -> None:
    with capture_logs() as logs:
        assert warm_pipeline(OcrPipeline(CpuLikeStages(), ["a"]), SIZES).shapes == 0  # type: ignore[arg-type]
        assert warm_pipeline(stand_in(), []).shapes == 0
    assert logs == []
    assert PlanLedger().publish(OcrPipeline(CpuLikeStages(), ["a"])) == PlanStats()  # type: ignore[arg-type]


# --- statistics ---------------------------------------------------------------------------------------------


def test_the_ledger_counts_recordings_over_every_pipeline_served() -> None:
    ledger = PlanLedger()
    assert [(m.model, m.plans, m.recorded_total) for m in ledger.snapshot.models] == [
        ("det", 0, 0), ("cls", 0, 0), ("rec", 0, 0)]
    first = stand_in()
    warm_pipeline(first, [(320, 240)])
    warmed = ledger.publish(first)
    assert warmed["det"].plans == 1 and warmed["det"].plan_memory_bytes == 1000 and warmed["cls"].plans == 4
    first.run(job(0).request)  # a new det shape
    assert ledger.publish(first)["det"].recorded_total == 2
    second = stand_in()  # a rebuild or an activation: counts of its own from zero
    warm_pipeline(second, [(320, 240)])
    after = ledger.publish(second)
    assert (after["det"].plans, after["det"].recorded_total, after["det"].distinct_shapes) == (1, 3, 1)
    assert after["cls"].recorded_total == 8
    assert ledger.publish(None)["det"] == ModelPlans("det", recorded_total=3)  # none serving: the totals stay


def test_metrics_export_the_published_plans() -> None:
    ledger = PlanLedger()
    metrics = Metrics()
    metrics.watch_plans(lambda: ledger.snapshot)
    pipeline = stand_in()
    warm_pipeline(pipeline, SIZES)
    ledger.publish(pipeline)
    samples = scrape_text(metrics.render().decode())
    assert samples[("vkocr_plans", "det")] == 2 and samples[("vkocr_plan_memory_bytes", "det")] == 2000
    assert samples[("vkocr_plans_recorded_total", "cls")] == 4
    assert {model for name, model in samples if name == "vkocr_plans"} == {"det", "cls", "rec"}


def scrape_text(text: str) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels["model"]): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if "model" in s.labels}


# --- the worker ---------------------------------------------------------------------------------------------


def worker_on(factory: Any, sizes: Sequence[tuple[int, int]]) -> tuple[GpuWorker, list[PlanStats]]:
    """A started worker, and the plan statistics it had published when it first announced SERVING."""
    state = StateBoard()
    worker = GpuWorker(factory, state, model_version="v", warm_sizes=sizes)
    at_serving: list[PlanStats] = []

    def on_change(snapshot: StateSnapshot) -> None:
        if snapshot.state is ServingState.SERVING and not at_serving:
            at_serving.append(worker.plan_stats)

    state.subscribe(on_change)
    worker.start()
    assert worker.loaded.wait(30)
    return worker, at_serving


def job(i: int) -> Job:
    options = OcrOptions()
    return Job(f"job-{i}", OcrRequest.of(np.zeros((8, 8, 3), np.uint8), options, build_chain(options.plugins, {})))


def test_the_worker_serves_only_after_the_warm_up() -> None:
    worker, at_serving = worker_on(stand_in, SIZES)
    try:
        (stats,) = at_serving
        assert stats["det"].plans == 2 and stats["cls"].plans == 4 and stats["rec"].plans > 0
        assert worker.submit(job(1)).result(30).lines == []
        assert worker.plan_stats["det"].recorded_total == 3  # published before the answer left
    finally:
        worker.stop(5)


def test_a_failing_warm_up_is_not_fatal() -> None:
    def broken() -> OcrPipeline:
        stages = StandInStages()
        stages.max_batch = None  # type: ignore[assignment]  # the shapes cannot be computed: TypeError
        return StandInPipeline(stages)

    with capture_logs() as logs:
        worker, at_serving = worker_on(broken, SIZES)
    try:
        assert worker.state.serving and at_serving and at_serving[0]["det"].plans == 0
        assert any(e["event"] == "plans_not_warmed" and e["log_level"] == "warning" for e in logs)
    finally:
        worker.stop(5)


def test_a_rebuilt_pipeline_is_warmed_before_it_serves_again() -> None:
    opened: list[OcrPipeline] = []

    def factory() -> OcrPipeline:
        pipeline = StandInPipeline(StandInStages(), VulkanError("vkQueueSubmit", "VK_ERROR_DEVICE_LOST")
                                   if not opened else None)
        opened.append(pipeline)
        return pipeline

    worker, _ = worker_on(factory, [(320, 240)])
    try:
        assert worker.submit(job(1)).result(30).lines == []  # failed, rebuilt, retried on the new pipeline
        assert len(opened) == 2 and worker.state.get().device_rebuilds == 1
        second = opened[1].stages
        assert isinstance(second, StandInStages) and second.prepared  # warmed
        stats = worker.plan_stats
        assert stats["det"].plans == 2 and stats["det"].recorded_total == 3  # 1 + (1 warmed + 1 the request)
    finally:
        worker.stop(5)


# --- a real agent -------------------------------------------------------------------------------------------


@dataclass
class Warmed:
    agent: Agent
    target: str
    at_serving: PlanStats  # published when the state first turned SERVING
    requests_at_serving: int
    status: status_pb2.AgentStatus  # Get, before any request
    metrics: dict[tuple[str, str], float]  # scraped before any request
    warm_events: list[dict[str, Any]]  # plans_warmed, logged while it started


@pytest.fixture(scope="module")
def warmed() -> Iterator[Warmed]:
    if not os.path.exists(FONT):
        pytest.skip("fonts-dejavu-core (installed by ./test.sh) renders the test images")
    seen: list[tuple[PlanStats, int]] = []
    lock = threading.Lock()

    def watch(agent: Agent) -> None:
        def on_change(snapshot: StateSnapshot) -> None:
            with lock:
                if snapshot.state is ServingState.SERVING and not seen:
                    seen.append((agent.worker.plan_stats, agent.stats.snapshot().requests_total))

        agent.state.subscribe(on_change)

    # det at a short side of 320 rather than 736 (a quarter of the work on lavapipe): the warm-up plans with the
    # deployment's [ocr] options, as the requests do
    config = agent_config(**{"plans.warm_shapes": ["320x240"], "metrics.listen": "127.0.0.1:0",
                             "ocr.limit_side_len": 320})
    with capture_logs() as logs:
        background = start_agent(config, before_start=watch)
    try:
        with OcrClient(background.target, timeout=30) as client:
            status = client.status()
        port = background.agent.metrics_server.port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            metrics = scrape_text(response.read().decode())
        (at_serving, requests), = seen
        warm_events = [e for e in logs if e["event"] == "plans_warmed"]
        yield Warmed(background.agent, background.target, at_serving, requests, status, metrics, warm_events)
    finally:
        background.stop(5)


def page_320x240() -> bytes:
    page = Image.new("RGB", (320, 240), "white")
    page.paste(Image.fromarray(word_pixels("LOT4821", 30)), (40, 90))
    out = io.BytesIO()
    page.save(out, format="PNG")
    return out.getvalue()


def test_the_agent_serves_after_its_plans_are_recorded(warmed: Warmed) -> None:
    assert warmed.requests_at_serving == 0
    stats = warmed.at_serving
    # 320x240: one det shape, recorded on each detection lane
    assert stats["det"].plans == stats["det"].recorded_total == DETECT_LANES
    assert stats["cls"].plans > 0 and stats["rec"].plans > 0
    assert stats["det"].plan_memory_bytes > 0
    (event,) = warmed.warm_events
    assert event["recorded"] > 0 and event["skipped"] == 0 and event["plans"]["det"] == DETECT_LANES


def test_the_status_shows_the_plans_before_any_request(warmed: Warmed) -> None:
    status = warmed.status
    assert status.state == status_pb2.SERVING_STATE_SERVING and status.requests_total == 0
    plans = {enum_name(status_pb2.ModelKind, m.model): m for m in status.plans}
    assert list(plans)[:3] == ["det", "cls", "rec"]  # then ori, the page orientation model, where the set has it
    assert plans["det"].plans == plans["det"].recorded_total == DETECT_LANES and plans["det"].distinct_shapes == 1
    assert plans["det"].plan_memory_bytes == warmed.at_serving["det"].plan_memory_bytes > 0
    assert plans["cls"].plans == warmed.at_serving["cls"].plans > 0


def test_metrics_show_the_plans_per_model(warmed: Warmed) -> None:
    samples = warmed.metrics
    for model in ("det", "cls", "rec"):
        assert samples[("vkocr_plans", model)] == warmed.at_serving[model].plans > 0
        assert samples[("vkocr_plan_memory_bytes", model)] == warmed.at_serving[model].plan_memory_bytes > 0
        assert samples[("vkocr_plans_recorded_total", model)] == warmed.at_serving[model].recorded_total


def test_the_first_request_of_a_warmed_size_records_no_det_or_cls_plan(warmed: Warmed) -> None:
    with OcrClient(warmed.target, timeout=300) as client:
        before = {enum_name(status_pb2.ModelKind, m.model): m.recorded_total for m in client.status().plans}
        response = client.recognize(page_320x240(), request_id="first")
        after = {enum_name(status_pb2.ModelKind, m.model): m.recorded_total for m in client.status().plans}
    assert [line.text for line in response.lines] == ["LOT4821"]
    assert before["det"] == after["det"] == DETECT_LANES
    assert before["cls"] == after["cls"]  # one crop: batch 1, warmed too
