"""Metrics: observed over a real /metrics endpoint on a loopback port, parsed with Prometheus' own parser."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from tests.agent.test_sensors import hwmon, reader, thermal_zone
from vkocr.agent.serving.metrics import STAGES, Metrics
from vkocr.agent.serving.sensors import Sensors

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def populated() -> Metrics:
    m = Metrics()
    m.observe_request("Recognize", "OK", 0.012, {"queue": 1.5, "decode": 0.7, "det": 4.0, "rec": 3.0})
    m.observe_request("Recognize", "OK", 0.030, {"queue": 12.0, "det": 4.5, "rec": 0.3, "plugins": 0.04})
    m.observe_request("Recognize", "INVALID_ARGUMENT", 0.0008, {"decode": 0.6})
    m.observe_request("RecognizeStream", "OK", 2.5, {"det": 1800.0})
    m.rejected()
    m.observe_request("Recognize", "RESOURCE_EXHAUSTED", 0.0001, {})
    m.queue_depth.set(3)  # the agent reads these gauges from the worker (set_function); here, numbers
    m.in_flight.set(5)
    m.set_queue_capacity(32)
    m.pool_used_bytes.set(12 << 20)
    m.pool_reserved_bytes.set(64 << 20)
    m.set_serving(True)
    m.rebuilt()
    m.rebuilt()
    m.set_info(version="0.3.1", device="NVIDIA H200", model_version="ppocrv4-2024.1", backend="vulkan",
               backend_reason="the best ranked usable GPU: [0] NVIDIA H200 (discrete)", precision="fp32",
               precision_reason="fp32 asked for")
    return m


@pytest.fixture
def metrics() -> Metrics:
    return populated()


@pytest.fixture(scope="module")
def scraped() -> Iterator[Samples]:
    server, port = populated().start_http("127.0.0.1", 0)
    try:
        assert port > 0 and server.port == port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert response.status == 200
            yield parse(response.read().decode())
    finally:
        server.shutdown()


def test_requests_by_method_and_code(scraped: Samples) -> None:
    assert value(scraped, "vkocr_requests_total", method="Recognize", code="OK") == 2
    assert value(scraped, "vkocr_requests_total", method="Recognize", code="INVALID_ARGUMENT") == 1
    assert value(scraped, "vkocr_requests_total", method="Recognize", code="RESOURCE_EXHAUSTED") == 1
    assert value(scraped, "vkocr_requests_total", method="RecognizeStream", code="OK") == 1
    assert value(scraped, "vkocr_request_seconds_count", method="Recognize") == 4
    assert value(scraped, "vkocr_request_seconds_sum", method="Recognize") == pytest.approx(0.0429)
    assert value(scraped, "vkocr_request_seconds_bucket", method="Recognize", le="0.001") == 2
    assert value(scraped, "vkocr_request_seconds_bucket", method="Recognize", le="0.02") == 3
    assert value(scraped, "vkocr_request_seconds_bucket", method="RecognizeStream", le="2.0") == 0
    assert value(scraped, "vkocr_request_seconds_bucket", method="RecognizeStream", le="5.0") == 1


def test_stage_histograms_in_seconds(scraped: Samples) -> None:
    assert value(scraped, "vkocr_stage_seconds_count", stage="det") == 3
    assert value(scraped, "vkocr_stage_seconds_sum", stage="det") == pytest.approx(1.8085)
    assert value(scraped, "vkocr_stage_seconds_bucket", stage="det", le="0.002") == 0
    assert value(scraped, "vkocr_stage_seconds_bucket", stage="det", le="0.005") == 2
    assert value(scraped, "vkocr_stage_seconds_bucket", stage="det", le="2.0") == 3
    assert value(scraped, "vkocr_stage_seconds_bucket", stage="queue", le="0.002") == 1
    assert value(scraped, "vkocr_stage_seconds_bucket", stage="plugins", le="0.0005") == 1
    assert value(scraped, "vkocr_stage_seconds_count", stage="decode") == 2
    for stage in ("db", "cls", "postproc"):  # never observed, still exported
        assert value(scraped, "vkocr_stage_seconds_count", stage=stage) == 0
    assert {dict(labels)["stage"] for name, labels in scraped if name == "vkocr_stage_seconds_count"} == set(STAGES)


def test_gauges_counters_and_build_info(scraped: Samples) -> None:
    assert value(scraped, "vkocr_queue_depth") == 3
    assert value(scraped, "vkocr_queue_capacity") == 32
    assert value(scraped, "vkocr_in_flight") == 5
    assert value(scraped, "vkocr_pool_used_bytes") == 12 << 20
    assert value(scraped, "vkocr_pool_reserved_bytes") == 64 << 20
    assert value(scraped, "vkocr_serving") == 1
    assert value(scraped, "vkocr_device_rebuilds_total") == 2
    assert value(scraped, "vkocr_rejected_total") == 1
    info = value(scraped, "vkocr_build_info", version="0.3.1", device="NVIDIA H200", model_version="ppocrv4-2024.1",
                 backend="vulkan", backend_reason="the best ranked usable GPU: [0] NVIDIA H200 (discrete)",
                 precision="fp32", precision_reason="fp32 asked for")
    assert info == 1


def test_later_changes_show_in_render(metrics: Metrics) -> None:
    metrics.set_serving(False)
    metrics.queue_depth.set(0)
    metrics.in_flight.set(1)
    metrics.set_info(version="0.3.1", device="NVIDIA H200", model_version="ppocrv4-2024.2")
    samples = parse(metrics.render().decode())
    assert value(samples, "vkocr_serving") == 0
    assert value(samples, "vkocr_queue_depth") == 0 and value(samples, "vkocr_in_flight") == 1
    builds = [dict(labels) for name, labels in samples if name == "vkocr_build_info"]
    assert [b["model_version"] for b in builds] == ["ppocrv4-2024.2"]


def test_each_instance_has_its_own_registry(metrics: Metrics) -> None:
    other = Metrics()
    other.observe_request("Recognize", "OK", 0.5, {"rec": 2.0})
    mine, theirs = parse(metrics.render().decode()), parse(other.render().decode())
    assert value(mine, "vkocr_requests_total", method="Recognize", code="OK") == 2
    assert value(theirs, "vkocr_requests_total", method="Recognize", code="OK") == 1
    assert value(theirs, "vkocr_device_rebuilds_total") == 0
    assert "vkocr_ocr_rejected_total" in {n for n, _ in parse(Metrics("vkocr_ocr").render().decode())}


def test_stage_histograms_reach_a_minute() -> None:
    m = Metrics()  # the CPU backend on a 2-core board: rec of a full page takes tens of seconds
    m.observe_request("Recognize", "OK", 70.0, {"rec": 45_000.0, "det": 7_000.0})
    m.observe_request("Recognize", "OK", 200.0, {"rec": 90_000.0})
    samples = parse(m.render().decode())
    assert value(samples, "vkocr_stage_seconds_bucket", stage="det", le="5.0") == 0
    assert value(samples, "vkocr_stage_seconds_bucket", stage="det", le="10.0") == 1
    assert value(samples, "vkocr_stage_seconds_bucket", stage="rec", le="30.0") == 0
    assert value(samples, "vkocr_stage_seconds_bucket", stage="rec", le="60.0") == 1
    assert value(samples, "vkocr_stage_seconds_bucket", stage="rec", le="+Inf") == 2  # past a minute: +Inf only
    assert value(samples, "vkocr_request_seconds_bucket", method="Recognize", le="60.0") == 0
    assert value(samples, "vkocr_request_seconds_bucket", method="Recognize", le="120.0") == 1
    assert value(samples, "vkocr_request_seconds_bucket", method="Recognize", le="600.0") == 2


def test_total_and_per_plugin_timings_are_no_stages_and_no_warning() -> None:
    m = Metrics()  # what the OCR service reports: the stages, the whole request, and each plugin's share
    with capture_logs() as logs:
        m.observe_request("Recognize", "OK", 0.05, {"queue": 1.0, "decode": 2.0, "rec": 30.0, "postproc": 0.5,
                                                    "plugins": 0.3, "plugin.merge_lines": 0.2, "total": 50.0})
    assert [e for e in logs if e["event"] == "metrics_unknown_stage"] == []
    stages = {dict(labels)["stage"] for name, labels in parse(m.render().decode()) if name.startswith(
        "vkocr_stage_seconds")}
    assert stages == set(STAGES)
    assert value(parse(m.render().decode()), "vkocr_stage_seconds_count", stage="plugins") == 1


def test_unknown_stages_are_left_out_and_logged_once() -> None:
    m = Metrics()
    with capture_logs() as logs:
        m.observe_request("Recognize", "OK", 0.01, {"det": 2.0, "warp": 1.0})
        m.observe_request("Recognize", "OK", 0.01, {"warp": 1.0})
    assert [e["stage"] for e in logs if e["event"] == "metrics_unknown_stage"] == ["warp"]
    stages = {dict(labels).get("stage") for name, labels in parse(m.render().decode()) if "stage" in name}
    assert "warp" not in stages and "det" in stages


def test_shutdown_closes_the_port() -> None:
    server, port = Metrics().start_http("127.0.0.1", 0)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert b"vkocr_serving" in response.read()
    server.shutdown()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)


def sensor_samples(read: Callable[[], Sensors | None]) -> Samples:
    m = Metrics()
    m.watch_sensors(read)
    return {key: v for key, v in parse(m.render().decode()).items()
            if key[0] in ("vkocr_temperature_celsius", "vkocr_power_watts")}


def test_temperature_and_power_come_from_the_device_sensors(tmp_path: Path) -> None:
    hwmon(tmp_path, 0, "k10temp", {"temp1_input": "71250"})  # the CPU's: never the device's
    hwmon(tmp_path, 1, "amdgpu", {"temp1_input": "61000", "temp1_label": "edge", "power1_average": "152000000"})
    sensors = reader(tmp_path)
    assert sensor_samples(lambda: sensors.read("AMD Radeon RX 7900 XTX")) == {
        ("vkocr_temperature_celsius", frozenset()): 61.0, ("vkocr_power_watts", frozenset()): 152.0}


def test_a_reading_the_platform_does_not_give_is_absent(tmp_path: Path) -> None:
    thermal_zone(tmp_path, 0, "gpu-thermal", 48500)  # an embedded board: a GPU thermal zone, no power sensor
    sensors = reader(tmp_path)
    assert sensor_samples(lambda: sensors.read("Mali-G610")) == {("vkocr_temperature_celsius", frozenset()): 48.5}
    assert sensor_samples(lambda: sensors.read("llvmpipe (LLVM 17.0.6, 256 bits)")) == {}  # software: none
    assert sensor_samples(lambda: reader(tmp_path / "empty").read(None)) == {}
    assert sensor_samples(lambda: None) == {}  # the CPU backend: no device to read
    assert sensor_samples(lambda: Sensors(None, 35.5, "hwmon:amdgpu")) == {("vkocr_power_watts", frozenset()): 35.5}


def test_sensors_are_read_at_scrape_time_not_when_watched() -> None:
    reads: list[int] = []

    def read() -> Sensors | None:
        reads.append(1)
        return None

    m = Metrics()
    m.watch_sensors(read)  # at start-up, on the event loop: NVML must not be waited for there
    assert reads == []
    text = m.render()
    assert reads == [1] and b"temperature" not in text and b"power" not in text  # absent, not even HELP
