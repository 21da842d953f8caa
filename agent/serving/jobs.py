"""A request's work for the GPU worker (`Job`) and how it completes (`settle`); why a request got no result from
the worker is in agent/serving/errors.py."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

from vkocr.agent.errors import StopWho
from vkocr.agent.ocr.plugin_chains import run_plugins
from vkocr.agent.ocr.request import OcrRequest
from vkocr.agent.serving.errors import CancelledDropped, DeadlineDropped, WorkerError
from vkocr.postproc.result import OcrResult

# A client's own deadline passes before the agent's (the agent's starts when the call arrives, from the
# grpc-timeout the client sent, rounded up), so its cancellation at that deadline reaches the agent a little
# early: a cancellation this close to the deadline is the deadline's, not the client's.
DEADLINE_SLACK_S = 0.25


def deadline_passed(deadline: float | None) -> bool:
    """Whether `deadline` (time.monotonic()) has passed, or is within DEADLINE_SLACK_S of passing."""
    return deadline is not None and time.monotonic() >= deadline - DEADLINE_SLACK_S


@dataclass
class Job:
    """One request's work for the worker. Its handler calls `cancel` when the answer is no longer wanted; the
    worker then drops the job, or stops it at its next stage boundary."""

    request_id: str
    request: OcrRequest  # what admission built: options, plugin chain, decoded image, geometry
    deadline: float | None = None  # time.monotonic() after which the answer is useless
    model_version: str = ""  # the version and device that answered, set by the worker when the job runs
    device_name: str = ""
    cancelled: threading.Event = field(default_factory=threading.Event)
    cancelled_by: StopWho = "client"  # who cancelled, once `cancelled` is set
    future: Future[OcrResult] = field(default_factory=Future)
    enqueued: float = field(default_factory=time.monotonic)
    started: float = 0.0  # time.monotonic() when a lane began it
    attempts: int = 0  # lanes it was handed to: a second after a device failure, never a third
    caller: object = None  # the stream it came from (the queue's turns are per caller); None: its own

    def cancel(self, who: StopWho) -> None:
        """The answer is no longer wanted (any thread): `who` is the client, the deadline or the shutdown."""
        self.cancelled_by = who
        self.cancelled.set()

    def begin(self) -> StopWho | None:
        """Mark the job running, unless its answer is no longer wanted: then who no longer wants it. From
        RUNNING on, the future cannot be cancelled and the job stops at its next stage boundary instead."""
        who = self.stop_reason()
        if who is None and not self.future.set_running_or_notify_cancel():  # the handler's wait was cancelled
            # its handler names who, unless it has not got that far
            who = self.stop_reason() or ("deadline" if deadline_passed(self.deadline) else "client")
        return who

    def stop_reason(self) -> StopWho | None:
        """Who no longer wants the answer, None while it is still wanted (asked between stages)."""
        if self.cancelled.is_set():
            return self.cancelled_by
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "deadline"
        return None


def dropped_error(who: StopWho, waited_ms: float) -> WorkerError:
    """Why a job was dropped before any GPU work: its deadline passed, or `who` cancelled it."""
    if who == "deadline":
        return DeadlineDropped(f"deadline passed after {waited_ms:.0f} ms in the queue, before any GPU work")
    by = "the agent's shutdown" if who == "shutdown" else "the client"
    return CancelledDropped(f"cancelled by {by} before the GPU work started")


def settle(future: Future[OcrResult], *, result: OcrResult | None = None, error: BaseException | None = None
           ) -> None:
    """Complete a request's future unless it already is (its handler may have cancelled it meanwhile)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]  # no error: the caller passes a result
    except InvalidStateError:
        pass


def finish(job: Job, result: OcrResult) -> None:
    """Run the job's plugin chain over its recognised result and complete its future (plugins record their own
    errors in the result; anything else they raise is a bug of ours, and the request's answer)."""
    try:
        finished = run_plugins(result, job.request.chain)
    except Exception as exc:  # noqa: BLE001
        settle(job.future, error=exc)
        return
    settle(job.future, result=finished)
