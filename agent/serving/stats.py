"""Request statistics for the status service: latency percentiles over a sliding window, and totals.

Every answered request goes through `record()` once (its latency and whether it succeeded); a request refused
because the queue was full is answered too (RESOURCE_EXHAUSTED), so it goes through `record(..., ok=False)`
and, in addition, `rejected()`. Percentiles are taken over the successful requests of the last `window_s`
seconds, at most `max_samples` of them (the newest), with NumPy's default (linear) interpolation.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StatsSnapshot:
    """The numbers AgentStatus carries, taken at one instant."""

    p50_ms: float  # over the successful requests in the window; 0.0 when there are none
    p99_ms: float
    window_s: float
    window_count: int  # successful requests the percentiles are over
    requests_total: int  # answered since start, successes and failures
    errors_total: int  # answered with an error status
    rejected_total: int  # refused because the queue was full (also counted in the two above)
    in_flight: int  # accepted and not yet answered


class RequestStats:
    """Thread-safe counters and a time-bounded, size-bounded window of successful latencies."""

    def __init__(
        self, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic, max_samples: int = 100_000
    ) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        if max_samples < 1:
            raise ValueError(f"max_samples must be at least 1, got {max_samples}")
        self.window_s = float(window_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._samples: deque[tuple[float, float]] = deque(maxlen=max_samples)  # (clock time, latency_s)
        self._requests = 0
        self._errors = 0
        self._rejected = 0
        self._in_flight = 0

    def record(self, latency_s: float, ok: bool) -> None:
        """One answered request: its latency (only successes enter the window) and whether it succeeded."""
        with self._lock:
            now = self._clock()
            self._requests += 1
            if ok:
                self._samples.append((now, float(latency_s)))
            else:
                self._errors += 1
            self._trim(now)

    def rejected(self) -> None:
        """One request refused because the queue was full; its answer is counted by `record(..., ok=False)`."""
        with self._lock:
            self._rejected += 1

    def started(self) -> None:
        """A request was accepted; pair with `finished()` (or use `track()`)."""
        with self._lock:
            self._in_flight += 1

    def finished(self) -> None:
        """A request accepted by `started()` was answered."""
        with self._lock:
            if self._in_flight == 0:
                raise RuntimeError("finished() without a matching started()")
            self._in_flight -= 1

    @contextmanager
    def track(self) -> Iterator[None]:
        """In flight for the duration of the block, however it ends."""
        self.started()
        try:
            yield
        finally:
            self.finished()

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def snapshot(self) -> StatsSnapshot:
        with self._lock:
            self._trim(self._clock())
            latencies = np.fromiter((s for _, s in self._samples), dtype=np.float64, count=len(self._samples))
            counts = self._requests, self._errors, self._rejected, self._in_flight
        p50 = p99 = 0.0
        if latencies.size:
            p50, p99 = (float(v) * 1e3 for v in np.percentile(latencies, [50.0, 99.0]))
        return StatsSnapshot(p50, p99, self.window_s, int(latencies.size), *counts)

    def _trim(self, now: float) -> None:
        horizon = now - self.window_s
        samples = self._samples
        while samples and samples[0][0] < horizon:
            samples.popleft()
