"""vkocr.agent.serving.client and `vkocr client` without the agent: target parsing, requests, and real gRPC calls to the
standard grpc.health.v1 servicer (grpcio-health-checking's own) on loopback, plain and mutual TLS, one target
and several round-robin; failed calls and usage errors give the contract's exit codes and messages."""

from __future__ import annotations

import io
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from PIL import Image

from tests.agent.agents import free_port
from tests.agent.certs import TlsFiles
from vkocr.agent.cli.client_command import format_status, parse_duration, status_to_dict
from vkocr.agent.cli.main import main
from vkocr.agent.errors import ImageError
from vkocr.agent.serving.client import OcrClient, build_request, channel_target
from vkocr.agent.serving.durations import duration_from_ms, duration_from_s
from vkocr.agent.serving.errors import TargetError
from vkocr.agent.serving.tls import server_credentials
from vkocr.v1 import ocr_pb2, status_pb2

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@contextmanager
def health_server(state: int, creds: grpc.ServerCredentials | None = None) -> Iterator[int]:
    """A loopback server with only the standard health service: ``state`` for "" and "vkocr.v1.OcrService"."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = health.HealthServicer()
    servicer.set("", state)
    servicer.set("vkocr.v1.OcrService", state)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = "127.0.0.1:0"
    port = server.add_insecure_port(address) if creds is None else server.add_secure_port(address, creds)
    server.start()
    try:
        yield port
    finally:
        servicer.enter_graceful_shutdown()
        server.stop(None)


# --- targets and requests -----------------------------------------------------------------------------------


def test_channel_targets() -> None:
    assert channel_target("10.0.0.7:50051") == ("10.0.0.7:50051", None)
    assert channel_target("dns:///agents.factory:50051") == ("dns:///agents.factory:50051", None)
    assert channel_target("ipv4:127.0.0.1:1,127.0.0.1:2") == ("ipv4:127.0.0.1:1,127.0.0.1:2", None)
    assert channel_target("10.0.0.7:1, 10.0.0.8:2") == ("ipv4:10.0.0.7:1,10.0.0.8:2", None)
    assert channel_target(["10.0.0.7:1", "10.0.0.7:2"]) == ("ipv4:10.0.0.7:1,10.0.0.7:2", "10.0.0.7")
    assert channel_target(["[::1]:1", "[::1]:2"]) == ("ipv6:[::1]:1,[::1]:2", "::1")
    assert channel_target("localhost:1,localhost:2") == ("ipv4:127.0.0.1:1,127.0.0.1:2", "localhost")
    for bad in ("", " , ", "10.0.0.7,10.0.0.8:1", "a:1,b:x", "a:1,b:70000", "a:1,dns:///b:2"):
        with pytest.raises(TargetError):
            channel_target(bad)
    with pytest.raises(TargetError, match="does not resolve"):
        channel_target("localhost:1,no-such-host.invalid:2")
    with pytest.raises(TargetError, match="server name override"):
        channel_target("localhost:1,127.0.0.1:2", tls_needs_name=True)


def test_requests_from_paths_bytes_and_arrays(tmp_path: Path) -> None:
    pixels = np.random.default_rng(0).integers(0, 256, (9, 11, 3), dtype=np.uint8)
    png = io.BytesIO()
    Image.fromarray(pixels).save(png, format="PNG")
    path = tmp_path / "label.png"
    path.write_bytes(png.getvalue())
    options = ocr_pb2.Options(use_cls=False)
    from_path = build_request(path, "a", options)
    assert (from_path.request_id, from_path.options.use_cls) == ("a", False)
    assert from_path.encoded == png.getvalue()
    assert build_request(str(path)).encoded == build_request(png.getvalue()).encoded == png.getvalue()
    raw = build_request(pixels[..., ::-1], channel_order="bgr").raw
    assert (raw.layout, raw.height, raw.width) == (ocr_pb2.PIXEL_LAYOUT_BGR8, 9, 11)
    assert raw.data == np.ascontiguousarray(pixels[..., ::-1]).tobytes()
    assert not build_request(path).HasField("options")
    with pytest.raises(ImageError, match="does not exist") as info:
        build_request(tmp_path / "missing.png")
    assert info.value.reason == "not_found"
    with pytest.raises(ImageError, match="is a directory"):
        build_request(tmp_path)
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(ImageError, match="empty"):
        build_request(tmp_path / "empty.png")


# --- real calls ---------------------------------------------------------------------------------------------


def test_health_check_and_watch() -> None:
    with health_server(SERVING) as port, OcrClient(f"127.0.0.1:{port}", timeout=5) as client:
        assert client.health() == "SERVING"
        assert client.health("vkocr.v1.OcrService") == "SERVING"
        watch = client.watch_health(timeout=5)
        assert next(watch) == "SERVING"
        watch.close()  # cancels the stream
        with pytest.raises(grpc.RpcError) as info:
            client.health("no.such.Service")
    assert info.value.code() is grpc.StatusCode.NOT_FOUND


def connections_to(port: int) -> int:
    """Established TCP connections from this host to loopback port `port`, from the kernel's tables (gRPC's
    sockets are dual-stack: IPv4 peers appear in tcp6 as v4-mapped addresses)."""
    rows = [row.split() for table in ("/proc/net/tcp", "/proc/net/tcp6")
            for row in Path(table).read_text().splitlines()[1:]]
    return sum(1 for row in rows if row[2].endswith(f":{port:04X}") and row[3] == "01")


def test_own_connection_gives_each_client_its_connection() -> None:
    """gRPC shares one connection per target among a process's channels, so N clients are N calls on one
    connection, and those past the agent's streams per connection are refused (`vkocr bench agent` at 64
    clients until session 44); `own_connection` gives each client its own, as N controllers would have."""
    with health_server(SERVING) as port:
        shared = [OcrClient(f"127.0.0.1:{port}", timeout=5) for _ in range(5)]
        assert all(client.health() == "SERVING" for client in shared)
        assert connections_to(port) == 1
        own = [OcrClient(f"127.0.0.1:{port}", timeout=5, own_connection=True) for _ in range(5)]
        assert all(client.health() == "SERVING" for client in own)
        assert connections_to(port) == 1 + 5
        for client in shared + own:
            client.close()


def test_several_targets_share_the_calls() -> None:
    with (health_server(SERVING) as up, health_server(NOT_SERVING) as down,
          OcrClient(f"127.0.0.1:{up},127.0.0.1:{down}", timeout=5) as client):
        seen = {client.health() for _ in range(40)}
    assert seen == {"SERVING", "NOT_SERVING"}  # round robin: both agents answered


def test_mutual_tls_client(tls_files: TlsFiles) -> None:
    creds = server_credentials(tls_files.server_cert, tls_files.server_key, client_ca=tls_files.ca)
    identity: dict[str, Any] = {
        "ca": tls_files.ca, "cert": tls_files.client_cert, "key": tls_files.client_key, "timeout": 5
    }
    with health_server(SERVING, creds) as port, health_server(NOT_SERVING, creds) as other:
        with OcrClient(f"localhost:{port}", **identity) as client:
            assert client.health() == "SERVING"
        with (OcrClient(f"localhost:{port}", ca=tls_files.ca, timeout=5) as anonymous,
              pytest.raises(grpc.RpcError) as info):
            anonymous.health()
        assert info.value.code() is grpc.StatusCode.UNAVAILABLE
        # Two TLS agents: the name checked is the hosts' shared name, not the address list gRPC is given.
        with OcrClient(f"localhost:{port},localhost:{other}", **identity) as client:
            assert {client.health() for _ in range(40)} == {"SERVING", "NOT_SERVING"}
    with pytest.raises(ValueError, match="only sent over TLS"):
        OcrClient("localhost:1", cert=tls_files.client_cert, key=tls_files.client_key)


# --- the command line ---------------------------------------------------------------------------------------


def test_client_health_command(capsys: pytest.CaptureFixture[str]) -> None:
    with health_server(SERVING) as up, health_server(NOT_SERVING) as down:
        assert main(["client", "health", "--target", f"127.0.0.1:{up}"]) == 0
        assert capsys.readouterr().out == "SERVING\n"
        assert main(["client", "health", "--target", f"127.0.0.1:{down}", "--service", "vkocr.v1.OcrService"]) == 1
        assert capsys.readouterr().out == "NOT_SERVING\n"
        assert main(["client", "health", "--target", f"127.0.0.1:{up}", "--watch", "--count", "1"]) == 0
        assert capsys.readouterr().out == "SERVING\n"
        assert main(["client", "health", "--target", f"127.0.0.1:{up}", "--service", "nope"]) == 1
        assert capsys.readouterr().err.startswith("vkocr client: NOT_FOUND: ")
        # A server without the Status service: the code name and details, exit 1.
        assert main(["client", "watch", "--target", f"127.0.0.1:{up}", "--count", "1"]) == 1
        assert capsys.readouterr().err.startswith("vkocr client: UNIMPLEMENTED: ")


def test_client_ocr_without_an_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = tmp_path / "a.png"
    Image.fromarray(np.full((8, 8, 3), 200, np.uint8)).save(image)
    target = f"127.0.0.1:{free_port()}"
    code = main(["client", "ocr", "--target", target, str(tmp_path / "missing.png"), str(image), str(image),
                 "--json", "--timeout", "5s"])
    out, err = capsys.readouterr()
    assert code == 1
    lines = err.splitlines()
    assert "missing.png" in lines[0] and "does not exist" in lines[0]  # read here; the next image is sent
    assert lines[1].startswith(f"vkocr client: {image}: UNAVAILABLE: ")
    assert len(lines) == 2  # no agent: the third image is not tried
    assert out.count('"error"') == 2


def test_client_usage_errors(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("VKOCR_TARGET", raising=False)
    with pytest.raises(SystemExit) as info:
        main(["client", "ocr", "a.png"])
    assert info.value.code == 2 and "--target" in capsys.readouterr().err
    assert main(["client", "health", "--target", "a:1,b:x"]) == 2
    assert "expected HOST:PORT" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["client", "watch", "--target", "a:1", "--interval", "soon"])
    assert info.value.code == 2 and "not a duration" in capsys.readouterr().err
    with health_server(SERVING) as port:
        monkeypatch.setenv("VKOCR_TARGET", f"127.0.0.1:{port}")  # the environment names the agent
        assert main(["client", "health"]) == 0


def test_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["client", "--help"])
    assert "vkocr client ocr --target" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "client " in capsys.readouterr().out


def test_durations() -> None:
    assert [parse_duration(t) for t in ("500ms", "2s", "1.5m", "1h", "0.25", ".5s")] == [
        0.5, 2.0, 90.0, 3600.0, 0.25, 0.5]
    for bad in ("", "0s", "-1s", "2 weeks", "s"):
        with pytest.raises(Exception, match="duration"):
            parse_duration(bad)


def test_status_line() -> None:
    status = status_pb2.AgentStatus(
        sequence=12, state=status_pb2.SERVING_STATE_REBUILDING, reason="device lost", device="NVIDIA H200",
        backend=status_pb2.BACKEND_VULKAN,
        model_version="ppocr-v4", queue_depth=3, queue_capacity=64, in_flight=4, latency_p50=duration_from_ms(12.34),
        latency_p99=duration_from_ms(40.5), requests_total=1000, errors_total=2, rejected_total=1,
        pool_used_bytes=3 * 2**20, pool_reserved_bytes=64 * 2**20, temperature_c=61.2, uptime=duration_from_s(3600),
        device_rebuilds=1)
    status.time.FromSeconds(3600 * 5 + 61)
    assert format_status(status) == (
        "05:01:01 #12  REBUILDING (device lost)  NVIDIA H200 (vulkan)  model ppocr-v4  queue 3/64  "
        "in flight 4  p50 12.3 ms p99 40.5 ms  requests 1000 (errors 2, rejected 1)  pool 3.0/64.0 MiB  "
        "61 °C  up 3600 s  rebuilt 1×"
    )


def test_status_json() -> None:
    status = status_pb2.AgentStatus(sequence=3, state=status_pb2.SERVING_STATE_SERVING, requests_total=2**40 + 1,
                                    power_w=80.5)
    body = status_to_dict(status)
    assert body["requests_total"] == 2**40 + 1 and body["sequence"] == 3  # numbers, not JSON-mapping strings
    assert body["state"] == "SERVING" and body["power_w"] == 80.5 and "temperature_c" not in body
    assert list(body)[:4] == ["sequence", "state", "reason", "device"]  # the proto's order ("time" unset)
    assert body["errors_total"] == 0 and body["queue_depth"] == 0  # zeros are printed too
    assert body["backend"] == "" and body["latency_p99_ms"] == 0.0 and "latency_p99" not in body  # unset
    status.latency_p99.FromNanoseconds(40_500_000)
    status.uptime.FromSeconds(7)
    status.plans.add(model=status_pb2.MODEL_KIND_REC, plans=2)
    status.backend = status_pb2.BACKEND_CPU
    body = status_to_dict(status)
    assert (body["backend"], body["latency_p99_ms"], body["uptime_ms"]) == ("cpu", 40.5, 7000.0)
    assert body["plans"] == [{"model": "rec", "plans": 2, "plan_memory_bytes": 0, "recorded_total": 0,
                              "distinct_shapes": 0}]
