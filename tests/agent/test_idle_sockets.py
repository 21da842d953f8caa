"""Idle or half-open sockets cannot lock clients out (issue 38): sockets that never send a byte, that send only the
HTTP/2 preface, or the preface and SETTINGS and then nothing, are closed after [server] handshake_timeout_s or
connection_idle_s; a new client is served within 2 s whatever such sockets exist; and readiness (on the
health-only port, which has connections of its own) is NOT_SERVING while the OCR port takes no client. A real
agent on loopback, raw sockets from the test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.agent.agents import agent_config, wait_for
from vkocr.agent.serving.background import BackgroundAgent, start_agent

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type SETTINGS, no flags, stream 0
SERVED_WITHIN_S = 2.0  # the bound


@contextmanager
def agent_with(**overrides: object) -> Iterator[BackgroundAgent]:
    background = start_agent(agent_config(**{"server.health_listen": "127.0.0.1:0", **overrides}))
    try:
        yield background
    finally:
        background.stop(5)


@contextmanager
def idle_sockets(target: str, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections, a third silent, a third with the preface only, a third with preface and SETTINGS."""
    host, port = target.rsplit(":", 1)
    sockets = []
    try:
        for i in range(count):
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.sendall([b"", PREFACE, PREFACE + EMPTY_SETTINGS][i % 3])
            sockets.append(sock)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def served_in(target: str) -> float:
    """Seconds until a new client's health check is answered, on a connection of its own (a client that waits
    for the agent, with gRPC's own reconnection)."""
    started = time.monotonic()
    with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30,
                                                           wait_for_ready=True)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    return time.monotonic() - started


def readiness(agent: BackgroundAgent) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{agent.agent.health_port}") as probe:
        return health_pb2_grpc.HealthStub(probe).Check(health_pb2.HealthCheckRequest(), timeout=5).status


def test_idle_sockets_under_the_default_limit_lock_nobody_out() -> None:
    with agent_with() as agent, idle_sockets(agent.target, 96):
        assert served_in(agent.target) < SERVED_WITHIN_S
        assert readiness(agent) == health_pb2.HealthCheckResponse.SERVING


def closed_by_agent(sock: socket.socket, within_s: float = 10.0) -> bool:
    """Whether the agent closes `sock` (whatever it sent first: SETTINGS, a GOAWAY) within `within_s`."""
    sock.settimeout(within_s)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True  # reset
    return True


class Flood:
    """An attacker that keeps `count` idle sockets open, opening new ones as the agent closes them."""

    def __init__(self, target: str, count: int) -> None:
        self.target, self.count = target, count
        self.sockets: list[socket.socket] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        host, port = self.target.rsplit(":", 1)
        while not self.done.is_set():
            open_now = [s for s in self.sockets if not _closed_now(s)]
            for i in range(self.count - len(open_now)):
                sock = socket.create_connection((host, int(port)), timeout=5)
                sock.sendall([b"", PREFACE, PREFACE + EMPTY_SETTINGS][i % 3])
                open_now.append(sock)
            self.sockets = open_now
            self.done.wait(0.05)


def _closed_now(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True


def test_a_flood_of_idle_sockets_is_closed_and_readiness_says_so() -> None:
    with agent_with(**{"server.max_connections": 12, "server.handshake_timeout_s": 0.5,
                       "server.connection_idle_s": 0.5, "server.port_probe_s": 0.2}) as agent:
        flood = Flood(agent.target, 24)
        flood.thread.start()
        try:
            # while the flood holds every slot, readiness says the OCR port takes no client
            wait_for(lambda: readiness(agent) == health_pb2.HealthCheckResponse.NOT_SERVING, 20)
        finally:
            flood.done.set()
            flood.thread.join(10)
        held = flood.sockets  # left open, no longer renewed: the agent closes them
        try:
            assert served_in(agent.target) < SERVED_WITHIN_S
            wait_for(lambda: readiness(agent) == health_pb2.HealthCheckResponse.SERVING, 10)
            assert all(closed_by_agent(sock) for sock in held)
        finally:
            for sock in held:
                sock.close()
