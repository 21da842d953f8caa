"""A stream answers every frame, against a real agent on loopback (lavapipe): a frame that does not parse, or is
refused, gets its own answer in order (its request id and a google.rpc.Status), the frames after it are answered
as usual, and the stream ends OK; health and status answer within 1 s throughout."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from google.rpc import code_pb2

from tests.agent.agents import FONT, REC_ONLY, frame, running_agent, word_png
from tests.agent.hostile import health_watched, status_violations
from vkocr.agent.serving.background import BackgroundAgent
from vkocr.v1 import ocr_pb2, ocr_pb2_grpc

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

GOOD = word_png("LOT0042")


@pytest.fixture(scope="module")
def agent() -> Iterator[BackgroundAgent]:
    with running_agent(**{"device.select": "llvmpipe"}) as background:
        yield background


@pytest.fixture(scope="module")
def channel(agent: BackgroundAgent) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(agent.target) as chan:
        yield chan


def good(request_id: str) -> ocr_pb2.RecognizeRequest:
    return ocr_pb2.RecognizeRequest(request_id=request_id, encoded=GOOD, options=REC_ONLY)


def test_garbage_frame_mid_stream_gets_its_own_answer(agent: BackgroundAgent, channel: grpc.Channel) -> None:
    # valid, garbage, cut short, valid: the garbage's request starts with id "s-2", then is no protobuf at all;
    # the frame cut short says its request is 64 bytes and ends after the id "s-3"
    garbage = b"\x0a\x03s-2\xff\xff\xff\x07"
    frames = [frame(good("s-1")).SerializeToString(), b"\x0a" + bytes([len(garbage)]) + garbage,
              b"\x0a\x40\x0a\x03s-3", frame(good("s-4")).SerializeToString()]
    stream = channel.stream_stream("/vkocr.v1.OcrService/RecognizeStream", request_serializer=None,
                                   response_deserializer=ocr_pb2.RecognizeStreamResponse.FromString)
    with health_watched(agent.target):
        call = stream(iter(frames), timeout=120)
        answers = list(call)
    assert [a.request_id for a in answers] == ["s-1", "s-2", "s-3", "s-4"]
    first, *middle, last = answers
    assert [line.text for line in first.response.lines] == ["LOT0042"] and not first.HasField("error")
    assert [line.text for line in last.response.lines] == ["LOT0042"] and not last.HasField("error")
    for broken in middle:
        assert broken.error.code == code_pb2.INVALID_ARGUMENT and not broken.HasField("response")
        assert [(v.field, v.reason) for v in status_violations(broken.error)] == [("request", "malformed")]
    assert call.code() == grpc.StatusCode.OK


def test_refused_frames_are_answered_in_order_and_the_stream_goes_on(agent: BackgroundAgent,
                                                                      channel: grpc.Channel) -> None:
    refused = {
        "bad-option": ocr_pb2.RecognizeRequest(request_id="bad-option", encoded=GOOD,
                                               options=ocr_pb2.Options(unclip_ratio=float("nan"))),
        "bad-image": ocr_pb2.RecognizeRequest(request_id="bad-image", encoded=b"GIF89a not really"),
        "no-image": ocr_pb2.RecognizeRequest(request_id="no-image"),
        "bad-plugin": ocr_pb2.RecognizeRequest(request_id="bad-plugin", encoded=GOOD, options=ocr_pb2.Options(
            plugins=ocr_pb2.PluginSelection(names=["no_such_plugin"]))),
    }
    fields = {"bad-option": "options.unclip_ratio", "bad-image": "image", "no-image": "image",
              "bad-plugin": "options.plugins.names"}
    requests = [good("g-1"), *refused.values(), good("g-2")]
    with health_watched(agent.target):
        call = ocr_pb2_grpc.OcrServiceStub(channel).RecognizeStream((frame(r) for r in requests), timeout=120)
        answers = list(call)
    assert [a.request_id for a in answers] == [r.request_id for r in requests]
    for answer in answers[1:-1]:
        assert answer.error.code == code_pb2.INVALID_ARGUMENT, answer.request_id
        assert [v.field for v in status_violations(answer.error)] == [fields[answer.request_id]]
    assert [[line.text for line in a.response.lines] for a in (answers[0], answers[-1])] == [["LOT0042"]] * 2
    assert call.code() == grpc.StatusCode.OK


def test_a_frame_with_an_overlong_id_is_answered_with_the_first_part_of_it(channel: grpc.Channel) -> None:
    long_id = "L" * 5000
    requests = [ocr_pb2.RecognizeRequest(request_id=long_id, encoded=GOOD, options=REC_ONLY), good("after")]
    answers = list(ocr_pb2_grpc.OcrServiceStub(channel).RecognizeStream((frame(r) for r in requests), timeout=120))
    assert [len(a.request_id) for a in answers] == [256, 5]
    assert long_id.startswith(answers[0].request_id)
    assert [v.field for v in status_violations(answers[0].error)] == ["request_id"]
    assert [line.text for line in answers[1].response.lines] == ["LOT0042"]


def test_an_idle_stream_is_ended_and_the_agent_serves_on() -> None:
    """A stream that answers its frame, then sends nothing for [server] stream_idle_s, is ended with
    DEADLINE_EXCEEDED (it would hold its slot for ever); one waiting on its answer is not idle."""
    with (running_agent(**{"device.select": "llvmpipe", "server.stream_idle_s": 1.0}) as background,
          grpc.insecure_channel(background.target) as chan):
        stub = ocr_pb2_grpc.OcrServiceStub(chan)
        sent_all = threading.Event()

        def frames() -> Iterator[ocr_pb2.RecognizeStreamRequest]:
            yield frame(good("idle-1"))  # answered after the idle time has passed once: the answer was due
            sent_all.wait(60)  # then nothing, until the agent gives up on the stream

        started = time.monotonic()
        call = stub.RecognizeStream(frames(), timeout=120)
        answers = []
        with pytest.raises(grpc.RpcError) as err:
            for answer in call:
                answers.append(answer)
        sent_all.set()
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, err.value
        assert "stream_idle_s" in (err.value.details() or "")
        assert [a.request_id for a in answers] == ["idle-1"]
        assert [line.text for line in answers[0].response.lines] == ["LOT0042"]
        assert time.monotonic() - started < 60
        after = stub.Recognize(good("after"), timeout=120)
        assert [line.text for line in after.lines] == ["LOT0042"]
