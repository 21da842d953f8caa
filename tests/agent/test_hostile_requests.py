"""Hostile or careless requests against a real agent on loopback (lavapipe): each is refused with its right code,
or survived, while health and status answer within 1 s, and the next good request is answered correctly.

Refusals cost no GPU work, so most of these take milliseconds; the good requests after them read the same small
image (one recorded rec plan), and one long line meets the backtracking pattern.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2
from structlog.testing import capture_logs

from tests.agent.agents import FONT, REC_ONLY, agent_config, wait_for, white_png, word_png
from tests.agent.hostile import health_watched, length_delimited, raw_unary, violations
from tests.agent.hostile_plugins import Spin
from vkocr.agent.serving.background import BackgroundAgent, start_agent
from vkocr.v1 import ocr_pb2, ocr_pb2_grpc, status_pb2

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

LAVAPIPE = "llvmpipe"
BUDGET_MS = 300  # the agent's plugin budget here: the spinning plugin is stopped after it
GOOD = word_png("LOT0042")
LONG_TEXT = "LOT0042-EXP2027-03-31-QTY0012-NET5KG"  # 36 characters: 2^36 paths for a backtracking engine


def hostile_config(**overrides: Any) -> Any:
    return agent_config(**{"device.select": LAVAPIPE, "ocr.plugin_budget_ms": BUDGET_MS, **overrides})


@pytest.fixture(scope="module")
def installed_spin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A distribution on sys.path declaring the `spin` plugin (tests/agent/hostile_plugins.py) under the
    vkocr.postproc entry-point group, as a vendor's wheel would: the agent finds it when it starts."""
    root = tmp_path_factory.mktemp("plugins")
    dist = root / "vkocr_hostile_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vkocr-hostile-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[vkocr.postproc]\nspin = tests.agent.hostile_plugins:Spin\n")
    sys.path.insert(0, str(root))
    yield
    sys.path.remove(str(root))


@pytest.fixture(scope="module")
def agent(installed_spin: None) -> Iterator[BackgroundAgent]:
    background = start_agent(hostile_config())
    try:
        yield background
    finally:
        background.stop(5)


@pytest.fixture(scope="module")
def channel(agent: BackgroundAgent) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(agent.target) as chan:
        yield chan


@pytest.fixture(scope="module")
def ocr(channel: grpc.Channel) -> ocr_pb2_grpc.OcrServiceStub:
    return ocr_pb2_grpc.OcrServiceStub(channel)


def assert_serves(ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    """The next good request is answered, correctly."""
    answer = ocr.Recognize(ocr_pb2.RecognizeRequest(request_id="good", encoded=GOOD, options=REC_ONLY), timeout=120)
    assert [line.text for line in answer.lines] == ["LOT0042"]


def with_plugins(names: list[str], options: dict[str, Any] | None = None, **rest: Any) -> ocr_pb2.Options:
    selection = ocr_pb2.PluginSelection(names=names)
    if options is not None:
        struct = struct_pb2.Struct()
        struct.update(options)
        selection.options.CopyFrom(struct)
    return ocr_pb2.Options(use_det=False, use_cls=False, plugins=selection, **rest)


def refusal(ocr: ocr_pb2_grpc.OcrServiceStub, request: ocr_pb2.RecognizeRequest) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        ocr.Recognize(request, timeout=60)
    return caught.value


# --- plugins cannot stall anything ---------------------------------------------------------------------------


def test_catastrophic_backtracking_pattern_runs_in_linear_time(agent: BackgroundAgent,
                                                               ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    fields = {"bang": r"^(.|.)*!$", "lot": r"LOT(\d+)"}  # the first never matches: every path is tried
    request = ocr_pb2.RecognizeRequest(request_id="redos", encoded=word_png(LONG_TEXT),
                                       options=with_plugins(["regex_fields"], {"regex_fields": fields}))
    with health_watched(agent.target):
        answer = ocr.Recognize(request, timeout=120)
    (line,) = answer.lines
    assert len(line.text) >= 30 and line.text.startswith("LOT0042"), line.text
    assert not answer.plugin_errors
    assert dict(answer.fields) == {"lot": "0042"}  # "bang" found nothing, and said so quickly
    assert_serves(ocr)


def test_plugin_over_its_budget_is_stopped_and_the_lines_survive(agent: BackgroundAgent,
                                                                 ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    options = with_plugins(["spin", "regex_fields"], {"regex_fields": {"lot": r"LOT(\d+)"}})
    with health_watched(agent.target):
        answer = ocr.Recognize(ocr_pb2.RecognizeRequest(request_id="spin", encoded=GOOD, options=options),
                               timeout=120)
    assert [line.text for line in answer.lines] == ["LOT0042"]
    assert [(e.plugin, e.error.split(":")[0]) for e in answer.plugin_errors] == [("spin", "PluginTimeout")]
    assert f"{BUDGET_MS} ms" in answer.plugin_errors[0].error
    assert dict(answer.fields) == {"lot": "0042"}  # the plugin after it ran
    turns = Spin.turns
    time.sleep(0.3)
    assert Spin.turns == turns, "the overrunning plugin still runs"
    assert_serves(ocr)


def test_huge_and_too_many_patterns_are_refused_naming_the_field(agent: BackgroundAgent,
                                                                  ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    cases = {
        "options.plugins.options": {"lot": "A" * 5_400_000},  # the 5.4 MB pattern: refused before parsing
        "options.plugins.options.regex_fields.lot.pattern": {"lot": "(A)" + "B" * 1000},
        "options.plugins.options.regex_fields": {f"f{i}": "A" for i in range(33)},
        "options.plugins.options.regex_fields.echo.pattern": {"echo": r"(a)\1"},  # no backreferences in RE2
    }
    with health_watched(agent.target):
        for field, patterns in cases.items():
            request = ocr_pb2.RecognizeRequest(encoded=GOOD, options=with_plugins(["regex_fields"],
                                                                                  {"regex_fields": patterns}))
            err = refusal(ocr, request)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
            assert [v.field for v in violations(err)] == [field], err.details()
    assert_serves(ocr)


# --- untrusted input is bounded before it costs anything -----------------------------------------------------

NAN, INF = math.nan, math.inf
BAD_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"unclip_ratio": NAN}, "options.unclip_ratio"),
    ({"unclip_ratio": INF}, "options.unclip_ratio"),
    ({"unclip_ratio": -1.0}, "options.unclip_ratio"),
    ({"det_thresh": NAN}, "options.det_thresh"),
    ({"text_score": -INF}, "options.text_score"),
    ({"box_thresh": 1.5}, "options.box_thresh"),
    ({"cls_thresh": INF}, "options.cls_thresh"),
    ({"limit_side_len": 100_000}, "options.limit_side_len"),
    ({"limit_side_len": 0}, "options.limit_side_len"),
    ({"max_side_len": 0}, "options.max_side_len"),
    ({"max_side_len": 4_000_000_000}, "options.max_side_len"),
    ({"limit_type": 7}, "options.limit_type"),  # numbers no enum value has (proto3 carries them)
    ({"score_mode": -1}, "options.score_mode"),
]


def test_out_of_range_and_non_finite_options_are_refused(
        agent: BackgroundAgent, ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    with health_watched(agent.target):
        for options, field in BAD_OPTIONS:
            err = refusal(ocr, ocr_pb2.RecognizeRequest(encoded=GOOD, options=ocr_pb2.Options(**options)))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (options, err.details())
            assert [v.field for v in violations(err)] == [field], (options, err.details())
    assert_serves(ocr)


def test_work_after_every_resize_is_bounded(agent: BackgroundAgent, ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    small = white_png(200, 64)  # limit_side_len=3000 makes it a 3008x9376 detection input: 284 s and 8 GB once
    cases = [
        (ocr_pb2.RecognizeRequest(encoded=small, options=ocr_pb2.Options(limit_side_len=3000)),
         "options.limit_side_len", "out_of_range"),
        (ocr_pb2.RecognizeRequest(encoded=white_png(100, 2000)), "image", "too_large"),  # a 20:1 strip, 14720x736
    ]
    with health_watched(agent.target):
        for request, field, reason in cases:
            started = time.monotonic()
            err = refusal(ocr, request)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
            assert [(v.field, v.reason) for v in violations(err)] == [(field, reason)], err.details()
            assert "pixels" in (err.details() or "")
            assert time.monotonic() - started < 30  # refused before the queue, never run
    assert_serves(ocr)


def test_oversized_ids_and_plugin_selections_are_refused(
        agent: BackgroundAgent, ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    cases = [
        (ocr_pb2.RecognizeRequest(request_id="x" * 300, encoded=GOOD, options=REC_ONLY), "request_id"),
        (ocr_pb2.RecognizeRequest(encoded=GOOD, options=with_plugins(["merge_lines"] * 17)),
         "options.plugins.names"),
        (ocr_pb2.RecognizeRequest(encoded=GOOD, options=with_plugins(["p" * 65])), "options.plugins.names"),
        (ocr_pb2.RecognizeRequest(encoded=GOOD, options=with_plugins(["no_such_plugin"])), "options.plugins.names"),
    ]
    for request, field in cases:
        err = refusal(ocr, request)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert [v.field for v in violations(err)] == [field], err.details()


# --- every failure has its right code -------------------------------------------------------------------------


def deeply_nested_request(depth: int) -> bytes:
    """A RecognizeRequest whose plugin options nest Structs `depth` deep (protobuf stops parsing at 100)."""
    struct = b""
    for _ in range(depth):  # Struct.fields[“a”] = Value(struct_value=struct)
        entry = length_delimited(1, b"a") + length_delimited(2, length_delimited(5, struct))
        struct = length_delimited(1, entry)
    options = length_delimited(16, length_delimited(2, struct))  # Options.plugins.options
    return length_delimited(1, b"deep") + length_delimited(4, options)


def test_malformed_protobuf_is_invalid_argument_for_every_service(agent: BackgroundAgent, channel: grpc.Channel,
                                                                  ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    health = "/grpc.health.v1.Health/Check"
    cases = [
        ("/vkocr.v1.OcrService/Recognize", b"\xff\xff\xff\xff"),
        ("/vkocr.v1.OcrService/Recognize", deeply_nested_request(200)),
        ("/vkocr.v1.StatusService/GetStatus", b"\x0a\xff\x01"),
        (health, b"\x0a\x05ab"),  # a string field cut short
    ]
    with health_watched(agent.target):
        for method, data in cases:
            with pytest.raises(grpc.RpcError) as caught:
                raw_unary(channel, method, data)
            err = caught.value
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, err.code(), err.details())
            assert [(v.field, v.reason) for v in violations(err)] == [("request", "malformed")]
    health_answer = health_pb2.HealthCheckResponse.FromString(
        raw_unary(channel, health, health_pb2.HealthCheckRequest().SerializeToString()))
    assert health_answer.status == health_pb2.HealthCheckResponse.SERVING
    got = status_pb2.GetStatusResponse.FromString(raw_unary(channel, "/vkocr.v1.StatusService/GetStatus", b""))
    assert got.status.state == status_pb2.SERVING_STATE_SERVING
    # a deep but legal nesting is no refusal
    assert not ocr_pb2.RecognizeRequest.FromString(deeply_nested_request(20)).encoded
    assert_serves(ocr)


def test_oversized_error_stays_within_the_clients_metadata_limit(agent: BackgroundAgent,
                                                                  ocr: ocr_pb2_grpc.OcrServiceStub) -> None:
    # 50 unknown keys of 1,000 characters: the refusal names them all, 50 KB of message once
    spec = {"pattern": "LOT", **{f"{i:03d}" + "k" * 997: True for i in range(50)}}
    err = refusal(ocr, ocr_pb2.RecognizeRequest(encoded=GOOD, options=with_plugins(
        ["regex_fields"], {"regex_fields": {"lot": spec}})))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.code(), (err.details() or "")[:200])
    assert isinstance(err, grpc.Call)
    trailers = sum(len(key) + len(value) for key, value in err.trailing_metadata() or ())
    message = err.details() or ""
    assert trailers + len(message.encode()) * 3 < 8 * 1024 // 2, trailers  # well under the 8 KiB limit
    assert message.startswith("field 'lot': unknown keys") and message.endswith("…")
    assert [v.field for v in violations(err)] == ["options.plugins.options.regex_fields.lot"]
    assert_serves(ocr)


def test_requests_cancelled_by_the_shutdown_are_logged_as_such(installed_spin: None) -> None:
    """A request still queued when the grace period ends is cancelled by the agent: its log line says so."""
    background = start_agent(hostile_config())
    stopper = threading.Thread(target=background.stop, args=(0.5,))
    try:
        with grpc.insecure_channel(background.target) as chan, capture_logs() as logs:
            stub = ocr_pb2_grpc.OcrServiceStub(chan)
            worker = background.agent.worker
            with worker.held():  # the request waits in the queue past the grace period
                pending = stub.Recognize.future(ocr_pb2.RecognizeRequest(request_id="late", encoded=GOOD,
                                                                        options=REC_ONLY))
                wait_for(lambda: worker.queue_depth() == 1, 30)
                stopper.start()
                deadline = time.monotonic() + 30
                while not [e for e in logs if e.get("request_id") == "late"] and time.monotonic() < deadline:
                    time.sleep(0.02)
            with pytest.raises(grpc.RpcError):
                pending.result(timeout=30)
    finally:
        if stopper.ident is not None:  # started: it stops the agent
            stopper.join(60)
        else:
            background.stop(0)
    (line,) = [e for e in logs if e.get("event") == "request" and e.get("request_id") == "late"]
    assert line["status"] == "CANCELLED" and line["error"].startswith("agent shutdown"), line
