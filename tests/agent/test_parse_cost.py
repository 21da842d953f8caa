"""Requests that would cost much to parse are refused from their bytes, before protobuf parses them on the event
loop (agent/serving/wire_precheck.py): plugin options of hundreds of thousands of empty keys, alone or merged
from several occurrences, and options with more fields than any client sends. Health answers within 1 s on both
ports while 8 such requests arrive at once (measured with 32 in the README's Limits). A real agent on loopback."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.agent.agents import FONT, REC_ONLY, agent_config, frame, word_png
from tests.agent.hostile import ANSWER_WITHIN_S, health_watched, length_delimited, raw_unary, violations
from vkocr.agent.errors import RequestError
from vkocr.agent.serving.admission import MAX_PLUGIN_OPTIONS_BYTES
from vkocr.agent.serving.background import BackgroundAgent, start_agent
from vkocr.agent.serving.wire_precheck import MAX_FIELDS, check_recognize_request, check_stream_frame
from vkocr.v1 import ocr_pb2, ocr_pb2_grpc

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

GOOD = word_png("LOT0042")


def struct_of_empty_keys(count: int, first: int = 0) -> bytes:
    """A google.protobuf.Struct of `count` keys (from `first`) with empty string values, written directly
    (fields = 1: a map entry of key = 1 and a Value whose string_value = 3 is empty)."""
    empty_value = length_delimited(2, b"\x1a\x00")
    return b"".join(length_delimited(1, length_delimited(1, f"{i:x}".encode()) + empty_value)
                    for i in range(first, first + count))


def request_with_plugin_options(*structs: bytes) -> bytes:
    """A RecognizeRequest whose options = 4 carries plugins = 16 with options = 2, once per struct (protobuf
    merges them all into one Struct)."""
    base = ocr_pb2.RecognizeRequest(request_id="costly", encoded=GOOD, options=REC_ONLY).SerializeToString()
    names = length_delimited(1, b"regex_fields")
    return base + b"".join(length_delimited(4, length_delimited(16, names + length_delimited(2, struct)))
                           for struct in structs)


@contextmanager
def health_port_watched(target: str) -> Iterator[None]:
    """Health.Check on the health-only port every 50 ms while the block runs: each answered within 1 s."""
    slowest: list[float] = []
    done = threading.Event()

    def poll() -> None:
        with grpc.insecure_channel(target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while not done.is_set():
                started = time.monotonic()
                stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
                slowest.append(time.monotonic() - started)
                done.wait(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        yield
    finally:
        done.set()
        poller.join(10)
    assert len(slowest) >= 2 and max(slowest) < ANSWER_WITHIN_S, slowest


@pytest.fixture(scope="module")
def agent() -> Iterator[BackgroundAgent]:
    background = start_agent(agent_config(**{"server.health_listen": "127.0.0.1:0"}))
    try:
        yield background
    finally:
        background.stop(5)


def test_the_precheck_reads_what_protobuf_would_merge() -> None:
    half, other_half = struct_of_empty_keys(4_000), struct_of_empty_keys(4_000, 4_000)
    assert len(half) < MAX_PLUGIN_OPTIONS_BYTES < len(half) + len(other_half)  # under the limit alone, not merged
    merged = request_with_plugin_options(half, other_half)
    assert ocr_pb2.RecognizeRequest.FromString(merged).options.plugins.options.ByteSize() > MAX_PLUGIN_OPTIONS_BYTES
    check_recognize_request(request_with_plugin_options(half), MAX_PLUGIN_OPTIONS_BYTES)
    with pytest.raises(RequestError) as caught:
        check_recognize_request(merged, MAX_PLUGIN_OPTIONS_BYTES)
    assert caught.value.field == "options.plugins.options"
    with pytest.raises(RequestError):  # the same request in two stream-frame occurrences
        check_stream_frame(length_delimited(1, request_with_plugin_options(half))
                           + length_delimited(1, request_with_plugin_options(other_half)), MAX_PLUGIN_OPTIONS_BYTES)
    many = b"".join(length_delimited(4, b"\x08\x01") for _ in range(MAX_FIELDS))  # options given 1024 times
    with pytest.raises(RequestError, match=f"more than {MAX_FIELDS} fields") as caught:
        check_recognize_request(many, MAX_PLUGIN_OPTIONS_BYTES)
    assert caught.value.field == "options"
    check_recognize_request(b"\xff\xff", MAX_PLUGIN_OPTIONS_BYTES)  # broken: left to protobuf's words


def test_costly_plugin_options_are_refused_before_parsing_and_health_answers(agent: BackgroundAgent) -> None:
    costly = request_with_plugin_options(struct_of_empty_keys(700_000))  # 9.4 MB: 8 of them stalled health 3 s
    answers: list[grpc.RpcError | bytes] = []

    def send() -> None:
        with grpc.insecure_channel(agent.target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            try:
                answers.append(raw_unary(channel, "/vkocr.v1.OcrService/Recognize", costly, timeout=60))
            except grpc.RpcError as exc:
                answers.append(exc)

    probe_port = health_port_watched(f"127.0.0.1:{agent.agent.health_port}")
    with health_watched(agent.target), probe_port:
        senders = [threading.Thread(target=send) for _ in range(8)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(60)
    assert len(answers) == 8
    for answer in answers:
        assert isinstance(answer, grpc.RpcError) and answer.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [(v.field, v.reason) for v in violations(answer)] == [("options.plugins.options", "too_large")]


def test_a_stream_frame_with_costly_options_gets_its_own_answer(agent: BackgroundAgent) -> None:
    costly = ocr_pb2.RecognizeRequest.FromString(request_with_plugin_options(struct_of_empty_keys(20_000)))
    good = ocr_pb2.RecognizeRequest(request_id="good", encoded=GOOD, options=REC_ONLY)
    with grpc.insecure_channel(agent.target) as channel:
        answers = list(ocr_pb2_grpc.OcrServiceStub(channel).RecognizeStream(iter([frame(costly), frame(good)]),
                                                                           timeout=120))
    assert [a.request_id for a in answers] == ["costly", "good"]
    assert answers[0].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "plugin options are" in answers[0].error.message
    assert [line.text for line in answers[1].response.lines] == ["LOT0042"]
