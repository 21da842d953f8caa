"""An agent on the CPU backend (onnxruntime): it warms every model before it reports SERVING, reads as the
GPU does, and says which backend serves in the status stream and in its start-up log."""

from __future__ import annotations

import grpc
import pytest

from tests.agent.agents import REC_ONLY, agent_config, lot_number, word_png
from vkocr.agent.cli.logs import configure_logging
from vkocr.agent.ocr.ort_stages import OrtStages
from vkocr.agent.serving.background import start_agent
from vkocr.agent.serving.call_deadlines import OCR_TIMEOUT_S
from vkocr.agent.serving.client import OcrClient
from vkocr.v1 import ocr_pb2, ocr_pb2_grpc, status_pb2, status_pb2_grpc


def test_cpu_agent_warms_up_before_serving_and_reports_its_backend(caplog: pytest.LogCaptureFixture) -> None:
    configure_logging("info", json=True)
    background = start_agent(agent_config(**{"device.select": "cpu", "device.cpu_threads": 2,
                                             "plans.warm_shapes": ["320x240"], "metrics.listen": "127.0.0.1:0"}))
    try:
        pipeline = background.agent.worker.pipeline
        assert pipeline is not None and isinstance(pipeline.stages, OrtStages)
        assert pipeline.stages.warmed == {"det", "cls", "rec"} and pipeline.stages.threads == 2
        with grpc.insecure_channel(background.target) as channel:
            status = status_pb2_grpc.StatusServiceStub(channel).GetStatus(status_pb2.GetStatusRequest()).status
            assert (status.state, status.backend, status.device) == (
                status_pb2.SERVING_STATE_SERVING, status_pb2.BACKEND_CPU, "cpu")
            assert "names the cpu backend" in status.backend_reason
            answer = ocr_pb2_grpc.OcrServiceStub(channel).Recognize(
                ocr_pb2.RecognizeRequest(encoded=word_png(lot_number(7)), options=REC_ONLY), timeout=60)
            assert answer.lines[0].text == lot_number(7) and answer.device == "cpu"
        with OcrClient(background.target) as client:
            assert client.ocr_timeout() == OCR_TIMEOUT_S  # the CPU backend answers in seconds
        metrics = background.agent.metrics
        assert metrics is not None
        (info,) = [line for line in metrics.render().decode().splitlines() if line.startswith("vkocr_build_info{")]
        assert 'backend="cpu"' in info and "names the cpu backend" in info, info
    finally:
        background.stop(5)
    events = [r.msg for r in caplog.records if isinstance(r.msg, dict)]  # structlog's event dicts
    chosen = [e for e in events if e.get("event") == "backend_chosen"]
    assert len(chosen) == 1 and chosen[0]["backend"].startswith("cpu (onnxruntime")
    assert "names the cpu backend" in chosen[0]["reason"]
    serving = [e for e in events if e.get("event") == "state" and e.get("state") == "SERVING"]
    assert serving and serving[0]["backend"] == "cpu" and "names the cpu backend" in serving[0]["backend_reason"]
    warmed = [i for i, e in enumerate(events) if e.get("event") == "plans_warmed"]
    assert warmed and warmed[0] < events.index(serving[0])  # warmed, then SERVING
