"""``google.protobuf.Duration`` ↔ the floats of milliseconds and seconds the agent measures in.

The wire carries times as Durations (whole nanoseconds, a unit no reader can mistake); the agent's timings,
statistics and the CLI's JSON stay floats of ms or s, named so.
"""

from __future__ import annotations

from google.protobuf import duration_pb2


def duration_from_s(seconds: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromNanoseconds(round(seconds * 1e9))
    return duration


def duration_from_ms(ms: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromNanoseconds(round(ms * 1e6))
    return duration


def seconds_of(duration: duration_pb2.Duration) -> float:
    return duration.ToNanoseconds() / 1e9


def ms_of(duration: duration_pb2.Duration) -> float:
    return duration.ToNanoseconds() / 1e6
