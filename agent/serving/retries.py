"""Retrying an OCR call the agent refused for now, as its ``google.rpc.RetryInfo`` says.

The agent answers RESOURCE_EXHAUSTED (its queue is full) and UNAVAILABLE (loading, rebuilding, draining) with a
RetryInfo delay: a retry after it may succeed. A client that honours it waits at least that long, longer on each
further try (exponential backoff with jitter, so clients refused together do not come back together), for as
long as the call's own deadline allows: a slow board with a short queue frees a place in seconds, and a fixed
count of tries would give up before it does. Only a call without a deadline stops after a count of tries. A
failure without RetryInfo (a bad request, a connection that cannot be made) is never retried: only the agent
knows when a retry can help.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

T = TypeVar("T")
RETRYABLE = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE})


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts`: calls in all (1: no retry; None: as many as the call's deadline allows, and
    `attempts_without_deadline` for a call without one); each wait is the agent's delay or `base_s`·2^(retry-1),
    whichever is longer, at most `max_wait_s`, plus up to `jitter` of itself at random."""

    attempts: int | None = None
    attempts_without_deadline: int = 10
    base_s: float = 0.25
    max_wait_s: float = 5.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        for name, count in (("attempts", self.attempts), ("attempts_without_deadline", self.attempts_without_deadline)):
            if count is not None and count < 1:
                raise ValueError(f"retry {name} must be at least 1, got {count}")
        if not 0 <= self.base_s <= self.max_wait_s:
            raise ValueError(f"retry waits need 0 <= base_s <= max_wait_s, got {self.base_s}, {self.max_wait_s}")

    def wait_s(self, retry: int, hint_s: float, rng: random.Random) -> float:
        """How long to wait before retry number `retry` (1, 2, …) after the agent asked for `hint_s`."""
        wait = min(self.max_wait_s, max(hint_s, self.base_s * 2 ** (retry - 1)))
        return wait * (1 + self.jitter * rng.random())

    def most_attempts(self, deadline: float | None) -> int | None:
        """Calls in all for a call with this deadline (None: until the deadline)."""
        if self.attempts is not None:
            return self.attempts
        return None if deadline is not None else self.attempts_without_deadline


NO_RETRIES = RetryPolicy(attempts=1)  # `OcrClient(…, retries=NO_RETRIES)`: a refusal is raised at once


def retry_delay(err: grpc.RpcError) -> float | None:
    """The delay the agent's RetryInfo asks for, when `err` is a failure it says a retry may cure; else None."""
    if not isinstance(err, grpc.Call) or err.code() not in RETRYABLE:
        return None
    try:
        status = rpc_status.from_call(err)
    except ValueError:  # trailers that disagree with the call: no hint to trust
        return None
    for detail in status.details if status is not None else ():
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return max(0.0, info.retry_delay.ToTimedelta().total_seconds())
    return None


def call_with_retries(call: Callable[[float | None], T], timeout: float | None, policy: RetryPolicy, *,
                      rng: random.Random | None = None, sleep: Callable[[float], None] = time.sleep) -> T:
    """`call(timeout_left)` until it succeeds, fails for good, runs out of attempts or would wait past
    `timeout` (seconds for all the attempts together; None: no deadline). A backoff that would pass the
    deadline shrinks to the agent's own delay (at least `base_s`) when that still fits. The last failure is
    raised as it came."""
    rng = rng or random.Random()
    deadline = None if timeout is None else time.monotonic() + timeout
    most = policy.most_attempts(deadline)
    attempt = 0
    while True:
        attempt += 1
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return call(left)
        except grpc.RpcError as err:
            hint = retry_delay(err)
            if hint is None or attempt == most:
                raise
            wait = policy.wait_s(attempt, hint, rng)
            if deadline is not None and time.monotonic() + wait >= deadline:
                wait = max(hint, policy.base_s)  # never a busy loop, even when the agent asks for no wait
                if time.monotonic() + wait >= deadline:
                    raise
            sleep(wait)
