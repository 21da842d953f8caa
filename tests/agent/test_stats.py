"""RequestStats: sliding-window latency percentiles over successes, totals, in-flight, under an injected clock."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vkocr.agent.serving.stats import RequestStats, StatsSnapshot


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_percentiles_are_linear_over_successes_and_errors_only_count() -> None:
    clock = FakeClock()
    stats = RequestStats(window_s=60.0, clock=clock)
    for ms in (40, 10, 30, 20):
        stats.record(ms / 1e3, ok=True)
    stats.record(5.0, ok=False)  # a slow failure: counted, never a latency sample
    snap = stats.snapshot()
    # linear interpolation over [10, 20, 30, 40]: p50 = 25, p99 = 30 + 0.97 * 10
    assert snap.p50_ms == pytest.approx(25.0)
    assert snap.p99_ms == pytest.approx(39.7)
    assert snap == StatsSnapshot(snap.p50_ms, snap.p99_ms, 60.0, 4, 5, 1, 0, 0)


def test_window_forgets_old_samples_but_totals_stay() -> None:
    clock = FakeClock()
    stats = RequestStats(window_s=10.0, clock=clock)
    stats.record(0.100, ok=True)
    stats.record(0.200, ok=True)
    clock.t += 6.0
    stats.record(0.002, ok=True)
    stats.record(0.004, ok=True)
    assert stats.snapshot().window_count == 4
    clock.t += 4.5  # the first two are now 10.5 s old, the last two 4.5 s
    snap = stats.snapshot()
    assert snap.window_count == 2
    assert snap.p50_ms == pytest.approx(3.0)
    assert snap.p99_ms == pytest.approx(2.0 + 0.99 * 2.0)
    clock.t += 60.0
    snap = stats.snapshot()
    assert (snap.p50_ms, snap.p99_ms, snap.window_count) == (0.0, 0.0, 0)
    assert snap.requests_total == 4 and snap.errors_total == 0


def test_max_samples_keeps_the_newest() -> None:
    clock = FakeClock()
    stats = RequestStats(window_s=60.0, clock=clock, max_samples=3)
    for ms in (900, 800, 1, 2, 3):
        stats.record(ms / 1e3, ok=True)
    snap = stats.snapshot()
    assert snap.window_count == 3 and snap.requests_total == 5
    assert snap.p50_ms == pytest.approx(2.0)
    assert snap.p99_ms == pytest.approx(2.0 + 0.98 * 1.0)


def test_rejected_and_in_flight() -> None:
    stats = RequestStats(clock=FakeClock())
    stats.rejected()
    stats.record(0.0001, ok=False)  # the refusal's RESOURCE_EXHAUSTED answer
    stats.started()
    with stats.track():
        assert stats.in_flight == 2
        assert stats.snapshot().in_flight == 2
    with pytest.raises(KeyError), stats.track():
        raise KeyError("the request failed")
    assert stats.in_flight == 1
    stats.finished()
    snap = stats.snapshot()
    assert (snap.rejected_total, snap.errors_total, snap.requests_total, snap.in_flight) == (1, 1, 1, 0)
    with pytest.raises(RuntimeError, match="without a matching started"):
        stats.finished()


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="window_s"):
        RequestStats(window_s=0.0)
    with pytest.raises(ValueError, match="max_samples"):
        RequestStats(max_samples=0)


def test_concurrent_recording_loses_nothing() -> None:
    stats = RequestStats(clock=FakeClock())
    threads_n, per_thread = 8, 2000

    def work(k: int) -> None:
        for i in range(per_thread):
            with stats.track():
                stats.record((k * per_thread + i + 1) / 1e6, ok=i % 10 != 0)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = stats.snapshot()
    assert snap.requests_total == threads_n * per_thread
    assert snap.errors_total == threads_n * per_thread // 10
    assert snap.window_count == snap.requests_total - snap.errors_total and snap.in_flight == 0
    expected = [(k * per_thread + i + 1) / 1e3 for k in range(threads_n) for i in range(per_thread) if i % 10]
    assert snap.p50_ms == pytest.approx(float(np.percentile(expected, 50)))


events = st.lists(
    st.tuples(st.floats(0.0, 30.0), st.floats(1e-5, 10.0), st.booleans()), min_size=0, max_size=60
)


@settings(max_examples=150, deadline=None)
@given(events=events, window_s=st.floats(0.5, 100.0), max_samples=st.integers(1, 20))
def test_snapshot_matches_a_naive_recount(
    events: list[tuple[float, float, bool]], window_s: float, max_samples: int
) -> None:
    clock = FakeClock(0.0)
    stats = RequestStats(window_s=window_s, clock=clock, max_samples=max_samples)
    log: list[tuple[float, float]] = []
    for dt, latency, ok in events:
        clock.t += dt
        stats.record(latency, ok)
        if ok:
            log.append((clock.t, latency))
    snap = stats.snapshot()
    kept = [s for t, s in log[-max_samples:] if t >= clock.t - window_s]
    assert snap.window_count == len(kept)
    assert snap.requests_total == len(events)
    assert snap.errors_total == sum(not ok for _, _, ok in events)
    if kept:
        p50, p99 = np.percentile(kept, [50, 99]) * 1e3
        assert snap.p50_ms == pytest.approx(p50) and snap.p99_ms == pytest.approx(p99)
        assert min(kept) * 1e3 <= snap.p50_ms <= snap.p99_ms <= max(kept) * 1e3 * (1 + 1e-12)
    else:
        assert snap.p50_ms == snap.p99_ms == 0.0
