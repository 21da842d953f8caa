"""Every refusal its own code and field (issue 38, round two of the hostile-network tests), against a real agent on
loopback (lavapipe): an option that would shrink an image to nothing is named, status watches past their limit
per connection are RESOURCE_EXHAUSTED with the limit, and a deadline that passes in the queue is logged as the
deadline, not as the client."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import duration_pb2
from structlog.testing import capture_logs

from tests.agent.agents import FONT, REC_ONLY, agent_config, wait_for, white_png, word_png
from tests.agent.hostile import violations
from vkocr.agent.serving.background import BackgroundAgent, start_agent
from vkocr.v1 import ocr_pb2, ocr_pb2_grpc, status_pb2, status_pb2_grpc

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

STREAMS_PER_CONNECTION = 8  # so status watches are limited to 4 per connection


@pytest.fixture(scope="module")
def agent() -> Iterator[BackgroundAgent]:
    background = start_agent(agent_config(**{"server.max_streams_per_connection": STREAMS_PER_CONNECTION}))
    try:
        yield background
    finally:
        background.stop(5)


def test_max_side_len_that_leaves_no_pixels_is_named(agent: BackgroundAgent) -> None:
    """200x64 with max_side_len=32 would be resized to 32x0: the option asked for it, not the image."""
    with grpc.insecure_channel(agent.target) as channel:
        ocr = ocr_pb2_grpc.OcrServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            small = ocr_pb2.RecognizeRequest(encoded=white_png(200, 64), options=ocr_pb2.Options(max_side_len=32))
            ocr.Recognize(small, timeout=60)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
        assert [v.field for v in violations(caught.value)] == ["options.max_side_len"], caught.value.details()
        assert "max_side_len=32" in (caught.value.details() or "")


def test_status_watches_past_the_limit_are_resource_exhausted(agent: BackgroundAgent) -> None:
    limit = STREAMS_PER_CONNECTION // 2
    interval = duration_pb2.Duration(seconds=5)
    with grpc.insecure_channel(agent.target) as channel:
        status = status_pb2_grpc.StatusServiceStub(channel)
        watches = [status.WatchStatus(status_pb2.WatchStatusRequest(interval=interval), timeout=60)
                   for _ in range(limit)]
        for watch in watches:
            next(watch)  # each is open and answering
        for _ in range(3):
            extra = status.WatchStatus(status_pb2.WatchStatusRequest(interval=interval), timeout=60)
            with pytest.raises(grpc.RpcError) as caught:
                next(extra)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value.details()
            assert f"at most {limit} per connection" in (caught.value.details() or "")
        # the connection still serves other calls, and another connection has watches of its own
        assert status.GetStatus(status_pb2.GetStatusRequest(), timeout=10).status.state
        # (a channel of its own subchannel pool: channels of one process otherwise share one connection)
        with grpc.insecure_channel(agent.target, options=[("grpc.use_local_subchannel_pool", 1)]) as other:
            assert next(status_pb2_grpc.StatusServiceStub(other).WatchStatus(
                status_pb2.WatchStatusRequest(interval=interval), timeout=60)).status.state
        watches[0].cancel()

        def room_again() -> bool:  # a closed watch makes room, once the server has seen it close
            if len(watches) > limit:
                return True  # (wait_for asks once more after the answer)
            watch = status.WatchStatus(status_pb2.WatchStatusRequest(interval=interval), timeout=60)
            try:
                next(watch)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc.details()
                return False
            watches.append(watch)
            return True

        wait_for(room_again, 30)
        for watch in watches[1:]:
            watch.cancel()


def test_deadline_passed_in_the_queue_is_logged_as_the_deadline(agent: BackgroundAgent) -> None:
    worker = agent.agent.worker
    with grpc.insecure_channel(agent.target) as channel, capture_logs() as logs:
        ocr = ocr_pb2_grpc.OcrServiceStub(channel)
        with worker.held():  # the request waits in the queue until its deadline passes
            late = ocr.Recognize.future(ocr_pb2.RecognizeRequest(request_id="late", encoded=word_png("LOT0042"),
                                                                 options=REC_ONLY), timeout=1.0)
            with pytest.raises(grpc.RpcError) as caught:
                late.result()
            assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            wait_for(lambda: any(e.get("request_id") == "late" and e["event"] == "request" for e in logs), 30)
        wait_for(lambda: any(e.get("request_id") == "late" and e["event"] == "request_dropped" for e in logs), 30)
    mine = [e for e in logs if e.get("request_id") == "late"]
    answered = next(e for e in mine if e["event"] == "request")
    assert answered["status"] == "DEADLINE_EXCEEDED", mine
    dropped = next(e for e in mine if e["event"] == "request_dropped")
    assert dropped["who"] == "deadline", mine
    # The client's deadline passes first (the agent's starts when the call arrives): its cancellation, which
    # can reach the agent a few ms before the agent's own deadline, is the deadline's too.
    ocr_service = agent.agent.ocr
    assert ocr_service is not None
    assert ocr_service._who_cancelled(time.monotonic() + 0.01) == "deadline"
    assert ocr_service._who_cancelled(time.monotonic() + 5) == "client"
