"""The GPU worker: the thread that owns the OCR pipeline (and with it the Vulkan context) and serves queued
requests through its lanes (agent/serving/flow.py), behind a bounded queue.

Detection lanes take requests from the queue and run their first half (image, detection, DB's boxes); reading
lanes classify and recognise the crops of every request that is ready, together, and answer each; each lane
drives a stream of the device of its own, so one request's host steps overlap another's GPU work. A request's
plugin chain runs on a small thread pool after its device stages. A request whose client cancelled or whose
deadline passed is dropped before any GPU work, and one whose answer stops being wanted while it runs stops at its
next stage boundary (after det, DB, cls or rec). A Vulkan failure (device lost, failed submission) takes the
state to REBUILDING: the worker thread stops the lanes, closes the pipeline, opens a new one (or, when
configured and the device cannot come back, one on the CPU executor), hands the failed requests in again once
and returns to SERVING, without a restart.

Every pipeline the worker opens records the plans of the configured image sizes (`warm_sizes`, agent/serving/
plans.py) on every lane before it serves; a pipeline handed over with `install` is warmed by whoever opened it
(`warm`). The plan statistics are published after loading and after requests (`plan_stats`), so the status
service and the metrics read them without waiting for the GPU.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from vkocr.agent.errors import RequestStopped
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.serving.config_throughput import ThroughputConfig
from vkocr.agent.serving.errors import NotServing, WorkerError
from vkocr.agent.serving.flow import Flow, FlowCounts, shape_pipeline
from vkocr.agent.serving.job_queue import JobQueue
from vkocr.agent.serving.jobs import Job, finish, settle
from vkocr.agent.serving.plans import PlanLedger, PlanStats, WarmReport, warm_pipeline
from vkocr.agent.serving.rebuild import PipelineFactory, reopen
from vkocr.agent.serving.state import ServingState, StateBoard
from vkocr.log import get_logger
from vkocr.postproc.result import OcrResult

log = get_logger(__name__)


@dataclass
class _Install:
    """A control message: serve with `pipeline` from now on (model activation); `done` completes when it
    serves."""

    pipeline: OcrPipeline
    model_version: str
    done: Future[OcrPipeline] = field(default_factory=Future)


@dataclass
class _Failed:
    """A control message from a lane: the device (or every reading lane) failed under these requests."""

    jobs: list[Job]
    error: BaseException


_STOP = object()


class GpuWorker:
    def __init__(self, open_pipeline: PipelineFactory, state: StateBoard, *, model_version: str,
                 queue_size: int = 32, stream_queued: int = 4, postproc_threads: int = 2, overlap: bool = True,
                 cpu_fallback: PipelineFactory | None = None, warm_sizes: Sequence[tuple[int, int]] = (),
                 flow: ThroughputConfig | None = None) -> None:
        """`overlap` False: one lane runs each request's every step, plugins included, one request at a time
        (what the overlap and the batching buy is measured against it); `flow`: the lanes and the batching."""
        self._open_pipeline = open_pipeline
        self._cpu_fallback = cpu_fallback
        self.state = state
        self.model_version = model_version
        self.pipeline: OcrPipeline | None = None
        self.counts = FlowCounts()  # dropped, stopped and read requests, over every pipeline served
        # fair between calls (job_queue.py)
        self.jobs = JobQueue(queue_size, per_caller=stream_queued, dropped=self.counts.drop)
        self._control: queue.Queue[object] = queue.Queue()
        self._overlap = overlap
        settings = flow or ThroughputConfig(detect_lanes=1, read_lanes=1)
        # with the overlap off one lane reads too (config_throughput.resolve works out the same)
        self.flow_settings = settings if overlap else dataclasses.replace(settings, detect_lanes=1, read_lanes=0)
        self._flow: Flow | None = None
        self._postproc = ThreadPoolExecutor(postproc_threads, thread_name_prefix="vkocr-postproc")
        self._thread = threading.Thread(target=self._run, name="vkocr-gpu-worker", daemon=True)
        self._accepting = True
        self._stopping = False
        self._maintenance = threading.RLock()  # held while the worker thread swaps or rebuilds, and by held()
        self._start_lock = threading.Lock()
        self._started = False
        self._initial: _Install | None = None  # the install that started the thread: its first pipeline
        state.subscribe(lambda _: self.jobs.notify_room())  # a state change may change what submit() answers
        self.loaded = threading.Event()
        self.warm_sizes = tuple(warm_sizes)  # (width, height) of the images whose plans are recorded first
        self._plans = PlanLedger()

    # -- outside the worker thread ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker thread; it opens its first pipeline with the factory."""
        with self._start_lock:
            if self._started:
                raise RuntimeError("the GPU worker is already started")
            self._started = True
            self._thread.start()

    @property
    def started(self) -> bool:
        """Whether start() or install() started the worker thread."""
        return self._started

    @property
    def queue_capacity(self) -> int:
        return self.jobs.capacity

    def queue_depth(self) -> int:
        return self.jobs.depth()

    @property
    def running(self) -> str:
        """The request id of the newest request inside the lanes, "" when none is."""
        flow = self._flow
        return flow.newest if flow is not None else ""

    def submit(self, job: Job, *, block: bool = False, timeout: float | None = None) -> Future[OcrResult]:
        """Queue a job; QueueFull when the queue is full (after `timeout` when blocking), NotServing when the
        agent is not serving."""
        if not self._accepting or not self.state.serving:
            snapshot = self.state.get()
            raise NotServing(f"agent is {snapshot.state.value.lower()}: {snapshot.reason}")
        self.jobs.put(job, block=block, timeout=timeout)
        return job.future

    def install(self, pipeline: OcrPipeline, model_version: str) -> Future[OcrPipeline]:
        """Serve with `pipeline` from the next job on, as `model_version`; the worker closes the old pipeline
        after the swap. A worker not started yet starts with it (its factory then only reopens after a device
        loss). The future completes, from the worker thread, once the worker serves `pipeline` (between two
        jobs, so no request sees half of it). Cancel the future to abandon the swap: when the worker had not
        begun it, it closes `pipeline` instead of serving it. From the call on, `pipeline` is the worker's."""
        message = _Install(pipeline, model_version)
        with self._start_lock:
            if not self._started:
                self._initial = message
                self._started = True
                self._thread.start()
                return message.done
        self._control.put(message)
        return message.done

    def warm(self, pipeline: OcrPipeline, stopping: Callable[[], bool] = lambda: False) -> WarmReport:
        """Make `pipeline`'s lanes, then record the plans of `warm_sizes` on each, before it serves, on the calling
        thread (the one that opened it: the activator's before `install`, this worker's after it opens one).
        Never raises for a plan that cannot be recorded: the pipeline still serves, recording that plan on
        demand. Stops early when the agent stops or `stopping()` turns true."""
        shape_pipeline(self.flow_settings, pipeline)
        try:
            return warm_pipeline(pipeline, self.warm_sizes, stopping=lambda: self._stopping or stopping())
        except Exception as exc:  # noqa: BLE001 - a warm-up is an optimisation; serving goes on without it
            log.warning("plans_not_warmed", error=f"{type(exc).__name__}: {exc}")
            return WarmReport(0, 0, 0, 0, 0.0)

    @property
    def plan_stats(self) -> PlanStats:
        """The plans per model as the worker last published them (after loading, warm-up and requests); any
        thread, never waits for the GPU."""
        return self._plans.snapshot

    def add_room_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` (from any thread; it must not block) whenever submit() may answer otherwise than
        before: a job left the queue, the serving state changed, or the worker stopped accepting. Returns the
        function that removes it."""
        return self.jobs.add_room_listener(listener)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the worker: the requests in its lanes finish, then none is taken from the queue and no swap or
        rebuild begins until the block ends (maintenance on the device, and tests that need a request to wait in
        the queue for a known time)."""
        try:
            with self._maintenance:
                flow = self._flow
                if flow is None:
                    yield
                else:
                    with flow.held():
                        yield
        finally:
            self.jobs.settle(0)

    def inject_device_loss(self) -> None:
        """Fault injection for recovery drills and tests: the device's next queue submission fails with
        VK_ERROR_DEVICE_LOST, and the worker recovers through the path a real loss takes."""
        pipeline = self.pipeline
        if pipeline is None or pipeline.device is None:
            raise WorkerError("no Vulkan device to fail (models not loaded, or serving on the CPU)")
        pipeline.device.inject_submit_failure("VK_ERROR_DEVICE_LOST")

    def stop(self, grace_s: float) -> None:
        """Stop accepting, let queued and running jobs finish for up to `grace_s`, fail the rest, close."""
        self._stopping = True
        self._accepting = False
        self.jobs.notify_room()  # a request waiting for room in the queue is refused now
        deadline = time.monotonic() + grace_s
        self.jobs.wait_settled(grace_s)
        self._control.put(_STOP)
        if self._thread.is_alive():
            self._thread.join(max(0.0, deadline - time.monotonic()) + 5.0)
        self.jobs.fail_all("agent stopped before this request reached the GPU")  # never silently dropped
        self._postproc.shutdown(wait=True)

    def pool_usage(self) -> tuple[int, int]:
        """(bytes in live allocations, bytes allocated from the driver) of the device's pool; zeros on the CPU."""
        pipeline = self.pipeline
        return pipeline.memory_usage() if pipeline is not None else (0, 0)

    def gpu_busy_seconds(self) -> float:
        """The time the GPU was busy with the serving pipeline's recordings so far (OcrPipeline.gpu_busy_seconds)."""
        pipeline = self.pipeline
        return pipeline.gpu_busy_seconds() if pipeline is not None else 0.0

    def waiting_to_read(self) -> int:
        """Requests detected and waiting for a reading lane now."""
        flow = self._flow
        return len(flow.batcher) if flow is not None else 0

    def read_batches(self) -> tuple[int, int, int]:
        """(reads, requests they held, crops they held) since the worker started, over every pipeline served."""
        return self.counts.reads()

    # -- the worker thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        initial, self._initial = self._initial, None
        if initial is not None:  # started by install(): serve its pipeline
            self._do_swap(initial)
        else:
            try:
                self.pipeline = self._open_pipeline()
            except Exception as exc:  # noqa: BLE001
                log.error("models_failed_to_load", error=f"{type(exc).__name__}: {exc}")
                self.state.set(state=ServingState.FAILED, reason=f"cannot load models: {exc}")
                self._accepting = False
                self.loaded.set()
                self.jobs.fail_all("models failed to load")
                return
            if self.warm_sizes and self.state.get().state is ServingState.LOADING:
                self.state.set(reason=f"recording plans for {len(self.warm_sizes)} image sizes")
            self.warm(self.pipeline)
            self._plans.publish(self.pipeline)
            self._announce(ServingState.SERVING, "")
            self._start_flow()
        self.loaded.set()
        while True:
            control = self._control.get()
            if control is _STOP:
                break
            with self._maintenance:
                if isinstance(control, _Install):
                    self._do_swap(control)
                elif isinstance(control, _Failed):
                    self._recover(control)
        self._stop_flow()
        if self.pipeline is not None:
            self.pipeline.close()
            self.pipeline = None

    def _start_flow(self) -> None:
        pipeline = self.pipeline
        if pipeline is None:
            return
        shape_pipeline(self.flow_settings, pipeline)
        self._flow = Flow(pipeline, self.flow_settings, self, self.counts)
        self._flow.start()

    def _stop_flow(self) -> None:
        """Stop the lanes: every request inside finishes (or fails, and is handed in again), then they end."""
        flow = self._flow
        if flow is not None:
            flow.stop()
            self._flow = None

    def _announce(self, state: ServingState, reason: str) -> None:
        p = self.pipeline  # what serves, and why (all empty while none is open)
        served = ({"device": p.device_name, "backend": p.backend.split(" ")[0], "backend_reason": p.backend_reason,
                   "precision": p.precision.precision, "precision_reason": p.precision.reason} if p else
                  dict.fromkeys(("device", "backend", "backend_reason", "precision", "precision_reason"), ""))
        self.state.set(state=state, reason=reason, model_version=self.model_version, **served)

    def _do_swap(self, message: _Install) -> None:
        if not message.done.set_running_or_notify_cancel():  # abandoned by install()'s caller (a timeout)
            try:
                message.pipeline.close()
            except Exception as exc:  # noqa: BLE001 - an abandoned pipeline must not stop the worker
                log.warning("abandoned_pipeline_close_failed", error=str(exc))
            return
        self._stop_flow()  # no request after the swap runs on the old version
        old, self.pipeline = self.pipeline, message.pipeline
        self.model_version = message.model_version
        self._accepting = not self._stopping  # a swap also revives a worker whose device could not be rebuilt
        self._plans.publish(self.pipeline)
        self._announce(ServingState.SERVING, "")
        if old is not None:
            try:
                old.close()
            except Exception as exc:  # noqa: BLE001
                log.warning("old_pipeline_close_failed", error=str(exc))
        self._start_flow()
        self.loaded.set()  # the first load attempt is over (a later swap finds it set)
        message.done.set_result(message.pipeline)

    # -- the flow's JobSource (agent/serving/flow.py): called from its lanes --------------------------------------

    def take(self, until: Callable[[], bool]) -> Job | None:
        """The next job for a detection lane (a failed device's first), marked running, once there is one (the
        queue drops those whose answer is no longer wanted); None once `until()`."""
        return self.jobs.take(until)

    def wake(self) -> None:
        self.jobs.wake()

    def end(self, job: Job, outcome: OcrResult | BaseException) -> None:
        """A lane is done with `job`: its answer (plugins on the postprocessing threads), or why there is none."""
        try:
            self._plans.publish_if_changed(self.pipeline)  # before the answer leaves: its client sees its plans
            if isinstance(outcome, OcrResult):
                pipeline = self.pipeline
                job.model_version = self.model_version
                job.device_name = pipeline.device_name if pipeline is not None else ""
                outcome.timings_ms["queue"] = (job.started - job.enqueued) * 1e3
                if self._overlap:
                    self._postproc.submit(finish, job, outcome)
                else:
                    finish(job, outcome)
                return
            if isinstance(outcome, RequestStopped):  # the lane is free for the next job now
                log.info("request_stopped", request_id=job.request_id, who=outcome.who, after=outcome.after,
                         ran_ms=round((time.monotonic() - job.started) * 1e3, 1))
                self.counts.stop(outcome.who)  # after the log line: whoever watches the count finds it
            settle(job.future, error=outcome)  # the gRPC boundary maps it to a status, and logs a bug of ours
        finally:
            self.jobs.settle(-1)

    def fail(self, jobs: list[Job], error: BaseException) -> None:
        """The device (or every reading lane) failed under `jobs`: the worker thread recovers (`_recover`)."""
        self._control.put(_Failed(jobs, error))

    def _recover(self, failed: _Failed) -> None:
        """A lane's device failed under `failed.jobs`: stop the lanes, rebuild, and hand the jobs in again once
        (a job that fails a second time, or finds no device, gets DeviceFailed)."""
        jobs = list(failed.jobs)
        log.error("device_failure", request_ids=[job.request_id for job in jobs], error=str(failed.error))
        self._stop_flow()
        while True:  # what other lanes handed back while they stopped is part of this recovery
            try:
                more = self._control.get_nowait()
            except queue.Empty:
                break
            if isinstance(more, _Failed):
                jobs += more.jobs
            else:
                self._control.put(more)  # an install or a stop: after the rebuild
                break
        self.jobs.retry(jobs, self._rebuild(str(failed.error)), failed.error)

    def _rebuild(self, reason: str) -> bool:
        """Close the failed pipeline and open a new one; False when the agent cannot serve any more."""
        self.state.set(state=ServingState.REBUILDING, reason=reason)
        old, self.pipeline = self.pipeline, None
        self.pipeline = reopen(old, self._open_pipeline, self._cpu_fallback, reason)
        rebuilds = self.state.get().device_rebuilds + 1
        if self.pipeline is not None:
            self.warm(self.pipeline)
        self._plans.publish(self.pipeline)
        if self.pipeline is None:
            self.state.set(state=ServingState.FAILED, reason=f"device lost and not rebuilt: {reason}",
                           device_rebuilds=rebuilds)
            self._accepting = False
            self.jobs.fail_all("device lost and not rebuilt")
            return False
        self.state.set(device_rebuilds=rebuilds)
        self._announce(ServingState.SERVING, "")
        log.info("device_rebuilt", device=self.pipeline.device_name, rebuilds=rebuilds)
        self._start_flow()
        return True
