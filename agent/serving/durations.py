"""``google.protobuf.Duration`` ↔ the floats of milliseconds and seconds the agent measures in.

The wire carries times as Durations (exact nanoseconds, a unit no reader can mistake); the agent's timings,
statistics and the CLI's JSON stay floats of ms or s, named so.
"""

from __future__ import annotations

from google.protobuf import duration_pb2


def duration_from_s(seconds: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromNanoseconds(round(seconds * 1e9))
    return duration


def duration_from_ms(ms: float) -> duration_pb2.Duration:
    return duration_from_s(ms / 1e3)


def seconds_of(duration: duration_pb2.Duration) -> float:
    return duration.seconds + duration.nanos / 1e9


def ms_of(duration: duration_pb2.Duration) -> float:
    return seconds_of(duration) * 1e3
