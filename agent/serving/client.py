"""A Python client for one agent or several: OCR (unary and streaming), status, health, models.

Several targets share one channel whose ``round_robin`` policy spreads calls over every agent that is up (a
single DNS name that resolves to several addresses, e.g. a Kubernetes headless service, is spread the same
way). Failed calls raise ``grpc.RpcError``; ``vkocr.agent.serving.rpc_status.describe_rpc_error`` says what went wrong.
Streaming methods return generators: closing one (``close()``, or dropping it after a ``break``) cancels its
call.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Generator, Iterable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, Literal, Self

import grpc
import numpy as np
import numpy.typing as npt
from grpc_health.v1 import health_pb2, health_pb2_grpc

from vkocr.agent.errors import ImageError
from vkocr.agent.ocr.images import read_image_file
from vkocr.agent.serving.call_deadlines import OCR_TIMEOUT_S, ocr_timeout_for
from vkocr.agent.serving.errors import TargetError
from vkocr.agent.serving.proto_enums import enum_name
from vkocr.agent.serving.retries import RetryPolicy, call_with_retries
from vkocr.agent.serving.tls import channel_credentials
from vkocr.agent.serving.wire import options_to_proto, raw_image_to_proto
from vkocr.v1 import models_pb2_grpc, ocr_pb2, ocr_pb2_grpc, status_pb2, status_pb2_grpc

DEFAULT_MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
STATUS_PROBE_TIMEOUT_S: Final = 5.0
DEFAULT_RETRIES: Final = RetryPolicy()
_SCHEMES: Final = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:")

ImageInput = str | os.PathLike[str] | bytes | bytearray | memoryview | npt.NDArray[np.generic]
StreamItem = ImageInput | tuple[str, ImageInput]  # an image, or (request id, image)


class OcrClient:
    """A channel to one or several agents. ``target``: ``HOST:PORT``, several as a sequence or joined with
    commas, or any gRPC target URI (``dns:…``, ``ipv4:a:p,b:p``, ``unix:…``). Plaintext without ``ca``;
    ``cert``/``key`` add a client certificate for mutual TLS. ``timeout``: default deadline of unary calls and
    of ``recognize_stream``, in seconds (None: none). ``retries``: how ``recognize`` honours the agent's
    RetryInfo when it refuses for now (queue full, loading): a ``vkocr.agent.serving.retries.RetryPolicy``; the
    default retries until the call's deadline, ``vkocr.agent.serving.retries.NO_RETRIES`` never retries.
    ``own_connection``: connections of this client's own; by default gRPC shares one per target among the
    channels of a process, so that N clients in one process are N calls on one connection, and past the
    agent's ``max_streams_per_connection`` the excess are refused UNAVAILABLE (RST_STREAM REFUSED_STREAM)."""

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        ca: Path | None = None,
        cert: Path | None = None,
        key: Path | None = None,
        timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        server_name_override: str | None = None,
        retries: RetryPolicy = DEFAULT_RETRIES,
        own_connection: bool = False,
    ) -> None:
        needs_name = ca is not None and server_name_override is None
        uri, host_name = channel_target(target, tls_needs_name=needs_name)
        options: list[tuple[str, Any]] = [
            ("grpc.lb_policy_name", "round_robin"),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
        ]
        if own_connection:
            options.append(("grpc.use_local_subchannel_pool", 1))
        if ca is None:
            if cert is not None or key is not None:
                raise ValueError("a client certificate is only sent over TLS: give the CA (ca=…) too")
            channel = grpc.insecure_channel(uri, options=options)
        else:
            name = server_name_override or host_name
            if name is not None:
                options.append(("grpc.ssl_target_name_override", name))
            channel = grpc.secure_channel(uri, channel_credentials(ca, cert, key), options=options)
        self.channel = channel
        self.timeout = timeout
        self.retries = retries
        self.ocr_stub = ocr_pb2_grpc.OcrServiceStub(channel)
        self.status_stub = status_pb2_grpc.StatusServiceStub(channel)
        self.health_stub = health_pb2_grpc.HealthStub(channel)
        self.models = models_pb2_grpc.ModelsServiceStub(channel)

    # -- OCR ------------------------------------------------------------------------------------------------

    def recognize(
        self,
        image: ImageInput,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
        channel_order: Literal["rgb", "bgr"] = "rgb",
        **options: Any,
    ) -> ocr_pb2.RecognizeResponse:
        """Read one image: a path (sent as the file's bytes), encoded bytes, or a NumPy array (sent as raw
        pixels; ``channel_order="bgr"`` for OpenCV arrays). ``options``: OcrOptions names (``use_cls=False``,
        ``thresh=0.4``, ``plugins=[…]``); unset ones take the agent's defaults. A refusal for now (queue full,
        agent loading) is retried as the agent's RetryInfo and ``retries`` say, within ``timeout``."""
        request = build_request(image, request_id or "", _options(options), channel_order)

        def attempt(left: float | None) -> ocr_pb2.RecognizeResponse:
            response: ocr_pb2.RecognizeResponse = self.ocr_stub.Recognize(request, timeout=left)
            return response

        return call_with_retries(attempt, self._deadline(timeout), self.retries)

    def recognize_stream(
        self,
        images: Iterable[StreamItem],
        *,
        timeout: float | None = None,
        channel_order: Literal["rgb", "bgr"] = "rgb",
        **options: Any,
    ) -> Generator[ocr_pb2.RecognizeStreamResponse, None, None]:
        """Many images over one stream; answers in order, as they come. Items are images or (request
        id, image) pairs; ids default to "0", "1", …. Images are read lazily. Each answer carries its
        ``request_id`` and either ``response`` or, when its request failed, ``error``; an image that cannot be
        read here ends the stream after the answers before it, then raises its ImageError. ``timeout`` bounds
        the whole stream."""
        opts = _options(options)
        failures: list[Exception] = []

        def requests() -> Iterator[ocr_pb2.RecognizeStreamRequest]:
            for index, item in enumerate(images):
                request_id, image = item if isinstance(item, tuple) else (str(index), item)
                try:
                    request = build_request(image, request_id, opts, channel_order)
                except Exception as exc:  # noqa: BLE001 - raised to the caller below, not in gRPC's thread
                    failures.append(exc)
                    return
                yield ocr_pb2.RecognizeStreamRequest(request=request)

        call = self.ocr_stub.RecognizeStream(requests(), timeout=self._deadline(timeout))
        try:
            yield from call
        finally:
            call.cancel()  # no-op when finished; ends the stream when the caller stops early
        if failures:
            raise failures[0]

    # -- status and health ----------------------------------------------------------------------------------

    def ocr_timeout(self) -> float:
        """A deadline for one OCR call that fits the backend the agent serves on, as its status says
        (agent/serving/call_deadlines.py); OCR_TIMEOUT_S when the status does not answer (the OCR call will
        then say what is wrong)."""
        try:
            status = self.status(timeout=STATUS_PROBE_TIMEOUT_S)
        except grpc.RpcError:
            return OCR_TIMEOUT_S
        try:
            backend = enum_name(status_pb2.Backend, status.backend)
        except ValueError:  # a backend newer than this client: its device name still tells a CPU
            backend = ""
        return ocr_timeout_for(backend, status.device)

    def status(self, *, timeout: float | None = None) -> status_pb2.AgentStatus:
        response: status_pb2.GetStatusResponse = self.status_stub.GetStatus(
            status_pb2.GetStatusRequest(), timeout=self._deadline(timeout)
        )
        return response.status

    def watch_status(
        self, interval_s: float | None = None, *, timeout: float | None = None
    ) -> Generator[status_pb2.AgentStatus, None, None]:
        """The agent's state now, on every change, and at least every ``interval_s`` (None: the agent's
        default). Runs until the caller stops iterating, ``timeout`` passes or the agent stops."""
        request = status_pb2.WatchStatusRequest()
        if interval_s is not None:
            request.interval.FromTimedelta(timedelta(seconds=interval_s))
        call = self.status_stub.WatchStatus(request, timeout=timeout)
        try:
            for response in call:
                yield response.status
        finally:
            call.cancel()

    def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """grpc.health.v1 Check: "SERVING", "NOT_SERVING", … (an unknown service is a NOT_FOUND error)."""
        request = health_pb2.HealthCheckRequest(service=service)
        reply = self.health_stub.Check(request, timeout=self._deadline(timeout))
        name: str = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        return name

    def watch_health(self, service: str = "", *, timeout: float | None = None) -> Generator[str, None, None]:
        """grpc.health.v1 Watch: the status now, then each change ("SERVICE_UNKNOWN" for unknown services)."""
        call = self.health_stub.Watch(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        try:
            for reply in call:
                yield health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        finally:
            call.cancel()

    # -- lifetime -------------------------------------------------------------------------------------------

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _deadline(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else timeout


def _options(options: dict[str, Any]) -> ocr_pb2.Options | None:
    return options_to_proto(**options) if options else None


def build_request(
    image: ImageInput,
    request_id: str = "",
    options: ocr_pb2.Options | None = None,
    channel_order: Literal["rgb", "bgr"] = "rgb",
) -> ocr_pb2.RecognizeRequest:
    """A RecognizeRequest for a path (its bytes), encoded bytes, or an array (raw pixels). A file that cannot
    be read raises ImageError ("not_found", "unreadable", "empty"), as ``decode_image`` would."""
    request = ocr_pb2.RecognizeRequest(request_id=request_id, options=options)
    if isinstance(image, np.ndarray):
        request.raw.CopyFrom(raw_image_to_proto(image, channel_order))
    elif isinstance(image, bytes | bytearray | memoryview):
        request.encoded = bytes(image)
    elif isinstance(image, str | os.PathLike):
        request.encoded = read_image_file(image)
    else:
        raise ImageError(
            "unsupported", f"cannot send a {type(image).__name__}: give a path, bytes or a NumPy array"
        )
    return request


# --- targets ------------------------------------------------------------------------------------------------


def channel_target(target: str | Sequence[str], *, tls_needs_name: bool = False) -> tuple[str, str | None]:
    """The gRPC target URI for one or several agents, and the host name TLS should check (None: the URI's).

    One target passes through (gRPC resolves it). Several ``HOST:PORT`` become one static address list
    (``ipv4:a:p,b:p`` or ``ipv6:[a]:p,[b]:p``), host names resolved now, once. TLS then checks the one name
    they share; ``tls_needs_name``: raise TargetError when they share none (the address list itself is no
    name a certificate carries).
    """
    if isinstance(target, str):
        if target.startswith(_SCHEMES):
            return target, None
        items = target.split(",")
    else:
        items = [part for t in target for part in t.split(",")]
    items = [item.strip() for item in items if item.strip()]
    if not items:
        raise TargetError("no target: give HOST:PORT (several separated by commas)")
    if len(items) == 1:
        return items[0], None
    pairs = [_host_port(item) for item in items]
    addresses = _resolve(pairs)
    names = {host for host, _ in pairs if not _is_ip(host)}
    ips = {host for host, _ in pairs if _is_ip(host)}
    if len(names) == 1 and not ips:
        host_name: str | None = names.pop()
    elif not names and len(ips) == 1:
        host_name = ips.pop()  # the URI's own authority would be the whole address list
    elif tls_needs_name:
        raise TargetError(
            f"targets {', '.join(items)} have different host names; over TLS give a server name override "
            "that every agent's certificate carries"
        )
    else:
        host_name = None
    return addresses, host_name


def _host_port(item: str) -> tuple[str, int]:
    host, sep, port = item.rpartition(":")
    if item.startswith(_SCHEMES) or "/" in item:
        raise TargetError(f"target {item!r}: several targets must each be HOST:PORT (no scheme)")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise TargetError(f"target {item!r}: expected HOST:PORT, e.g. 10.0.0.7:50051 or [::1]:50051")
    return host.removeprefix("[").removesuffix("]"), int(port)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _resolve(pairs: list[tuple[str, int]]) -> str:
    """``ipv4:a:p,…`` when every host has an IPv4 address, else ``ipv6:[a]:p,…`` when every one has IPv6."""
    for host, port in pairs:
        if not _addresses(host, port, socket.AF_UNSPEC):
            raise TargetError(f"target {host}:{port}: the host name does not resolve")
    for family, scheme in ((socket.AF_INET, "ipv4"), (socket.AF_INET6, "ipv6")):
        found: list[str] = []
        for host, port in pairs:
            ips = _addresses(host, port, family)
            if not ips:
                break
            found.extend(f"[{ip}]:{port}" if family == socket.AF_INET6 else f"{ip}:{port}" for ip in ips)
        else:
            return f"{scheme}:" + ",".join(dict.fromkeys(found))
    hosts = ", ".join(host for host, _ in pairs)
    raise TargetError(f"targets {hosts}: some resolve to IPv4 addresses only, others to IPv6 only; one "
                      "channel needs one family")


def _addresses(host: str, port: int, family: socket.AddressFamily) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    except socket.gaierror:
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))
