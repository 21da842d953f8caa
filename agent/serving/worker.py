"""The GPU worker: one thread that owns the OCR pipeline (and with it the Vulkan context) and runs requests'
device stages in order, behind a bounded queue.

A request's plugin chain runs on a small thread pool after its device stages, so the CPU postprocessing of one
request overlaps the GPU work of the next. A request whose client cancelled or whose deadline passed is
dropped before any GPU work, and one whose answer stops being wanted while it runs stops at its next stage
boundary (after det, DB, cls or a rec batch), so the worker moves on to the next request. A Vulkan failure
(device lost, failed submission) takes the state to REBUILDING: the worker closes the pipeline, opens a new one
(or, when configured and the device cannot come back, one on the CPU executor), retries the request once and
returns to SERVING, without a restart.

Beside the worker thread, its lanes (server.gpu_lanes; agent/serving/lanes.py) take requests from the same
queue, each with a pipeline on its own device context: one request's host steps overlap another's GPU work.

Every pipeline the worker opens records the plans of the configured image sizes (`warm_sizes`, agent/serving/
plans.py) before it serves; a pipeline handed over with `install` is warmed by whoever opened it (`warm`). The
plan statistics are published after loading and after every request (`plan_stats`), so the status service and
the metrics read them without waiting for the GPU.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from vkocr.agent.errors import RequestStopped
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.serving.jobs import (
    DeviceFailed,
    Job,
    NotServing,
    QueueFull,
    WorkerError,
    dropped_error,
    settle,
)
from vkocr.agent.serving.lanes import Lane, LaneFailed, Lanes, lane_count, memory_usage
from vkocr.agent.serving.plans import PlanLedger, PlanStats, WarmReport, warm_pipeline
from vkocr.agent.serving.state import ServingState, StateBoard
from vkocr.engine.errors import VulkanError
from vkocr.log import get_logger
from vkocr.postproc.result import OcrResult

log = get_logger(__name__)

PipelineFactory = Callable[[], OcrPipeline]
REBUILD_ATTEMPTS = 3
REBUILD_BACKOFF_S = 0.5


@dataclass
class _Install:
    """A control message: serve with `pipeline` from now on (model activation); `done` completes when it
    serves."""

    pipeline: OcrPipeline
    model_version: str
    done: Future[OcrPipeline] = field(default_factory=Future)


_STOP = object()


class GpuWorker:
    def __init__(self, open_pipeline: PipelineFactory, state: StateBoard, *, model_version: str,
                 queue_size: int = 32, postproc_threads: int = 2, overlap: bool = True,
                 cpu_fallback: PipelineFactory | None = None, warm_sizes: Sequence[tuple[int, int]] = (),
                 lanes: int = 1) -> None:
        self._open_pipeline = open_pipeline
        self._cpu_fallback = cpu_fallback
        self.state = state
        self.model_version = model_version
        self.pipeline: OcrPipeline | None = None
        self._jobs: queue.Queue[Job] = queue.Queue(queue_size)
        self._control: queue.Queue[object] = queue.Queue()
        self._wake = threading.Semaphore(0)  # one release per job or control message
        self._handed_back: queue.SimpleQueue[Job] = queue.SimpleQueue()  # a failed lane's, for this thread
        self._overlap = overlap
        self._postproc = ThreadPoolExecutor(postproc_threads, thread_name_prefix="vkocr-postproc")
        self._thread = threading.Thread(target=self._run, name="vkocr-gpu-worker", daemon=True)
        self._accepting = True
        self._stopping = False
        self._busy = threading.Lock()  # held while a job runs its device stages
        self._start_lock = threading.Lock()
        self._started = False
        self._initial: _Install | None = None  # the install that started the thread: its first pipeline
        self._settled = threading.Condition()  # notified when a job leaves the queue or its device stages
        self._unsettled = 0  # jobs queued or on their device stages; stop() waits for none, within its grace
        self._room_listeners: tuple[Callable[[], None], ...] = ()
        state.subscribe(lambda _: self._notify_room())  # a state change may change what submit() answers
        self.loaded = threading.Event()
        self.dropped: Counter[str] = Counter()  # jobs dropped before GPU work: "cancelled", "deadline"
        self.stopped: Counter[str] = Counter()  # jobs stopped between stages, by who: "client", "deadline"…
        self.running = ""  # the request id of the job on this thread's device stages (not a lane's), "" between jobs
        self.warm_sizes = tuple(warm_sizes)  # (width, height) of the images whose plans are recorded first
        self._plans = PlanLedger()  # published by the worker thread only
        self._counts = threading.Lock()  # dropped and stopped are counted from the lanes too
        self._lanes = Lanes(lanes, self._take, self._serve_on_lane, self.warm)

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
        return self._jobs.maxsize

    def queue_depth(self) -> int:
        return self._jobs.qsize()

    def submit(self, job: Job, *, block: bool = False, timeout: float | None = None) -> Future[OcrResult]:
        """Queue a job; QueueFull when the queue is full (after `timeout` when blocking), NotServing when the
        agent is not serving."""
        if not self._accepting or not self.state.serving:
            snapshot = self.state.get()
            raise NotServing(f"agent is {snapshot.state.value.lower()}: {snapshot.reason}")
        self._settle(+1)
        try:
            self._jobs.put(job, block=block, timeout=timeout)
        except queue.Full:
            self._settle(-1)
            raise QueueFull(f"queue full ({self._jobs.maxsize} requests waiting for the GPU)") from None
        self._wake.release()
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
        self._wake.release()
        return message.done

    def warm(self, pipeline: OcrPipeline, stopping: Callable[[], bool] = lambda: False) -> WarmReport:
        """Record the plans of `warm_sizes` in `pipeline`, which does not serve yet, on the calling thread (the
        one that opened it: the activator's before `install`, this worker's after it opens one, a lane's). Never
        raises for a plan that cannot be recorded: the pipeline still serves, recording that plan on demand.
        Stops early when the agent stops or `stopping()` turns true."""
        try:
            return warm_pipeline(pipeline, self.warm_sizes, stopping=lambda: self._stopping or stopping())
        except Exception as exc:  # noqa: BLE001 - a warm-up is an optimisation; serving goes on without it
            log.warning("plans_not_warmed", error=f"{type(exc).__name__}: {exc}")
            return WarmReport(0, 0, 0, 0, 0.0)

    @property
    def plan_stats(self) -> PlanStats:
        """The plans per model as the worker last published them (after loading, warm-up and each request);
        any thread, never waits for the GPU."""
        return self._plans.snapshot

    def add_room_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` (from any thread; it must not block) whenever submit() may answer otherwise than
        before: a job left the queue, the serving state changed, or the worker stopped accepting. Returns the
        function that removes it."""
        self._room_listeners = (*self._room_listeners, listener)

        def remove() -> None:
            self._room_listeners = tuple(x for x in self._room_listeners if x is not listener)

        return remove

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the worker between two jobs (it finishes the one it runs, then waits): maintenance on the
        device, and tests that need a request to wait in the queue for a known time."""
        try:
            with self._busy, self._lanes.held():
                yield
        finally:
            self._settle(0)

    def inject_device_loss(self) -> None:
        """Fault injection for recovery drills and tests: the device's next queue submission fails with
        VK_ERROR_DEVICE_LOST, and the worker recovers through the path a real loss takes."""
        pipeline = self.pipeline
        if pipeline is None or pipeline.device is None:
            raise WorkerError("no Vulkan device to fail (models not loaded, or serving on the CPU)")
        for each in (pipeline, *self._lanes.pipelines()):  # one GPU: whichever lane takes the next request fails
            each.device.inject_submit_failure("VK_ERROR_DEVICE_LOST")

    def stop(self, grace_s: float) -> None:
        """Stop accepting, let queued and running jobs finish for up to `grace_s`, fail the rest, close."""
        self._stopping = True
        self._accepting = False
        self._notify_room()  # a request waiting for room in the queue is refused now
        deadline = time.monotonic() + grace_s
        with self._settled:
            self._settled.wait_for(lambda: self._unsettled == 0 and not self._busy.locked(), grace_s)
        self._control.put(_STOP)
        self._wake.release()
        if self._thread.is_alive():
            self._thread.join(max(0.0, deadline - time.monotonic()) + 5.0)
        while True:  # whatever the grace period did not reach is failed, never silently dropped
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            settle(job.future, error=NotServing("agent stopped before this request reached the GPU"))
        self._postproc.shutdown(wait=True)

    def pool_usage(self) -> tuple[int, int]:
        """(bytes in live allocations, bytes allocated from the driver) of every lane's device pool; zeros on
        the CPU."""
        return memory_usage(self._lanes.devices(self.pipeline))

    def gpu_busy_seconds(self) -> float:
        """The GPU time of every lane's recordings so far (their timestamps; engine/device.py)."""
        return sum(float(device.gpu_busy_seconds) for device in self._lanes.devices(self.pipeline))

    @property
    def lanes_serving(self) -> int:
        """Pipelines serving now: the worker thread's, and its lanes' that are open and warm."""
        return (self.pipeline is not None) + len(self._lanes.serving())

    @property
    def lanes_wanted(self) -> int:
        """Pipelines that serve once every lane has opened: server.gpu_lanes on a Vulkan device, else 1."""
        return lane_count(self._lanes.configured, self.pipeline)

    @property
    def lanes(self) -> Lanes:
        return self._lanes

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
                self._fail_queued("models failed to load")
                return
            if self.warm_sizes and self.state.get().state is ServingState.LOADING:
                self.state.set(reason=f"recording plans for {len(self.warm_sizes)} image sizes")
            self.warm(self.pipeline)
            self._plans.publish(self.pipeline)
            self._announce(ServingState.SERVING, "")
            self._lanes.start(self.pipeline)
        self.loaded.set()
        while True:
            self._wake.acquire()
            try:
                control = self._control.get_nowait()
            except queue.Empty:
                control = None
            if control is _STOP:
                break
            if isinstance(control, _Install):
                self._do_swap(control)
                continue
            try:
                job, handed_back = self._handed_back.get_nowait(), True
            except queue.Empty:
                try:
                    job, handed_back = self._jobs.get_nowait(), False
                except queue.Empty:
                    continue
                self._notify_room()
            with self._busy:
                self._run_job(job, None, resumed=handed_back)
            self._settle(-1)
            if handed_back:  # served here after all: the failed lane opens again (a real loss rebuilt them all)
                self._lanes.start(self.pipeline)
        self._lanes.stop()
        if self.pipeline is not None:
            self.pipeline.close()
            self.pipeline = None

    def _announce(self, state: ServingState, reason: str) -> None:
        pipeline = self.pipeline
        self.state.set(state=state, reason=reason, model_version=self.model_version,
                       device=pipeline.device_name if pipeline else "",
                       backend=pipeline.backend.split(" ")[0] if pipeline else "",
                       backend_reason=pipeline.backend_reason if pipeline else "")

    def _settle(self, change: int) -> None:
        with self._settled:
            self._unsettled += change
            self._settled.notify_all()

    def _notify_room(self) -> None:
        for listener in self._room_listeners:
            try:
                listener()
            except Exception as exc:  # noqa: BLE001 - a listener's fault must not stop the worker
                log.warning("room_listener_failed", error=repr(exc))

    def _do_swap(self, message: _Install) -> None:
        if not message.done.set_running_or_notify_cancel():  # abandoned by install()'s caller (a timeout)
            try:
                message.pipeline.close()
            except Exception as exc:  # noqa: BLE001 - an abandoned pipeline must not stop the worker
                log.warning("abandoned_pipeline_close_failed", error=str(exc))
            return
        self._lanes.stop()  # no request after the swap runs on the old version
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
        message.done.set_result(message.pipeline)
        self._lanes.start(self.pipeline)

    def _take(self, timeout: float) -> Job | None:
        """The next queued job for a lane, None after `timeout`. Whichever pipeline is free takes it: letting a
        lane take one only while this thread was busy made two lanes 2.3x slower at 4 clients on the H200
        (BENCHMARKS.md)."""
        try:
            job = self._jobs.get(timeout=timeout)
        except queue.Empty:
            return None
        self._notify_room()
        return job

    def _serve_on_lane(self, lane: Lane, job: Job) -> None:
        try:
            self._run_job(job, lane)
        except LaneFailed:  # not settled: this thread serves it, and recovers the device if it must
            self._handed_back.put(job)
            self._wake.release()
            return
        self._settle(-1)

    def _run_job(self, job: Job, lane: Lane | None, *, resumed: bool = False) -> None:
        try:
            self._process(job, lane, resumed=resumed)
        except LaneFailed:
            raise
        except Exception as exc:  # a bug of ours must not stop the worker or its lane
            log.error("worker_error", request_id=job.request_id, error=repr(exc), exc_info=exc)
            settle(job.future, error=exc)

    def _count(self, counter: Counter[str], key: str) -> None:
        with self._counts:
            counter[key] += 1

    def _process(self, job: Job, lane: Lane | None = None, *, resumed: bool = False) -> None:
        """One job's device stages, on `lane` or else on this thread's pipeline (`resumed`: a lane began it)."""
        waited_ms = (time.monotonic() - job.enqueued) * 1e3
        if not resumed and not self._begin(job, waited_ms):
            return
        started = time.monotonic()
        if lane is None:
            self.running = job.request_id
        try:
            result = lane.recognize(job) if lane is not None else self._recognize_with_recovery(job)
        except LaneFailed:
            raise
        except RequestStopped as stopped:  # the worker is free for the next job now, not after the last stage
            log.info("request_stopped", request_id=job.request_id, who=stopped.who, after=stopped.after,
                     ran_ms=round((time.monotonic() - started) * 1e3, 1))
            self._count(self.stopped, stopped.who)  # after the log line: whoever watches the count finds it
            self._publish(lane)
            settle(job.future, error=stopped)
            return
        except Exception as exc:  # noqa: BLE001 - every failure goes back to its request, not up this thread
            self._publish(lane)
            settle(job.future, error=exc)
            return
        finally:
            if lane is None:
                self.running = ""
        self._publish(lane)  # before the answer leaves: a client that got it sees its plans
        pipeline = lane.pipeline if lane is not None else self.pipeline
        assert pipeline is not None  # it just answered (after a rebuild, the new one did)
        job.model_version, job.device_name = self.model_version, pipeline.device_name
        result.timings_ms["queue"] = waited_ms
        if self._overlap:
            self._postproc.submit(self._finish, job, result)
        else:
            self._finish(job, result)

    def _publish(self, lane: Lane | None) -> None:
        if lane is None:  # the statistics are the worker thread's pipeline's, read on its thread only
            self._plans.publish(self.pipeline)

    def _begin(self, job: Job, waited_ms: float) -> bool:
        """Mark the job running; False when it is dropped instead (cancelled, or past its deadline)."""
        who = job.begin()
        if who is None:
            return True
        self._count(self.dropped, "deadline" if who == "deadline" else "cancelled")
        settle(job.future, error=dropped_error(who, waited_ms))
        log.info("request_dropped", request_id=job.request_id, who=who, waited_ms=round(waited_ms))
        return False

    def _recognize_with_recovery(self, job: Job) -> OcrResult:
        for attempt in (1, 2):
            assert self.pipeline is not None
            try:
                return self.pipeline.recognize(job.image, job.options, decoded=True, stop=job.stop_reason)
            except VulkanError as exc:
                log.error("device_failure", request_id=job.request_id, error=str(exc), attempt=attempt)
                if not self._rebuild(str(exc)) or attempt == 2:
                    raise DeviceFailed(f"device failure: {exc}") from exc
        raise AssertionError("unreachable")

    def _rebuild(self, reason: str) -> bool:
        """Close the failed pipeline and open a new one; False when the agent cannot serve any more."""
        self.state.set(state=ServingState.REBUILDING, reason=reason)
        self._lanes.stop()  # one GPU: their devices are as lost as this one's
        old, self.pipeline = self.pipeline, None
        if old is not None:
            try:
                old.close()
            except Exception as exc:  # noqa: BLE001 - a lost device may refuse even its destruction
                log.warning("failed_pipeline_close", error=str(exc))
        for attempt in range(1, REBUILD_ATTEMPTS + 1):
            try:
                self.pipeline = self._open_pipeline()
                break
            except Exception as exc:  # noqa: BLE001
                log.error("device_rebuild_failed", attempt=attempt, error=str(exc))
                time.sleep(REBUILD_BACKOFF_S * attempt)
        if self.pipeline is None and self._cpu_fallback is not None:
            log.warning("falling_back_to_cpu", reason=reason)
            try:
                self.pipeline = self._cpu_fallback()
            except Exception as exc:  # noqa: BLE001
                log.error("cpu_fallback_failed", error=str(exc))
        rebuilds = self.state.get().device_rebuilds + 1
        if self.pipeline is not None:
            self.warm(self.pipeline)
        self._plans.publish(self.pipeline)
        if self.pipeline is None:
            self.state.set(state=ServingState.FAILED, reason=f"device lost and not rebuilt: {reason}",
                           device_rebuilds=rebuilds)
            self._accepting = False
            self._fail_queued("device lost and not rebuilt")
            return False
        self.state.set(device_rebuilds=rebuilds)
        self._announce(ServingState.SERVING, "")
        log.info("device_rebuilt", device=self.pipeline.device_name, rebuilds=rebuilds)
        self._lanes.start(self.pipeline)
        return True

    def _fail_queued(self, why: str) -> None:
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            settle(job.future, error=NotServing(why))
            self._settle(-1)
            self._notify_room()

    @staticmethod
    def _finish(job: Job, result: OcrResult) -> None:
        try:
            finished = OcrPipeline.finish(result, job.chain)
        except Exception as exc:  # noqa: BLE001 - the chain records plugin errors itself: a bug of ours
            settle(job.future, error=exc)
            return
        settle(job.future, result=finished)
