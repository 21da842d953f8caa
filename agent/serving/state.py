"""The agent's serving state, shared by the GPU worker (which changes it) and the health and status services
(which stream it). Listeners are called on every change, from the thread that made it."""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace


class ServingState(enum.Enum):
    """The values of vkocr.v1.ServingState (status.proto), by name."""

    LOADING = "LOADING"
    SERVING = "SERVING"
    REBUILDING = "REBUILDING"
    DRAINING = "DRAINING"
    FAILED = "FAILED"


@dataclass(frozen=True)
class StateSnapshot:
    state: ServingState
    reason: str
    device: str
    backend: str
    model_version: str
    device_rebuilds: int
    backend_reason: str = ""  # why this backend serves (a GPU chosen by rank, the CPU for want of one, a name)
    precision: str = ""  # the storage precision that serves (fp32, fp16; agent/ocr/precision.py)
    precision_reason: str = ""


Listener = Callable[[StateSnapshot], None]


class StateBoard:
    """The current serving state; set() notifies listeners only when something changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = StateSnapshot(ServingState.LOADING, "loading models", "", "", "", 0)
        self._listeners: list[Listener] = []
        self.started = time.monotonic()

    def get(self) -> StateSnapshot:
        with self._lock:
            return self._snapshot

    def set(self, **changes: object) -> StateSnapshot:
        with self._lock:
            before = self._snapshot
            self._snapshot = replace(before, **changes)  # type: ignore[arg-type]  # fields by name, checked by replace
            after, listeners = self._snapshot, list(self._listeners)
        if after != before:
            for listener in listeners:
                listener(after)
        return after

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` on every change; returns the function that unsubscribes it."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    @property
    def serving(self) -> bool:
        return self.get().state is ServingState.SERVING

    def uptime_s(self) -> float:
        return time.monotonic() - self.started
