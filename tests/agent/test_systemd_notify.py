"""systemd's notify protocol (agent/serving/systemd_notify.py), spoken to a real unix datagram socket: a real
agent says READY=1 once it serves, WATCHDOG=1 while its loop runs and STOPPING=1 when it drains."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.agents import running_agent
from vkocr.agent.serving.state import ServingState, StateSnapshot
from vkocr.agent.serving.systemd_notify import SystemdNotifier


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.settimeout(30)
    yield sock
    sock.close()


def received(sock: socket.socket, until: str, limit_s: float = 60.0) -> list[str]:
    """Every field of every datagram, in order, up to and including the first datagram holding `until`."""
    fields: list[str] = []
    deadline = time.monotonic() + limit_s
    while until not in fields:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            fields += sock.recv(4096).decode().split("\n")
        except TimeoutError:
            raise AssertionError(f"no {until} within {limit_s:.0f} s; got {fields}") from None
    return fields


def test_a_real_agent_notifies_ready_watchdog_and_stopping(notify_socket: socket.socket,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # os.environ as systemd sets it; monkeypatch puts the old values back after the test
    monkeypatch.setenv("NOTIFY_SOCKET", notify_socket.getsockname())
    monkeypatch.setenv("WATCHDOG_USEC", "200000")  # a ping every 0.1 s
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    with running_agent(**{"device.select": "cpu"}):
        before_ready = received(notify_socket, "READY=1")
        assert "STOPPING=1" not in before_ready
        status = [f for f in before_ready if f.startswith("STATUS=")]
        assert status and status[-1].startswith("STATUS=SERVING"), before_ready
        # liveness, not speed: generous limits, as a loaded CI machine can stall the loop for seconds
        after_ready = received(notify_socket, "WATCHDOG=1", limit_s=30)
        received(notify_socket, "WATCHDOG=1", limit_s=30)  # and again: periodic, not once
    at_stop = received(notify_socket, "STOPPING=1", limit_s=30)
    assert "READY=1" not in after_ready + at_stop, "READY=1 is sent once"


def test_the_abstract_namespace_and_the_status_lines() -> None:
    name = f"vkocr-test-{os.getpid()}-{time.monotonic_ns()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        notifier = SystemdNotifier.from_environment({"NOTIFY_SOCKET": "@" + name})
        notifier.follow(StateSnapshot(ServingState.LOADING, "loading models", "", "", "", 0))
        assert sock.recv(4096) == b"STATUS=LOADING: loading models"
        notifier.follow(StateSnapshot(ServingState.SERVING, "", "CPU", "cpu", "v1", 0))
        assert sock.recv(4096) == b"READY=1\nSTATUS=SERVING, device CPU (cpu), model v1"


def test_without_notify_socket_nothing_is_sent_and_no_watchdog_runs() -> None:
    notifier = SystemdNotifier.from_environment({"WATCHDOG_USEC": "1000000"})
    assert not notifier.enabled and not notifier.notify("READY=1")


def test_a_watchdog_meant_for_another_process_is_not_ours() -> None:
    env = {"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "4000000"}
    assert SystemdNotifier.from_environment(env).watchdog_interval_s == 2.0
    assert SystemdNotifier.from_environment({**env, "WATCHDOG_PID": str(os.getpid() + 1)}).watchdog_interval_s is None


def test_a_missing_socket_does_not_raise() -> None:
    assert not SystemdNotifier("/nonexistent/vkocr-notify").notify("READY=1")
