"""What the hostile-client tests share: a watcher that asks health and status all along and times each answer,
raw calls that send bytes no stub would, and reading a refusal's details."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from vkocr.v1 import status_pb2 as agent_status_pb2
from vkocr.v1 import status_pb2_grpc

ANSWER_WITHIN_S = 1.0  # DESIGN.md: health and status answer within 1 s under any request


@dataclass
class Watch:
    """Health checks and status reads made while a hostile request ran: the slowest, and what went wrong."""

    checks: int = 0
    slowest_s: float = 0.0
    failures: list[str] = field(default_factory=list)

    def assert_answered_in_time(self) -> None:
        assert self.checks >= 2, "the watcher made too few checks to say anything"
        assert not self.failures, self.failures
        assert self.slowest_s < ANSWER_WITHIN_S, f"slowest health/status answer took {self.slowest_s:.2f} s"


@contextmanager
def health_watched(target: str, every_s: float = 0.05) -> Iterator[Watch]:
    """Ask Health.Check and Status.Get on their own channel every `every_s` until the block ends; on leaving,
    assert each was answered (health SERVING) within ANSWER_WITHIN_S."""
    watch = Watch()
    done = threading.Event()

    def poll() -> None:
        with grpc.insecure_channel(target) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            status = status_pb2_grpc.StatusServiceStub(channel)
            while not done.is_set():
                started = time.monotonic()
                try:
                    answer = health.Check(health_pb2.HealthCheckRequest(), timeout=ANSWER_WITHIN_S * 5)
                    status.GetStatus(agent_status_pb2.GetStatusRequest(), timeout=ANSWER_WITHIN_S * 5)
                    if answer.status != health_pb2.HealthCheckResponse.SERVING:
                        watch.failures.append(f"health said {answer.status}")
                except grpc.RpcError as exc:
                    watch.failures.append(f"health/status failed: {exc.code()}")
                watch.slowest_s = max(watch.slowest_s, (time.monotonic() - started) / 2)
                watch.checks += 1
                done.wait(every_s)

    poller = threading.Thread(target=poll, name="health-watch", daemon=True)
    poller.start()
    try:
        time.sleep(every_s * 2)  # a check before the hostile request, too
        yield watch
        time.sleep(every_s * 2)  # and after it
    finally:
        done.set()
        poller.join(10)
    watch.assert_answered_in_time()


def raw_unary(channel: grpc.Channel, method: str, data: bytes, timeout: float = 30) -> bytes:
    """Send `data` as the request of a unary `method` (``/pkg.Service/Method``): no serialisation at all."""
    call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    answer: bytes = call(data, timeout=timeout)
    return answer


def violations(err: grpc.RpcError) -> list[error_details_pb2.BadRequest.FieldViolation]:
    """The BadRequest field violations of a failed call (none when it carries no BadRequest)."""
    status = rpc_status.from_call(err)
    assert status is not None, f"no rich status in {err}"
    return status_violations(status)


def status_violations(status: status_pb2.Status) -> list[error_details_pb2.BadRequest.FieldViolation]:
    found = []
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            found.extend(bad.field_violations)
    return found


def length_delimited(number: int, payload: bytes) -> bytes:
    """A protobuf field of wire type 2 (bytes, string or message) by hand: requests protobuf would not build."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            low, n = n & 0x7F, n >> 7
            out.append(low | (0x80 if n else 0))
            if not n:
                return bytes(out)

    return varint(number << 3 | 2) + varint(len(payload)) + payload
