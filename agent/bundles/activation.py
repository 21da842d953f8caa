"""Staged activation of a stored model version, and the model the agent serves from its store.

    verify     the stored files against the manifest, and its signature against today's trusted keys
    load       a new OcrPipeline for the version, on its own Vulkan device, on the calling thread (never the
               GPU worker's): the old version keeps serving meanwhile
    self_tests every image the bundle carries is read; its expected text must appear among the lines
    warm       the plans of the configured image sizes are recorded (GpuWorker.warm), still on that thread
    swap       the GPU worker takes the new pipeline between two requests and closes the old one
    record     the store's active pointer is replaced (atomically, fsync'd), so a restart serves the new one,
               and the high-water mark rises to it when it is newer

Before the first step, a version older than the store's high-water mark (agent/bundles/high_water.py) is
refused (DowngradeRefused) unless it is a rollback or the operator asked for a downgrade (allow_downgrade).

A failure at any step before the swap closes the new pipeline and leaves the old version serving, and the
ActivationFailed it raises names the step and why. One activation at a time: `exclusive()` holds throughout,
and the store's other changes (adding and deleting versions) take it too.

The activator reads a version from the store once (`ModelStore.installed`, an InstalledVersion) and works on
that object; the pipeline goes to the GPU worker through `GpuWorker.install`, whose future completes when the
worker serves it. The worker is started by the first pipeline that loads: an agent whose store has no active
version (or one that no longer loads) stays up in state FAILED, and the first successful activation starts
serving.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from vkocr.agent.bundles.errors import (
    ActivationBusy,
    ActivationFailed,
    BundleError,
    DowngradeRefused,
    SignatureError,
    VersionNotFound,
)
from vkocr.agent.bundles.self_tests import SelfTestOutcome, run_self_tests
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.bundles.stored import InstalledVersion
from vkocr.agent.ocr.lanes import LaneResources
from vkocr.agent.ocr.model_files import set_of_files
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.serving.state import ServingState, StateBoard
from vkocr.agent.serving.worker import GpuWorker
from vkocr.log import get_logger

T = TypeVar("T")

log = get_logger(__name__)

# The worker swaps between two requests; a request takes seconds, a device recovery (rebuild, reload) longer.
SWAP_TIMEOUT_S = 300.0
NO_ACTIVE_VERSION = "no active model version; upload and activate a bundle"


@dataclass(frozen=True)
class Activated:
    version: str
    previous: str | None
    self_tests: tuple[SelfTestOutcome, ...] = field(default_factory=tuple)


def on_own_thread(work: Callable[[], T]) -> T:
    """`work` on a thread of its own that ends when it returns. The device an activation opens is used and
    destroyed later by the GPU worker; NVIDIA's driver keeps per-thread state for a device, and a thread that
    touched the device and outlives it crashes the process when it exits (seen on the H200 with a pool
    thread). A thread that ends before the device does is safe."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="vkocr-activation")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def open_installed(installed: InstalledVersion, device: str | None, cpu_threads: int = 0,
                   lanes: LaneResources | None = None, precision: str = "auto") -> OcrPipeline:
    """A new pipeline for `installed` on `device` (None: the default one; "cpu": the CPU backend), with the
    streams and image slots of the worker's `lanes`, at `precision` (its files' model set's plans)."""
    paths = dict(installed.models)
    return OcrPipeline.open(device, options=installed.options, model_paths=paths, cpu_threads=cpu_threads,
                            lanes=lanes, precision=precision, model_set=set_of_files(paths))


class Activator:
    """Serves the store's active version through `worker` and activates others. `attach()` the worker before
    anything else; the worker's factory is `serving_factory` (and `cpu_factory` for its CPU fallback): after
    a device loss they open again the version the worker serves."""

    def __init__(self, store: ModelStore, state: StateBoard, base_options: OcrOptions, device: str | None,
                 on_swap: Callable[[str, OcrOptions], None] | None = None, cpu_threads: int = 0,
                 lanes: LaneResources | None = None, precision: str = "auto") -> None:
        self.store = store
        self.precision = precision
        self.cpu_threads = cpu_threads
        self.lanes = lanes
        self.state = state
        self.base_options = base_options
        self.device = device
        self.on_swap = on_swap
        self.worker: GpuWorker | None = None
        self.busy_with = ""  # what holds the lock, for the message another caller gets
        # The versions handed to the worker, by version: the one it serves is always among them (entries are
        # added before a handover and dropped after it, once the worker's version is settled).
        self._offered: dict[str, InstalledVersion] = {}
        self._stopping = False
        self._starting = threading.Lock()  # stop() and the worker's start: after stop(), no worker starts
        self._turn = threading.Condition()  # the activation lock: `_held`, waited on without polling
        self._held = False

    def attach(self, worker: GpuWorker) -> None:
        self.worker = worker

    @property
    def worker_started(self) -> bool:
        return self.worker is not None and self.worker.started

    # --- pipelines -----------------------------------------------------------------------------------------

    def serving_factory(self) -> OcrPipeline:
        """The GPU worker's factory after a device loss: a new pipeline for the version it serves."""
        return open_installed(self._serving(), self.device, self.cpu_threads, self.lanes, self.precision)

    def cpu_factory(self) -> OcrPipeline:
        return open_installed(self._serving(), "cpu", self.cpu_threads)

    def _serving(self) -> InstalledVersion:
        assert self.worker is not None
        return self._offered[self.worker.model_version]

    # --- locking -------------------------------------------------------------------------------------------

    @contextmanager
    def exclusive(self, what: str, *, wait_s: float | None = None) -> Iterator[None]:
        """Hold the lock for `what`; ActivationBusy when it is taken (after `wait_s` seconds, when given)."""
        if not self._acquire(wait_s or 0.0, stop_ends_wait=True):  # stopping ends the wait
            raise ActivationBusy(f"the model store is busy ({self.busy_with or 'another change'}); try again "
                                 "when it is done")
        self.busy_with = what
        try:
            if self._stopping:
                raise ActivationBusy("the agent is stopping")
            yield
        finally:
            self.busy_with = ""
            with self._turn:
                self._held = False
                self._turn.notify_all()

    def _acquire(self, timeout: float, *, stop_ends_wait: bool) -> bool:
        with self._turn:
            self._turn.wait_for(lambda: not self._held or (stop_ends_wait and self._stopping),
                                max(timeout, 0.0))
            if self._held:
                return False
            self._held = True
            return True

    def stop(self, wait_s: float) -> None:
        """No activation after this; waits up to `wait_s` for one in progress, then keeps the lock."""
        with self._starting:
            self._stopping = True
        with self._turn:
            self._turn.notify_all()  # a caller waiting for its turn gives up now
        if self._acquire(wait_s, stop_ends_wait=False):
            self.busy_with = "stopping"

    # --- start-up ------------------------------------------------------------------------------------------

    def load_active(self) -> str | None:
        """At start: serve the store's active version (verified again, no self-tests: it passed them when it
        was activated). Without one, or when it does not load, the agent stays up in state FAILED with the
        reason, for an operator to activate another version remotely. Returns the version served."""
        assert self.worker is not None
        try:
            with self.exclusive("loading the active version at start"):
                return on_own_thread(self._load_active)
        except ActivationBusy:  # stopped before it began
            self.worker.loaded.set()  # the load attempt is over (start_agent waits for this)
            return None

    def _load_active(self) -> str | None:
        assert self.worker is not None
        version: str | None = None
        try:
            version = self.store.active()
            if version is None:
                log.warning("no_active_model_version", store=str(self.store.root))
                self._fail(NO_ACTIVE_VERSION)
                return None
            log.info("activation_step", version=version, step="verify", at_start=True)
            installed = self.store.installed(version, self.base_options, verify=True)
            log.info("activation_step", version=version, step="load", at_start=True)
            pipeline = open_installed(installed, self.device, self.cpu_threads, self.lanes, self.precision)
            self.worker.warm(pipeline)  # never raises: a plan it cannot record is recorded on demand
            # ActivationBusy when the agent began to stop meanwhile
            self._install(pipeline, installed)
        except ActivationBusy:  # stopping: the worker never starts; the state stays the stop's
            log.info("active_version_not_loaded", version=version, reason="the agent is stopping")
            self.worker.loaded.set()
            return None
        except SignatureError as exc:  # [models] trusted_keys changed since it was activated
            assert version is not None
            return self._serve_trusted_instead(version, exc)
        except Exception as exc:  # noqa: BLE001 - whatever it is, the agent stays up to be fixed remotely
            log.error("active_version_failed_to_load", version=version, error=f"{type(exc).__name__}: {exc}")
            what = f"active model version {version}" if version else "the store's active model version"
            self._fail(f"cannot load {what}: {exc}; activate another version "
                       "(vkocr fleet rollout, or Models.Activate) or upload a new bundle")
            return None
        return version

    def _serve_trusted_instead(self, untrusted: str, why: SignatureError) -> str | None:
        """At start, when the active version's signer is no longer trusted: activate the newest stored version
        (the last added) whose signer is, as any activation (verified, self-tested, recorded as active; older
        than the high-water mark only because the operator's change of keys left nothing newer), and say so
        in the state's reason. With none, FAILED with the reason."""
        assert self.worker is not None
        log.warning("active_version_untrusted", version=untrusted, reason=str(why))
        for info in self.store.versions():
            if info.version == untrusted or info.signer not in self.store.trusted:
                continue
            try:
                self._activate(info.version, rollback=False, allow_downgrade=True, who="start-up: trusted keys")
            except (ActivationFailed, VersionNotFound) as exc:
                log.warning("trusted_version_not_served", version=info.version, reason=str(exc))
                continue
            reason = (f"serving {info.version}, the newest stored version signed by a trusted key: the active "
                      f"version {untrusted} is no longer signed by one ({why})")
            log.warning("serving_trusted_version", version=info.version, untrusted=untrusted, reason=reason)
            self.state.set(reason=reason)
            return info.version
        self._fail(f"not serving: {why}, and no other stored version is signed by a trusted key; upload a bundle "
                   "signed by one of [models] trusted_keys, or trust its signer again and restart")
        return None

    def _fail(self, reason: str) -> None:
        assert self.worker is not None
        self.state.set(state=ServingState.FAILED, reason=reason, model_version="")
        self.worker.loaded.set()  # the load attempt is over (start_agent waits for this)

    # --- activation ----------------------------------------------------------------------------------------

    def activate(self, version: str, *, rollback: bool = False, allow_downgrade: bool = False,
                 who: str = "") -> Activated:
        """Stage `version` (see the module's docstring) and make it the one served. Blocking: call it from a
        thread. ActivationBusy when another is in progress; ActivationFailed when a step failed;
        DowngradeRefused when `version` is older than the store's high-water mark and neither `rollback` nor
        `allow_downgrade` says the operator wants that."""
        what = "rollback" if rollback else "activation"
        with self.exclusive(f"{what} of {version} in progress"):
            return on_own_thread(lambda: self._activate(version, rollback=rollback, allow_downgrade=allow_downgrade,
                                                        who=who))

    def rollback(self, who: str = "") -> Activated:
        """Activate the version active before the current one, staged the same way."""
        with self.exclusive("rollback in progress"):
            target = self.store.rollback_target()
            return on_own_thread(lambda: self._activate(target, rollback=True, allow_downgrade=True, who=who))

    def _activate(self, version: str, *, rollback: bool, allow_downgrade: bool, who: str) -> Activated:
        assert self.worker is not None
        current = self.store.active()
        started = time.monotonic()
        kind = "rollback" if rollback else "activation"
        downgrade = rollback or allow_downgrade
        log.info("activation_started", version=version, active=current, rollback=rollback,
                 allow_downgrade=allow_downgrade, who=who)
        if version == current and self.worker.started and self.worker.model_version == version \
                and self.state.serving:
            log.info("activation_unchanged", version=version)
            return Activated(version, current)
        try:  # before any step: an old bundle costs nothing (VersionNotFound when it is not stored)
            self.store.check_downgrade(version, allow_downgrade=downgrade)
        except DowngradeRefused as exc:
            log.warning("activation_downgrade_refused", version=version, active=current, reason=str(exc), who=who)
            raise
        keep = f"version {current} is still active" if current else "no version is active"

        def failed(step: str, why: str, cause: BaseException | None = None,
                   tests: tuple[SelfTestOutcome, ...] = ()) -> ActivationFailed:
            log.error("activation_failed", version=version, step=step, reason=why, rollback=rollback,
                      active=current)
            return ActivationFailed(step, f"{kind} of {version} failed at {step}: {why}; {keep}", cause=cause,
                                    self_tests=tests)

        log.info("activation_step", version=version, step="verify")
        try:
            installed = self.store.installed(version, self.base_options, verify=True)
        except VersionNotFound:
            raise
        except BundleError as exc:
            raise failed("verify", str(exc), exc) from exc
        log.info("activation_step", version=version, step="load", device=self.device or "default")
        try:
            pipeline = open_installed(installed, self.device, self.cpu_threads, self.lanes, self.precision)
        except Exception as exc:
            raise failed("load", f"{type(exc).__name__}: {exc}", exc) from exc
        try:
            log.info("activation_step", version=version, step="self_tests", count=len(installed.self_tests))
            if not installed.self_tests:
                log.warning("activation_without_self_tests", version=version)
            outcomes = run_self_tests(pipeline, installed)
            bad = [o for o in outcomes if not o.passed]
            if bad:
                raise failed("self_tests", f"{len(bad)} of {len(outcomes)} self-test(s) failed: "
                             + "; ".join(o.describe() for o in bad), tests=outcomes)
            log.info("activation_step", version=version, step="warm", sizes=len(self.worker.warm_sizes))
            self.worker.warm(pipeline)  # the old version serves meanwhile; never raises
            if self._stopping:
                raise failed("swap", "the agent is stopping")
        except BaseException:
            pipeline.close()
            raise
        log.info("activation_step", version=version, step="swap")
        self._install(pipeline, installed)
        log.info("activation_step", version=version, step="record")
        try:
            previous = self.store.set_active(installed.version, rollback=rollback, allow_downgrade=downgrade)
        except (BundleError, OSError) as exc:
            raise failed("record", f"version {version} serves now, but the store's active pointer could not "
                         f"be written ({exc}); after a restart {current} would serve: fix the disk and "
                         f"activate {version} again", exc) from exc
        log.info("activation_succeeded", version=version, previous=previous, rollback=rollback, who=who,
                 self_tests=len(outcomes), ms=round((time.monotonic() - started) * 1e3))
        return Activated(version, previous, outcomes)

    def _install(self, pipeline: OcrPipeline, installed: InstalledVersion) -> None:
        """Make `pipeline` the one served (starting the worker with it, or swapping it in) and wait until the
        worker serves it. Owns `pipeline` from the call on: closed here when it never reaches the worker; once
        handed over it is the worker's to close (also when the swap is abandoned after SWAP_TIMEOUT_S)."""
        worker = self.worker
        assert worker is not None
        version = installed.version
        first = not worker.started
        try:
            with self._starting:
                if self._stopping and not worker.started:  # a stopping agent never starts its worker later
                    raise ActivationBusy("the agent is stopping")
                self._offered = {**self._offered, version: installed}
                done = worker.install(pipeline, version)
        except BaseException:
            pipeline.close()
            self._settle_offers()
            raise
        try:
            self._wait_installed(done, version, first)
        finally:
            self._settle_offers()
        if self.on_swap is not None:
            self.on_swap(version, pipeline.options)

    def _wait_installed(self, done: Future[OcrPipeline], version: str, first: bool) -> None:
        assert self.worker is not None
        try:
            done.result(SWAP_TIMEOUT_S)
            return
        except FutureTimeout as exc:
            if not done.cancel():  # the worker began it meanwhile: it happens
                done.result()
                return
            # Cancelled: the worker closes the pipeline when it meets the message instead of serving it, so
            # the version served and the store's active pointer stay as they were.
            if first:
                raise ActivationFailed("swap", "the GPU worker did not start serving the new version",
                                       cause=exc) from exc
            served = self.worker.model_version or "no version"
            log.error("activation_swap_timed_out", version=version, serving=served, timeout_s=SWAP_TIMEOUT_S)
            raise ActivationFailed(
                "swap", f"activation of {version} failed at swap: the GPU worker did not take it within "
                f"{SWAP_TIMEOUT_S:.0f} s (a request or a device recovery held it); the swap was abandoned, "
                f"{served} still serves and the store's active version is unchanged", cause=exc) from exc

    def _settle_offers(self) -> None:
        """Forget the versions handed over that the worker does not serve."""
        assert self.worker is not None
        serving = self.worker.model_version
        self._offered = {v: i for v, i in self._offered.items() if v == serving}
