"""Plans recorded before the agent serves (warm start), and the plan statistics the status stream and the
metrics show.

A plan is one model recorded for one input shape (DESIGN.md, "Shapes are cheap"); the first request of a shape
records its plan. `warm_pipeline` records the plans that images of the configured sizes (`[plans] warm_shapes`)
need, through the stages' `prepare`, before a pipeline serves: the GPU worker calls it after it opens one (at
start and after a rebuild), the activator before it hands a new version over. The CPU backend records no plans:
there the warm-up runs each model once (OrtStages.prepare); the NumPy reference has nothing to warm.

The pipeline belongs to the GPU worker's thread, so only that thread reads its statistics: `PlanLedger.publish`
takes them after loading and after every request, into an immutable `PlanStats` that the status service and
the Prometheus collector (metrics.PlanCollector) read from any thread without waiting for the GPU.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.ocr.plan_shapes import rec_class_shapes, reserve_shapes, warm_plan_shapes
from vkocr.engine.errors import DeviceLost
from vkocr.log import get_logger

log = get_logger(__name__)

ROLES = ("det", "cls", "rec")  # reported from the first status message on, at zero before models load
PUBLISH_EVERY_S = 0.2  # while requests flow, the statistics are published at least this often


@dataclass(frozen=True)
class ModelPlans:
    """The plans of one model (status.proto ModelPlans)."""

    model: str  # "det", "cls", "rec"
    plans: int = 0  # cached now
    plan_memory_bytes: int = 0  # what those plans hold (device and staging)
    recorded_total: int = 0  # recorded since the agent started, over every pipeline it served
    distinct_shapes: int = 0  # input shapes planned by the pipeline serving now


@dataclass(frozen=True)
class PlanStats:
    """Every model's plans at one instant, as the GPU worker published them."""

    models: tuple[ModelPlans, ...] = tuple(ModelPlans(role) for role in ROLES)

    def __getitem__(self, model: str) -> ModelPlans:
        for entry in self.models:
            if entry.model == model:
                return entry
        return ModelPlans(model)


@dataclass(frozen=True)
class WarmReport:
    """What one warm-up did."""

    shapes: int  # (role, shape) pairs asked for
    prepared: int  # of those, prepared (recorded now, or already cached)
    recorded: int  # plans recorded by this warm-up
    skipped: int  # shapes not prepared: preparing them failed, or the warm-up ended early
    ms: float


def plan_stats_of(pipeline: OcrPipeline | None) -> Mapping[str, Mapping[str, Any]]:
    """The stages' per-role plan statistics (StageSet.plan_stats); empty on the CPU backend. Call it on the
    thread that owns the pipeline."""
    return pipeline.stages.plan_stats() if pipeline is not None else {}


def recordings(pipeline: OcrPipeline) -> int:
    return sum(int(role.get("recordings", 0)) for role in plan_stats_of(pipeline).values())


def largest_first(shapes: Sequence[tuple[str, tuple[int, ...]]]) -> list[tuple[str, tuple[int, ...]]]:
    """The shapes model by model (in their first appearance's order), each model's largest input first: the
    plans of a model share regions sized by the largest plan so far, and a plan that grows them leaves the
    plans before it stale (re-recorded on their next use); largest first, they grow once."""
    first = {role: i for i, (role, _) in reversed(list(enumerate(shapes)))}
    return sorted(shapes, key=lambda item: (first[item[0]], -math.prod(item[1])))


def warm_pipeline(pipeline: OcrPipeline, sizes: Sequence[tuple[int, int]], *,
                  stopping: Callable[[], bool] = lambda: False) -> WarmReport:
    """Record the plans that images of these (width, height) sizes need, with the pipeline's own options, before
    it serves; on the thread that owns the pipeline. A shape that fails (out of device memory, say) is logged
    and skipped; a lost device ends the warm-up (the first request then rebuilds), and so does `stopping()`
    turning true (the agent is shutting down). Logs `plans_warmed`."""
    started = time.perf_counter()
    stages = pipeline.stages
    if not stages.warms or not sizes:  # nothing to warm on these stages; no sizes configured
        return WarmReport(0, 0, 0, 0, 0.0)
    shapes = largest_first(warm_plan_shapes(sizes, pipeline.options, pipeline.stages.max_batch,
                                            pipeline.read_batch))
    for role, shape in reserve_shapes(pipeline.options):
        try:  # the largest input's memory first: later, larger requests would drop every plan recorded before
            stages.reserve(role, shape)
        except DeviceLost as exc:  # every shape would fail the same way
            log.warning("plan_warm_stopped", model=role, shape=list(shape), skipped=len(shapes), error=str(exc))
            return WarmReport(len(shapes), 0, 0, len(shapes), (time.perf_counter() - started) * 1e3)
        except Exception as exc:  # noqa: BLE001 - without the reserve the memory grows on demand, as before
            log.warning("plan_memory_not_reserved", model=role, shape=list(shape),
                        error=f"{type(exc).__name__}: {exc}")
    before = recordings(pipeline)
    prepared = skipped = 0
    for index, (role, shape) in enumerate(shapes):
        if stopping():
            skipped += len(shapes) - index
            log.info("plan_warm_stopped", skipped=len(shapes) - index, reason="the agent is stopping")
            break
        try:
            stages.prepare(role, shape)
            prepared += 1
        except DeviceLost as exc:  # every later shape would fail the same way
            skipped += len(shapes) - index
            log.warning("plan_warm_stopped", model=role, shape=list(shape), skipped=len(shapes) - index,
                        error=str(exc))
            break
        except Exception as exc:  # noqa: BLE001 - one shape that cannot be recorded now is recorded on demand
            skipped += 1
            log.warning("plan_warm_failed", model=role, shape=list(shape), error=f"{type(exc).__name__}: {exc}")
    classes = learn_rec_classes(pipeline, stopping)
    ms = (time.perf_counter() - started) * 1e3
    recorded = recordings(pipeline) - before
    held = {role: int(s.get("plans", 0)) for role, s in plan_stats_of(pipeline).items()}
    log.info("plans_warmed", count=prepared, recorded=recorded, skipped=skipped, sizes=len(sizes), plans=held,
             rec_classes_traced=classes, ms=round(ms, 1))
    return WarmReport(len(shapes), prepared, recorded, skipped, ms)


def learn_rec_classes(pipeline: OcrPipeline, stopping: Callable[[], bool]) -> int:
    """Learn the rec model's shape classes across the line widths (recording no plan): about ten per batch size,
    each a trace of ~60-110 ms on the H200 host, so that a new line width costs a function call and a recording
    on the request path instead of a trace. The number traced; a failure ends it (the classes are then traced on
    demand)."""
    if not pipeline.options.use_rec:
        return 0
    traced = 0
    for shape in rec_class_shapes(pipeline.options, pipeline.read_batch):
        if stopping():
            break
        try:
            traced += pipeline.stages.learn_shape_class("rec", shape)
        except Exception as exc:  # noqa: BLE001 - a class not learnt now is traced when a request brings it
            log.warning("shape_classes_not_learnt", model="rec", shape=list(shape),
                        error=f"{type(exc).__name__}: {exc}")
            break
    return traced


class PlanLedger:
    """The plan statistics last published by the GPU worker (`snapshot`: one immutable object, replaced whole,
    read from any thread), with the plans recorded since start summed over every pipeline served (a rebuild
    or an activation starts a pipeline whose own counts start at zero). One thread publishes at a time."""

    def __init__(self) -> None:
        self.snapshot = PlanStats()
        self._pipeline: OcrPipeline | None = None
        self._earlier: Counter[str] = Counter()  # recordings of the pipelines served before this one
        self._current: dict[str, int] = {}  # recordings of this one, as last published
        self._published = 0.0  # when publish_if_changed last published, and the plans recorded by then
        self._recorded = -1
        self._publishing = threading.Lock()

    def publish_if_changed(self, pipeline: OcrPipeline | None) -> None:
        """Publish when a plan was recorded since the last time, else at most every PUBLISH_EVERY_S (the lanes
        call it after every request: the full statistics cost more than a request should pay); a thread that
        finds another publishing leaves it to that one."""
        try:
            recorded = pipeline.stages.recordings_total() if pipeline is not None else -1
        except Exception:  # noqa: BLE001 - a lane made a model meanwhile: publish, which says when it cannot
            recorded = -2
        now = time.monotonic()
        if recorded == self._recorded and now - self._published < PUBLISH_EVERY_S:
            return
        if self._publishing.acquire(blocking=False):
            try:
                self._published, self._recorded = now, recorded
                self.publish(pipeline)
            finally:
                self._publishing.release()

    def publish(self, pipeline: OcrPipeline | None) -> PlanStats:
        """Take the statistics of `pipeline` (the one serving now, None while there is none). Never raises: the
        statistics must not fail a request; when they cannot be read, the last snapshot stays."""
        if pipeline is not self._pipeline:
            self._earlier.update(self._current)
            self._current = {}
            self._pipeline = pipeline
        try:
            raw = plan_stats_of(pipeline)
        except Exception as exc:  # noqa: BLE001 - see the docstring
            log.warning("plan_stats_unreadable", error=f"{type(exc).__name__}: {exc}")
            return self.snapshot
        self._current = {role: int(stats.get("recordings", 0)) for role, stats in raw.items()}
        roles = [*ROLES, *sorted((set(raw) | set(self._earlier)) - set(ROLES))]
        self.snapshot = PlanStats(tuple(
            ModelPlans(role, plans=int(raw.get(role, {}).get("plans", 0)),
                       plan_memory_bytes=int(raw.get(role, {}).get("plan_memory_bytes", 0)),
                       recorded_total=self._earlier[role] + self._current.get(role, 0),
                       distinct_shapes=int(raw.get(role, {}).get("distinct_shapes", 0)))
            for role in roles))
        return self.snapshot
