"""Streams pumping frames as fast as they can do not starve single requests (issue 38): the queue serves its
callers in turn and holds at most `stream_queued` requests of one stream at the GPU, so single requests get
their share of the answers. Counts decide, not time. A real agent on loopback (lavapipe, recognition only)."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator

import grpc
import pytest

from tests.agent.agents import FONT, REC_ONLY, agent_config, frame, word_png
from vkocr.agent.serving.background import BackgroundAgent, start_agent
from vkocr.v1 import ocr_pb2, ocr_pb2_grpc

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

STREAMS, SINGLES = 2, 2
SINGLE_ANSWERS = 8  # the run ends once single requests got this many answers (or after the time below)
GIVE_UP_S = 120.0


@pytest.fixture(scope="module")
def agent() -> Iterator[BackgroundAgent]:
    background = start_agent(agent_config(**{"server.queue_size": 4, "server.stream_queued": 1,
                                             "server.retry_after_s": 0.05}))
    try:
        yield background
    finally:
        background.stop(5)


def test_streams_pumping_frames_leave_single_requests_their_share(agent: BackgroundAgent) -> None:
    image = word_png("LOT0042")
    answers: Counter[str] = Counter()
    refused = Counter[str]()
    done = threading.Event()

    def stream(i: int) -> None:
        def frames() -> Iterator[ocr_pb2.RecognizeStreamRequest]:
            for n in itertools.count():
                if done.is_set():
                    return
                yield frame(ocr_pb2.RecognizeRequest(request_id=f"s{i}-{n}", encoded=image, options=REC_ONLY))

        with grpc.insecure_channel(agent.target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            call = ocr_pb2_grpc.OcrServiceStub(channel).RecognizeStream(frames(), timeout=GIVE_UP_S + 60)
            for answer in call:
                if done.is_set():  # answers after the singles' last are not counted
                    call.cancel()
                    return
                assert answer.WhichOneof("outcome") == "response", answer.error
                answers["streams"] += 1

    def single(i: int) -> None:
        with grpc.insecure_channel(agent.target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            ocr = ocr_pb2_grpc.OcrServiceStub(channel)
            while not done.is_set():
                try:
                    ocr.Recognize(ocr_pb2.RecognizeRequest(encoded=image, options=REC_ONLY), timeout=60)
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc.details()
                    refused["singles"] += 1
                    time.sleep(0.05)  # the agent's retry hint
                    continue
                if not done.is_set():
                    answers["singles"] += 1
                if answers["singles"] >= SINGLE_ANSWERS:
                    done.set()

    workers = [threading.Thread(target=stream, args=(i,)) for i in range(STREAMS)]
    workers += [threading.Thread(target=single, args=(i,)) for i in range(SINGLES)]
    for worker in workers:
        worker.start()
    done.wait(GIVE_UP_S)
    done.set()
    for worker in workers:
        worker.join(120)
    total = answers["singles"] + answers["streams"]
    # 2 streams and 2 single-request clients: in turn, each caller gets about a quarter; the singles half
    assert answers["singles"] >= SINGLE_ANSWERS, (answers, refused)
    assert answers["singles"] >= total / 4, (answers, refused)
