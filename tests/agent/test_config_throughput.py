"""`[server] decode_threads` (how many requests are decoded at once before the GPU queue; 0 is one per core up to a
bound) and `switch_interval_ms` (the GIL switch interval of the agent's process): values outside their ranges are
refused naming the key, and the agent runs with what is configured."""

from __future__ import annotations

import os
import sys

import pytest

from tests.agent.agents import running_agent
from vkocr.agent.serving.config import MAX_DECODE_THREADS, MAX_SWITCH_MS, MIN_SWITCH_MS, load_config
from vkocr.agent.serving.config_throughput import AUTO_DECODE_THREADS, decode_thread_count
from vkocr.agent.serving.errors import ConfigError


def test_zero_means_one_per_core_up_to_the_bound() -> None:
    assert load_config(None, env={}).server.decode_threads == 0  # one per core: PNGs want every core
    assert decode_thread_count(0) == min(AUTO_DECODE_THREADS, os.cpu_count() or 1)
    assert decode_thread_count(3) == 3


@pytest.mark.parametrize("bad", [-1, MAX_DECODE_THREADS + 1])
def test_a_count_outside_the_range_is_refused(bad: int) -> None:
    with pytest.raises(ConfigError, match=rf"\[server\]: decode_threads must be 0 \(one per core\) to "
                                          rf"{MAX_DECODE_THREADS}, got {bad}"):
        load_config(None, env={}, overrides={"server.decode_threads": bad})


@pytest.mark.parametrize("bad", [0.0, MIN_SWITCH_MS / 2, MAX_SWITCH_MS + 1])
def test_a_switch_interval_outside_the_range_is_refused(bad: float) -> None:
    with pytest.raises(ConfigError, match=r"\[server\]: switch_interval_ms must be"):
        load_config(None, env={}, overrides={"server.switch_interval_ms": bad})


def test_the_agent_decodes_on_that_many_threads_and_switches_the_gil_as_configured() -> None:
    before = sys.getswitchinterval()
    try:
        with running_agent(**{"server.decode_threads": 3, "server.switch_interval_ms": 0.7}) as agent:
            assert agent.agent.ocr._decode._max_workers == 3
            assert sys.getswitchinterval() == pytest.approx(0.0007)
    finally:
        sys.setswitchinterval(before)
