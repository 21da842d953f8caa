"""What a serving agent exports on /metrics after a real request over loopback (the CPU backend, onnxruntime):
every timing it reports is a stage or a known other timing (no warning), the version is the package's (read at
run time), and the queue's capacity is there while the CPU's temperature and power are not."""

from __future__ import annotations

import urllib.request
from importlib.metadata import version

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

import vkocr
from tests.agent.agents import REC_ONLY, agent_config, lot_number, word_png
from vkocr.agent.serving.background import start_agent
from vkocr.agent.serving.metrics import STAGES
from vkocr.v1 import ocr_pb2, ocr_pb2_grpc


def test_a_served_request_shows_in_the_metrics_without_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert vkocr.__version__ == version("vkocr")  # the package's metadata (pyproject.toml)…
    monkeypatch.setattr(vkocr, "__version__", "0.0.0+metrics-test")  # …which the label follows, not a copy
    config = agent_config(**{"device.select": "cpu", "device.cpu_threads": 1, "server.queue_size": 5,
                             "metrics.listen": "127.0.0.1:0"})
    options = ocr_pb2.Options(plugins=ocr_pb2.PluginSelection(names=["merge_lines"]))
    options.MergeFrom(REC_ONLY)
    with capture_logs() as logs:
        background = start_agent(config)
        try:
            with grpc.insecure_channel(background.target) as channel:
                answer = ocr_pb2_grpc.OcrServiceStub(channel).Recognize(
                    ocr_pb2.RecognizeRequest(encoded=word_png(lot_number(3)), options=options), timeout=60)
            port = background.agent.metrics_server.port
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                text = response.read().decode()
        finally:
            background.stop(5)
    assert answer.lines[0].text == lot_number(3)
    assert {"total", "plugin.merge_lines"} <= set(answer.timings)  # the timings that are no stages
    assert [e for e in logs if e["event"] == "metrics_unknown_stage"] == []
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    counted = {dict(labels)["stage"]: n for (name, labels), n in samples.items()
               if name == "vkocr_stage_seconds_count"}
    assert set(counted) == set(STAGES)
    assert {stage for stage, n in counted.items() if n == 1} == set(answer.timings) & set(STAGES)
    (info,) = [dict(labels) for name, labels in samples if name == "vkocr_build_info"]
    assert info["version"] == "0.0.0+metrics-test" and info["backend"] == "cpu"
    assert samples[("vkocr_queue_capacity", frozenset())] == 5
    names = {name for name, _ in samples}
    assert "vkocr_temperature_celsius" not in names and "vkocr_power_watts" not in names  # the CPU: untold
