"""The agent's configuration: one TOML file, overridden by environment variables, overridden by flags.

Every setting has a default, so ``vkocr serve`` runs without a file. Sections and keys are the dataclasses
below; ``VKOCR_<SECTION>_<KEY>`` (e.g. ``VKOCR_SERVER_QUEUE_SIZE=64``) overrides one key, and any other
``VKOCR_`` variable that is not one of OTHER_VARIABLES is refused, naming the closest key; ``[ocr]`` holds the
deployment's OCR option defaults (any field of vkocr.agent.ocr.options.OcrOptions). ``vkocr serve --print-config``
prints the merged result, every key of every section ([ocr]'s every option) with the value in effect and its
field's comment below. Relative paths in a file are relative to the file's folder (PATH_KEYS).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vkocr.agent.errors import ModelSetError, OptionsError
from vkocr.agent.ocr.lanes import LaneResources
from vkocr.agent.ocr.model_files import MODEL_SETS
from vkocr.agent.ocr.model_sets import ChosenModels, choose_models
from vkocr.agent.ocr.options import PRECISIONS, OcrOptions
from vkocr.agent.serving.config_fleet import FleetConfig
from vkocr.agent.serving.config_sources import (
    OCR_MAX_PIXELS_VARIABLE,
    apply_table,
    check_environment,
    env_name,
    moved_keys,
    parse_int,
    parse_text,
    resolve_paths,
    set_key,
    settable_keys,
)
from vkocr.agent.serving.config_throughput import ExperimentalConfig, Resolved, ThroughputConfig, resolve
from vkocr.agent.serving.errors import ConfigError

MAX_DECODE_THREADS = 64  # server.decode_threads' range
MIN_SWITCH_MS, MAX_SWITCH_MS = 0.05, 50.0  # server.switch_interval_ms' range


@dataclass
class ServerConfig:
    listen: str = "127.0.0.1:50051"  # host:port; port 0 picks a free one
    allow_remote_plaintext: bool = False  # plaintext on a non-loopback address needs this explicitly
    max_message_bytes: int = 16 * 1024 * 1024  # requests (and responses) larger are refused
    queue_size: int = 32  # requests waiting for the GPU worker; more → RESOURCE_EXHAUSTED
    retry_after_s: float = 0.5  # the retry hint sent with RESOURCE_EXHAUSTED
    stream_window: int = 8  # requests of one stream read ahead of their answers
    # requests of one stream at the GPU at once (queued, or in the lanes until answered); the queue serves its
    # callers (each stream, each single request) in turn, so streams pumping frames cannot starve single requests
    # (agent/serving/job_queue.py)
    stream_queued: int = 4
    postproc_threads: int = 2  # plugin threads: overlap a request's CPU postprocessing with the next's GPU work
    # threads that check and decode requests before the GPU queue (Pillow decodes off the GIL; a 2 MP PNG takes
    # 30-45 ms, so at the agent's rate decoding PNGs wants every core); 0: one per core, at most 16
    decode_threads: int = 0
    # Python's GIL switch interval for the agent's process: how long a thread that returns from a GPU wait may
    # wait for the GIL while a decode or gRPC thread holds it (Python's default is 5 ms; 0.5 ms gave 26 % more
    # images/s at 16 clients on the H200 host, BENCHMARKS.md)
    switch_interval_ms: float = 0.5
    grace_s: float = 15.0  # on SIGTERM, how long in-flight work may take before the agent stops anyway
    status_interval_s: float = 5.0  # status Watch streams send at least this often
    latency_window_s: float = 60.0  # sliding window of the status p50/p99
    health_listen: str = ""  # host:port of a plaintext port serving only grpc.health.v1 (kubelet probes); off
    # Connections and streams (a careless or hostile network must not exhaust file descriptors or memory):
    # connections past max_connections are closed as soon as they are accepted (the client sees UNAVAILABLE;
    # open connections and the health_listen port are unaffected). Idle sockets cannot hold the slots: a
    # connection that has not finished its handshake (TLS, HTTP/2 preface and SETTINGS) within handshake_timeout_s
    # is closed, and so is one without a call for connection_idle_s (gRPC clients reconnect by themselves).
    max_connections: int = 256
    handshake_timeout_s: float = 1.0
    max_streams_per_connection: int = 32  # HTTP/2 concurrent streams; a client's extra calls wait for a free one
    keepalive_time_s: float = 60.0  # ping a connection after this long without traffic…
    keepalive_timeout_s: float = 20.0  # …and close it when the ping is not answered within this
    connection_idle_s: float = 10.0  # close a connection with no call for this long (clients reconnect)
    port_probe_s: float = 1.0  # how often readiness checks that the OCR port takes a new client
    stream_idle_s: float = 300.0  # end a RecognizeStream that sent no frame for this long with no answer due


@dataclass
class TlsConfig:
    cert: str = ""  # server certificate chain (PEM); with key, turns TLS on
    key: str = ""
    client_ca: str = ""  # CA that signs client certificates; set → mutual TLS, clients without one are refused


@dataclass
class DeviceConfig:
    # a Vulkan device: index, UUID or name part (lavapipe only so); "cpu": onnxruntime; "numpy": the reference
    # executor; empty: VKOCR_DEVICE, else the best ranked usable GPU, else "cpu" (a warning says why)
    select: str = ""
    cpu_fallback: bool = False  # when the device cannot be rebuilt after a loss, serve on the CPU backend
    cpu_threads: int = 0  # intra-op threads of the CPU backend (onnxruntime); 0: every core this process has
    # storage precision on a GPU: "auto" (fp16 where the model set's calibrated plan passed its sameness gate and
    # the device has 16-bit storage, else fp32), "fp32" or "fp16" (agent/ocr/precision.py)
    precision: str = "auto"


@dataclass
class ModelsConfig:
    # the model set served when no bundle store is used: a name of agent/ocr/model_files.py's MODEL_SETS (its files
    # in `dir`, else VKOCR_MODELS or ~/.local/share/vkocr/models); empty: `dir` as a folder (its modelset.toml, else
    # a known set's file names: agent/ocr/model_sets.py), else the default set
    set: str = ""
    dir: str = ""  # the three ONNX files when no bundle store is used; empty: models/ (or VKOCR_MODELS)
    store: str = ""  # model bundle store (versions, active pointer); empty: no bundles, serve `dir`
    trusted_keys: list[str] = field(default_factory=list)  # ed25519 public keys that may sign bundles
    keep: int = 3  # versions kept in the store
    max_bundle_bytes: int = 512 * 1024 * 1024
    upload_idle_s: float = 60.0  # an upload stream that sends no chunk for this long is aborted, its bytes removed
    # …and one that sends less than this per upload_idle_s window on average (a chunk of a few bytes every 20 s)
    upload_min_bytes_per_s: int = 1024


@dataclass
class AuthConfig:
    allowed_subjects: list[str] = field(default_factory=list)  # client certificate CNs allowed to manage models
    dev_allow_loopback: bool = False  # without TLS, allow model management from loopback (development only)


# Image sizes whose plans the agent records before it serves: camera frames (VGA, 720p, 1080p, portrait 1080p)
# and A4 pages scanned at 150 and 300 dpi.
DEFAULT_WARM_SHAPES = ("640x480", "1280x720", "1920x1080", "1080x1920", "1240x1754", "2480x3508")
MAX_WARM_SHAPES = 64
MAX_WARM_SIDE = 20000
WARM_SHAPE = re.compile(r"([0-9]{1,6})x([0-9]{1,6})")


@dataclass
class PlansConfig:
    # WIDTHxHEIGHT image sizes whose det/cls/rec plans are recorded before SERVING (and after a rebuild or an
    # activation, before the new models serve): the first requests of those sizes record nothing; [] = none
    warm_shapes: list[str] = field(default_factory=lambda: list(DEFAULT_WARM_SHAPES))


@dataclass
class MetricsConfig:
    listen: str = ""  # host:port of the Prometheus endpoint; empty: off
    public: bool = False  # a non-loopback listen address (plaintext, unauthenticated) needs this explicitly


@dataclass
class LoggingConfig:
    level: str = "info"
    json: bool = True  # one JSON object per line (structlog)


@dataclass
class AgentConfig:
    server: ServerConfig = field(default_factory=ServerConfig)
    throughput: ThroughputConfig = field(default_factory=ThroughputConfig)
    experimental: ExperimentalConfig = field(default_factory=ExperimentalConfig)
    tls: TlsConfig = field(default_factory=TlsConfig)
    device: DeviceConfig = field(default_factory=DeviceConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    plans: PlansConfig = field(default_factory=PlansConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    fleet: FleetConfig = field(default_factory=FleetConfig)
    ocr: dict[str, Any] = field(default_factory=dict)  # OcrOptions fields: the deployment's defaults

    def resolved(self) -> Resolved:
        """Every setting whose 0 means "automatic" (and the lanes with the overlap off), as the agent serves it:
        the one place that works them out (config_throughput.py; the agent logs them at start-up,
        `config_resolved`)."""
        return resolve(self.throughput, self.experimental, self.server.decode_threads, self.device.cpu_threads)

    def lane_resources(self) -> LaneResources:
        """What a served pipeline opens for its lanes: a stream each, and the image slots they hold."""
        resolved = self.resolved()
        detect, read = resolved.throughput.lanes
        return LaneResources(streams=detect + read, image_slots=resolved.throughput.image_slots,
                             queues=resolved.gpu_queues)

    @property
    def tls_enabled(self) -> bool:
        return bool(self.tls.cert or self.tls.key)

    def ocr_options(self) -> OcrOptions:
        """The deployment's options ([ocr] over OcrOptions' defaults): what a bundle's options apply over."""
        try:
            return OcrOptions().replace(**self.ocr)
        except OptionsError as exc:
            raise ConfigError(f"[ocr]: {exc}") from exc

    def chosen_models(self) -> ChosenModels:
        """The model set served without a store ([models] set and dir)."""
        try:
            return choose_models(self.models.set or None, Path(self.models.dir) if self.models.dir else None)
        except ModelSetError as exc:
            raise ConfigError(f"[models]: {exc}") from exc

    def served_options(self) -> OcrOptions:
        """The options served without a store: the model set's (its procedure), then [ocr] over them."""
        try:
            return self.chosen_models().ocr_options(self.ocr)
        except OptionsError as exc:
            raise ConfigError(f"[ocr]: {exc}") from exc

    def validate(self) -> None:
        host, _port = split_host_port(self.server.listen)
        if bool(self.tls.cert) != bool(self.tls.key):
            raise ConfigError("[tls]: cert and key go together; set both or neither")
        if self.tls.client_ca and not self.tls_enabled:
            raise ConfigError("[tls]: client_ca (mutual TLS) needs cert and key too")
        if not self.tls_enabled and not is_loopback(host) and not self.server.allow_remote_plaintext:
            raise ConfigError(
                f"[server]: plaintext on {host} would be reachable from the network; configure [tls] cert and "
                "key, listen on loopback, or set server.allow_remote_plaintext = true")
        if self.server.health_listen:
            split_host_port(self.server.health_listen)
        if self.auth.dev_allow_loopback and not is_loopback(host):
            raise ConfigError("[auth]: dev_allow_loopback needs server.listen on a loopback address")
        for name in ("queue_size", "stream_window", "stream_queued", "postproc_threads", "max_message_bytes"):
            if getattr(self.server, name) < 1:
                raise ConfigError(f"[server]: {name} must be positive, got {getattr(self.server, name)}")
        if not MIN_SWITCH_MS <= self.server.switch_interval_ms <= MAX_SWITCH_MS:
            raise ConfigError(f"[server]: switch_interval_ms must be {MIN_SWITCH_MS} to {MAX_SWITCH_MS}, got "
                              f"{self.server.switch_interval_ms}")
        if not 0 <= self.server.decode_threads <= MAX_DECODE_THREADS:
            raise ConfigError(f"[server]: decode_threads must be 0 (one per core) to {MAX_DECODE_THREADS}, got "
                              f"{self.server.decode_threads}")
        self.throughput.validate()
        self.experimental.validate()
        if self.server.status_interval_s < 0.05:
            raise ConfigError("[server]: status_interval_s must be at least 0.05")
        if self.models.set and self.models.set not in MODEL_SETS:
            raise ConfigError(f"[models]: set must be one of {', '.join(MODEL_SETS)} (or empty: the default, or "
                              f"dir's own), got {self.models.set!r}")
        if self.models.keep < 1:
            raise ConfigError("[models]: keep must be at least 1")
        if not 0 <= self.device.cpu_threads <= 1024:
            raise ConfigError(f"[device]: cpu_threads must be 0 (every core) to 1024, got {self.device.cpu_threads}")
        if self.device.precision not in PRECISIONS:
            raise ConfigError(f"[device]: precision must be one of {', '.join(PRECISIONS)}, got "
                              f"{self.device.precision!r}")
        self.validate_limits()
        self.fleet.validate(self.models.store)
        self.warm_sizes()
        self.ocr_options()

    def validate_limits(self) -> None:
        """The connection, upload and metrics limits: positive, and metrics on loopback unless made public."""
        for name in ("max_connections", "max_streams_per_connection"):
            if getattr(self.server, name) < 1:
                raise ConfigError(f"[server]: {name} must be positive, got {getattr(self.server, name)}")
        for name in ("handshake_timeout_s", "port_probe_s"):
            if not getattr(self.server, name) >= 0.1:  # `not >=` also refuses NaN
                raise ConfigError(f"[server]: {name} must be at least 0.1 s, got {getattr(self.server, name)}")
        if not self.server.connection_idle_s >= 0.5:
            idle = self.server.connection_idle_s
            raise ConfigError(f"[server]: connection_idle_s must be at least 0.5 s, got {idle}")
        for name in ("keepalive_time_s", "keepalive_timeout_s", "stream_idle_s"):
            if not getattr(self.server, name) >= 1.0:  # `not >=` also refuses NaN
                raise ConfigError(f"[server]: {name} must be at least 1 s, got {getattr(self.server, name)}")
        if not self.models.upload_idle_s >= 1.0:
            raise ConfigError(f"[models]: upload_idle_s must be at least 1 s, got {self.models.upload_idle_s}")
        if self.models.upload_min_bytes_per_s < 0:
            raise ConfigError("[models]: upload_min_bytes_per_s must be 0 (no minimum) or more, got "
                              f"{self.models.upload_min_bytes_per_s}")
        if self.metrics.listen:
            host, _ = split_host_port(self.metrics.listen)
            if not is_loopback(host) and not self.metrics.public:
                raise ConfigError(
                    f"[metrics]: listen {self.metrics.listen} would serve metrics in plaintext, without "
                    "authentication, to the network; listen on loopback (e.g. 127.0.0.1:9464), or set "
                    "metrics.public = true (vkocr serve --metrics-public) to expose them on purpose")

    def warm_sizes(self) -> list[tuple[int, int]]:
        """plans.warm_shapes as (width, height) pairs; ConfigError naming the key and the entry when one is not
        WIDTHxHEIGHT with sides 1…MAX_WARM_SIDE, or when there are more than MAX_WARM_SHAPES."""
        entries = self.plans.warm_shapes
        if len(entries) > MAX_WARM_SHAPES:
            raise ConfigError(f"[plans]: warm_shapes has {len(entries)} entries; at most {MAX_WARM_SHAPES}")
        sizes = []
        for entry in entries:
            match = WARM_SHAPE.fullmatch(entry) if isinstance(entry, str) else None
            sides = (int(match[1]), int(match[2])) if match else (0, 0)
            if not all(1 <= side <= MAX_WARM_SIDE for side in sides):
                raise ConfigError(f"[plans]: warm_shapes entry {entry!r} is not WIDTHxHEIGHT with each side "
                                  f"from 1 to {MAX_WARM_SIDE} (e.g. \"1280x720\")")
            sizes.append(sides)
        return sizes

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def split_host_port(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(f"listen address must be HOST:PORT, got {listen!r}")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_config(path: Path | None = None, *, env: Mapping[str, str] | None = None,
                overrides: Mapping[str, Any] | None = None) -> AgentConfig:
    """File, then ``VKOCR_<SECTION>_<KEY>`` variables, then ``overrides`` ({"server.listen": ...})."""
    config = AgentConfig()
    if path is not None:
        try:
            data = tomllib.loads(path.read_text())
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config {path} is not valid TOML: {exc}") from exc
        apply_table(config, data, str(path))
        resolve_paths(config, path.parent)
    env = os.environ if env is None else env
    check_environment(config, env)
    for section, key in settable_keys(config):
        name = env_name(section, key)
        if name in env:
            set_key(config, section, key, parse_text(config, section, key, env[name]), name)
    for old, key, new in moved_keys():  # VKOCR_SERVER_DETECT_LANES: taken as VKOCR_THROUGHPUT_DETECT_LANES, warned
        name = env_name(old, key)
        if name in env:
            set_key(config, old, key, parse_text(config, new, key, env[name]), name)
    if OCR_MAX_PIXELS_VARIABLE in env:
        set_key(config, "ocr", "max_pixels", parse_int(OCR_MAX_PIXELS_VARIABLE, env[OCR_MAX_PIXELS_VARIABLE]),
                OCR_MAX_PIXELS_VARIABLE)
    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        set_key(config, section, key, value, dotted)
    config.validate()
    return config
