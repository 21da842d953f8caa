"""[throughput] is what the flow reads (the lanes, the batching, the image slots) and [experimental] the switches
that exist to measure (overlap, decode processes, device queues): agent/serving/config_throughput.py. The keys
were [server]'s: a file, a variable or a flag that still names them there is taken, into the new place, with
one warning naming it. One resolver turns "automatic" into the numbers that serve."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from vkocr.agent.serving.config import load_config
from vkocr.agent.serving.config_throughput import AUTO_DECODE_THREADS, ThroughputConfig
from vkocr.agent.serving.errors import ConfigError


def moved(logs: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(e["key"], e["now"]) for e in logs if e["event"] == "config_key_moved" and e["log_level"] == "warning"]


def test_a_file_with_the_old_keys_loads_them_into_their_new_sections(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text("[server]\nqueue_size = 5\ndetect_lanes = 3\nbatch_wait_ms = 5.0\noverlap = false\n"
                    "gpu_queues = 2\n")
    with capture_logs() as logs:
        config = load_config(path, env={})
    assert config.server.queue_size == 5  # a key that stays in [server] is taken as ever, unwarned
    assert (config.throughput.detect_lanes, config.throughput.batch_wait_ms) == (3, 5.0)
    assert (config.experimental.overlap, config.experimental.gpu_queues) == (False, 2)
    assert moved(logs) == [("[server] detect_lanes", "[throughput] detect_lanes"),
                           ("[server] batch_wait_ms", "[throughput] batch_wait_ms"),
                           ("[server] overlap", "[experimental] overlap"),
                           ("[server] gpu_queues", "[experimental] gpu_queues")]
    assert all(str(path) in str(e["origin"]) for e in logs if e["event"] == "config_key_moved")


def test_an_old_variable_or_flag_is_taken_and_warned() -> None:
    with capture_logs() as logs:
        config = load_config(None, env={"VKOCR_SERVER_DECODE_PROCESSES": "2"},
                             overrides={"server.batch_requests": 3})
    assert (config.experimental.decode_processes, config.throughput.batch_requests) == (2, 3)
    assert moved(logs) == [("[server] decode_processes", "[experimental] decode_processes"),
                           ("[server] batch_requests", "[throughput] batch_requests")]
    with capture_logs() as logs:
        load_config(None, env={"VKOCR_THROUGHPUT_READ_LANES": "1"}, overrides={"experimental.overlap": True})
    assert moved(logs) == []  # the new places say nothing


def test_an_old_key_out_of_range_is_refused_naming_its_new_place() -> None:
    with pytest.raises(ConfigError, match=r"\[throughput\]: detect_lanes must be 1 to 8, got 0"):
        load_config(None, env={"VKOCR_SERVER_DETECT_LANES": "0"})


def test_the_resolver_turns_automatic_into_numbers() -> None:
    resolved = load_config(None, env={}, overrides={"throughput.batch_requests": 4}).resolved()
    cores = len(os.sched_getaffinity(0))
    assert resolved.throughput == ThroughputConfig(batch_requests=4, image_slots=2 + 2 * 4 + 2)
    assert resolved.decode_threads == min(AUTO_DECODE_THREADS, os.cpu_count() or 1)
    assert (resolved.gpu_queues, resolved.cpu_threads) == (1, cores)
    serial = load_config(None, env={}, overrides={"experimental.overlap": False, "server.decode_threads": 3,
                                                  "device.cpu_threads": 5}).resolved()
    assert (serial.throughput.lanes, serial.throughput.image_slots) == ((1, 0), 3)  # one lane reads too
    assert (serial.decode_threads, serial.cpu_threads) == (3, 5)
    assert serial.log_fields() == {"decode_threads": 3, "detect_lanes": 1, "read_lanes": 0, "image_slots": 3,
                                   "gpu_queues": 1, "cpu_threads": 5}
