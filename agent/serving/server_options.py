"""The OCR server's gRPC core options and the prechecks of its methods' bytes (agent/serving/server.py)."""

from __future__ import annotations

from collections.abc import Callable

from vkocr.agent.serving.admission import MAX_PLUGIN_OPTIONS_BYTES
from vkocr.agent.serving.config import AgentConfig
from vkocr.agent.serving.wire_precheck import check_recognize_request, check_stream_frame


def server_options(config: AgentConfig) -> list[tuple[str, int]]:
    """Message sizes, one agent per port, and [server]'s connection limits. At max_connections the server
    accepts a new connection and closes it at once (the client sees UNAVAILABLE), so sockets never pile up to
    the descriptor limit; a connection that has not finished its handshake in time, or has no call for
    connection_idle_s, is closed, so idle sockets cannot hold the slots; keepalive pings find dead peers."""
    server = config.server
    return [
        ("grpc.max_receive_message_length", server.max_message_bytes),
        ("grpc.max_send_message_length", server.max_message_bytes),
        ("grpc.so_reuseport", 0),  # a second agent on the same port must fail, not share it
        ("grpc.max_allowed_incoming_connections", server.max_connections),
        ("grpc.max_concurrent_streams", server.max_streams_per_connection),
        ("grpc.keepalive_time_ms", round(server.keepalive_time_s * 1000)),
        ("grpc.keepalive_timeout_ms", round(server.keepalive_timeout_s * 1000)),
        ("grpc.max_connection_idle_ms", round(server.connection_idle_s * 1000)),
        # TLS, the HTTP/2 preface and SETTINGS within this, or the socket is closed (core's default is 120 s)
        ("grpc.server_handshake_timeout_ms", round(server.handshake_timeout_s * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),  # clients' own keepalives, at most every 10 s
    ]


def ocr_prechecks(service: str) -> dict[str, Callable[[bytes], None]]:
    """By method of the OCR service: plugin options too large to parse on the event loop are refused from their
    bytes (agent/serving/wire_precheck.py)."""
    return {
        f"/{service}/Recognize": lambda data: check_recognize_request(data, MAX_PLUGIN_OPTIONS_BYTES),
        f"/{service}/RecognizeStream": lambda data: check_stream_frame(data, MAX_PLUGIN_OPTIONS_BYTES),
    }
