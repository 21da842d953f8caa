"""The agent process: the asyncio gRPC server with the OCR, status, health and reflection services, the GPU
worker behind them, and the optional Prometheus endpoint.

With `[models] store` set, the agent serves the store's active version (the bundle's OCR options over the
deployment's `[ocr]`), and the Models service uploads, activates and rolls back versions (agent/bundles/activation.py);
without an active version it stays up in state FAILED until one is activated. Without a store it serves the
model files in `[models] dir`.

Health (grpc.health.v1) follows the serving state: NOT_SERVING while models load, while the device is rebuilt
and while draining; SERVING when a request would succeed. The services run on one event loop, so open streams
and a full queue never take the threads that health checks need. Service `vkocr.liveness` is SERVING while the
process runs (until the drain): the liveness probe's; so are `vkocr.v1.StatusService` and
`vkocr.v1.ModelsService`, which answer whatever the device does. Connections are bounded ([server]
max_connections, handshake and idle timeouts, keepalive: server_options.py), and readiness is NOT_SERVING while
the OCR port takes no new client (agent/serving/port_probe.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

import vkocr
from vkocr.agent.bundles.activation import Activator
from vkocr.agent.bundles.signing import TrustedKeys
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.bundles.uploads import UploadArea
from vkocr.agent.ocr.model_files import missing_or_bad
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.agent.serving.config import AgentConfig, split_host_port
from vkocr.agent.serving.malformed import MalformedRequests
from vkocr.agent.serving.metrics import Metrics
from vkocr.agent.serving.models_service import ModelsService
from vkocr.agent.serving.ocr_service import OcrService
from vkocr.agent.serving.port_probe import PortProbe, probe_host
from vkocr.agent.serving.rebuild import PipelineFactory
from vkocr.agent.serving.sensors import Sensors, serving_device_sensors
from vkocr.agent.serving.server_options import ocr_prechecks, server_options
from vkocr.agent.serving.state import ServingState, StateBoard, StateSnapshot
from vkocr.agent.serving.stats import RequestStats
from vkocr.agent.serving.status_service import StatusService
from vkocr.agent.serving.systemd_notify import SystemdNotifier
from vkocr.agent.serving.worker import GpuWorker
from vkocr.engine.errors import VkocrError
from vkocr.log import get_logger
from vkocr.v1 import models_pb2, models_pb2_grpc, ocr_pb2, ocr_pb2_grpc, status_pb2, status_pb2_grpc

log = get_logger(__name__)

OCR_SERVICE = ocr_pb2.DESCRIPTOR.services_by_name["OcrService"].full_name
STATUS_SERVICE = status_pb2.DESCRIPTOR.services_by_name["StatusService"].full_name
MODELS_SERVICE = models_pb2.DESCRIPTOR.services_by_name["ModelsService"].full_name
HEALTH_SERVICES = ("", OCR_SERVICE)  # "" is the whole agent
# SERVING from start until the drain, whatever the device does: what a liveness probe asks (a device rebuild
# turns the services above NOT_SERVING, which must take the board out of rotation, not restart it).
LIVENESS_SERVICE = "vkocr.liveness"
# Services that do not need the device: SERVING from start until the drain, as liveness is.
CONTROL_SERVICES = (STATUS_SERVICE, MODELS_SERVICE)


class Agent:
    """One running agent. Create, `await start()`, and `await stop(grace)`; `port` is the bound port.
    `open_pipeline` (tests, embedding) replaces the models the configuration names, store included."""

    def __init__(self, config: AgentConfig, *, open_pipeline: PipelineFactory | None = None,
                 model_version: str | None = None) -> None:
        self.config = config
        self.state = StateBoard()
        self.stats = RequestStats(window_s=config.server.latency_window_s)
        self.metrics = Metrics() if config.metrics.listen else None
        self.metrics_server: Any = None
        # a bundle's options apply over the deployment's, and so do those of a caller's own models; the
        # configured set's (its procedure) come first when the agent serves that set
        serves_set = open_pipeline is None and not config.models.store
        self.options = config.served_options() if serves_set else config.ocr_options()
        self.store: ModelStore | None = None
        self.activator: Activator | None = None
        self.models: ModelsService | None = None
        use_cpu_fallback = config.device.cpu_fallback and config.device.select not in ("cpu", "numpy")
        if open_pipeline is None and config.models.store:
            models = config.models
            self.store = ModelStore(Path(models.store), TrustedKeys.from_paths(map(Path, models.trusted_keys)),
                                    keep=models.keep, max_bundle_bytes=models.max_bundle_bytes)
            self.activator = Activator(self.store, self.state, self.options, config.device.select or None,
                                       on_swap=self._on_swap, cpu_threads=config.device.cpu_threads,
                                       lanes=config.lane_resources(), precision=config.device.precision)
            factory: PipelineFactory = self.activator.serving_factory
            cpu = self.activator.cpu_factory if use_cpu_fallback else None
            version = ""  # the activator names it once the active version has loaded
        else:
            factory = open_pipeline or self._default_factory()
            cpu = self._cpu_factory() if use_cpu_fallback else None
            version = model_version or default_model_version(config)
        self.worker = GpuWorker(factory, self.state, model_version=version, queue_size=config.server.queue_size,
                                stream_queued=config.server.stream_queued,
                                postproc_threads=config.server.postproc_threads,
                                overlap=config.experimental.overlap, cpu_fallback=cpu,
                                warm_sizes=config.warm_sizes(), flow=config.resolved().throughput)
        if self.activator is not None:
            self.activator.attach(self.worker)
        self.health = HealthServicer()
        self.server: grpc.aio.Server | None = None
        self.port = 0
        self.health_server: grpc.aio.Server | None = None
        self.health_port = 0
        self._unsubscribe: Callable[[], None] | None = None
        self._loading: asyncio.Future[str | None] | None = None
        self._state_tasks: set[asyncio.Task[None]] = set()
        self._rebuilds_counted = 0
        self.ocr: OcrService | None = None
        # systemd's Type=notify (deploy/vkocr.service); does nothing without $NOTIFY_SOCKET
        self.systemd = SystemdNotifier.from_environment()
        self._watchdog: asyncio.Task[None] | None = None
        self.fleet_client: Any = None  # agent/fleet/board.py's BoardClient, with [fleet] broker
        self._fleet_start: asyncio.Task[None] | None = None
        self.port_probe: PortProbe | None = None  # readiness also needs the OCR port to take a client
        self._probing: asyncio.Task[None] | None = None

    def _model_paths(self) -> dict[str, Path]:
        return self.config.chosen_models().paths

    def _default_factory(self) -> PipelineFactory:
        select, threads = self.config.device.select or None, self.config.device.cpu_threads
        lanes, precision = self.config.lane_resources(), self.config.device.precision
        chosen = self.config.chosen_models()
        model_set = chosen.known.name if chosen.known is not None else None
        return lambda: OcrPipeline.open(select, options=self.options, model_paths=self._model_paths(),
                                        cpu_threads=threads, lanes=lanes, precision=precision, model_set=model_set)

    def _cpu_factory(self) -> PipelineFactory:
        threads = self.config.device.cpu_threads
        return lambda: OcrPipeline.open("cpu", options=self.options, model_paths=self._model_paths(),
                                        cpu_threads=threads)

    def _on_swap(self, version: str, options: OcrOptions) -> None:
        """A new version serves (activator's thread): requests take its options from now on."""
        self.options = options

    async def start(self) -> None:
        config = self.config
        # the process is the agent's now: a thread back from a GPU wait gets the GIL within this, not 5 ms
        sys.setswitchinterval(config.server.switch_interval_ms / 1e3)
        # a request that is not valid protobuf is INVALID_ARGUMENT; a stream's bad frame gets its own answer
        per_frame = [f"/{OCR_SERVICE}/RecognizeStream"]
        server = grpc.aio.server(interceptors=[MalformedRequests(per_frame, ocr_prechecks(OCR_SERVICE))],
                                 options=server_options(config))
        self.ocr = OcrService(self.worker, self.stats, self.metrics,
                              retry_after_s=config.server.retry_after_s, stream_window=config.server.stream_window,
                              stream_idle_s=config.server.stream_idle_s,
                              decode_threads=config.resolved().decode_threads,
                              decode_processes=config.experimental.decode_processes)
        ocr_pb2_grpc.add_OcrServiceServicer_to_server(self.ocr, server)
        status_pb2_grpc.add_StatusServiceServicer_to_server(
            StatusService(self.state, self.worker, self.stats, interval_s=config.server.status_interval_s,
                          max_watches_per_connection=max(1, config.server.max_streams_per_connection // 2)), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        services = [OCR_SERVICE, STATUS_SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name]
        if self.store is not None and self.activator is not None:
            recovery = self.store.recover()
            if recovery.active_changed or recovery.removed_incomplete:
                log.warning("model_store_recovered", summary=recovery.describe())
            uploads = UploadArea(self.store.root / "uploads", config.models.max_bundle_bytes)
            uploads.clean_stale()
            self.models = ModelsService(config, self.store, self.activator, uploads)
            models_pb2_grpc.add_ModelsServiceServicer_to_server(self.models, server)
            services.append(MODELS_SERVICE)
        reflection.enable_server_reflection((*services, reflection.SERVICE_NAME), server)
        for service in HEALTH_SERVICES:
            await self.health.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        for service in (LIVENESS_SERVICE, *CONTROL_SERVICES):
            await self.health.set(service, health_pb2.HealthCheckResponse.SERVING)
        loop = asyncio.get_running_loop()

        def on_change(snap: StateSnapshot) -> None:
            loop.call_soon_threadsafe(self._follow_state, snap)

        self._unsubscribe = self.state.subscribe(on_change)
        # WATCHDOG=1 from a task on this loop: the pings stop when the loop is stuck, and systemd restarts us
        self._watchdog = loop.create_task(self.systemd.watchdog())
        host, port = split_host_port(config.server.listen)
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            if config.tls_enabled:
                from vkocr.agent.serving import tls

                credentials = tls.server_credentials(
                    Path(config.tls.cert), Path(config.tls.key),
                    Path(config.tls.client_ca) if config.tls.client_ca else None,
                    require_client_cert=bool(config.tls.client_ca))
                self.port = server.add_secure_port(address, credentials)
            else:
                self.port = server.add_insecure_port(address)
        except RuntimeError as exc:
            raise VkocrError(f"cannot listen on {config.server.listen}: {exc}") from exc
        if self.port == 0:
            raise VkocrError(f"cannot listen on {config.server.listen} (in use, or not an address of this host)")
        if self.metrics is not None:
            self._export_gauges(self.metrics)
            m_host, m_port = split_host_port(config.metrics.listen)
            self.metrics_server, bound = self.metrics.start_http(m_host, m_port, public=config.metrics.public)
            log.info("metrics_listening", address=f"{m_host}:{bound}")
        await server.start()
        self.server = server
        self.port_probe = PortProbe(probe_host(host), self.port, config.server.port_probe_s, self._port_changed)
        self._probing = loop.create_task(self.port_probe.run())
        if config.server.health_listen:
            await self._start_health_port(config.server.health_listen)
        if self.activator is not None:
            # Verifies and loads the store's active version on a thread, then starts the worker with it.
            self._loading = loop.run_in_executor(None, self.activator.load_active)
            if config.fleet.broker and self.store is not None:  # pulls updates once that version has loaded
                from vkocr.agent.fleet.board import board_client

                self.fleet_client = board_client(config, self.store, self.activator, self.state)
                self._fleet_start = loop.create_task(self._start_fleet_client(self.fleet_client))
        else:
            self.worker.start()  # loads the models on the worker thread; health turns SERVING when done
        log.info("listening", address=f"{host}:{self.port}", tls=config.tls_enabled,
                 mutual_tls=bool(config.tls.client_ca))
        log.info("config_resolved", **config.resolved().log_fields())

    async def _start_fleet_client(self, client: Any) -> None:
        if self._loading is not None:
            await asyncio.wait([self._loading])
        await asyncio.get_running_loop().run_in_executor(None, client.start)

    async def _start_health_port(self, listen: str) -> None:
        """A plaintext port with grpc.health.v1 only, for probes that cannot speak TLS (the kubelet's): it
        tells whether the agent serves, and nothing else."""
        host, port = split_host_port(listen)
        health_server = grpc.aio.server(interceptors=[MalformedRequests()], options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(self.health, health_server)
        self.health_port = health_server.add_insecure_port(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        if self.health_port == 0:
            raise VkocrError(f"cannot listen on {listen} for health checks (in use, or not an address here)")
        await health_server.start()
        self.health_server = health_server
        log.info("health_listening", address=f"{host}:{self.health_port}", tls=False)

    def _export_gauges(self, metrics: Metrics) -> None:
        """Queue, in-flight, pool, plan and sensor gauges read when Prometheus scrapes, not when a status client
        asks."""
        metrics.set_queue_capacity(self.worker.queue_capacity)
        metrics.queue_depth.set_function(self.worker.queue_depth)
        metrics.in_flight.set_function(lambda: self.stats.snapshot().in_flight)
        metrics.pool_used_bytes.set_function(lambda: self.worker.pool_usage()[0])
        metrics.pool_reserved_bytes.set_function(lambda: self.worker.pool_usage()[1])
        metrics.watch_plans(lambda: self.worker.plan_stats)

        def sensors() -> Sensors | None:  # as the status service reads them
            snapshot = self.state.get()
            return serving_device_sensors(snapshot.backend, snapshot.device)

        metrics.watch_sensors(sensors)

    def _follow_state(self, snapshot: StateSnapshot) -> None:
        """On the loop: apply a state change, keeping the task referenced until it is done."""
        task = asyncio.get_running_loop().create_task(self._on_state(snapshot))
        self._state_tasks.add(task)
        task.add_done_callback(self._state_tasks.discard)

    async def _on_state(self, changed: StateSnapshot) -> None:
        """Health and metrics follow the state as it is now (changes from several threads may arrive out of
        order); the log line records the change that was made."""
        log.info("state", state=changed.state.value, reason=changed.reason, device=changed.device,
                 backend=changed.backend, backend_reason=changed.backend_reason, precision=changed.precision,
                 model_version=changed.model_version,
                 device_rebuilds=changed.device_rebuilds)
        snapshot = self.state.get()
        await self._set_readiness()
        if snapshot.state is not ServingState.DRAINING:  # stop() has said STOPPING=1; no READY=1 after it
            self.systemd.follow(snapshot)
        if self.metrics is not None:
            self.metrics.set_serving(snapshot.state is ServingState.SERVING)
            self.metrics.set_info(vkocr.__version__, snapshot.device, snapshot.model_version,
                                  backend=snapshot.backend, backend_reason=snapshot.backend_reason,
                                  precision=snapshot.precision, precision_reason=snapshot.precision_reason)
            for _ in range(snapshot.device_rebuilds - self._rebuilds_counted):
                self.metrics.rebuilt()
            self._rebuilds_counted = max(self._rebuilds_counted, snapshot.device_rebuilds)

    async def _set_readiness(self) -> None:
        """Readiness ("" and the OCR service): SERVING when the state is, and the OCR port takes a client."""
        takes_clients = self.port_probe is None or self.port_probe.takes_clients
        serving = self.state.get().state is ServingState.SERVING and takes_clients
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for service in HEALTH_SERVICES:
            await self.health.set(service, status)

    async def _port_changed(self, takes_clients: bool) -> None:
        if self.state.get().state is not ServingState.DRAINING:  # the drain's NOT_SERVING stays
            await self._set_readiness()

    async def stop(self, grace_s: float | None = None) -> None:
        """Drain: health NOT_SERVING, new requests refused, in-flight ones answered for up to `grace_s`."""
        grace = self.config.server.grace_s if grace_s is None else grace_s
        started = time.monotonic()
        deadline = started + grace  # one budget for every step, so the whole drain fits the grace period

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        self.state.set(state=ServingState.DRAINING, reason="stopping")
        self.systemd.stopping()  # STOPPING=1 at once: systemd knows the drain has begun
        if self._probing is not None:
            self._probing.cancel()
        await self.health.enter_graceful_shutdown()
        loop = asyncio.get_running_loop()
        if self.fleet_client is not None and self._fleet_start is not None:  # no update after this; offline
            await asyncio.wait([self._fleet_start], timeout=left())
            await loop.run_in_executor(None, self.fleet_client.stop)
        if self.activator is not None:  # no activation after this; one in progress may finish within grace
            await loop.run_in_executor(None, self.activator.stop, left())
        worker_started = self.activator is None or self.activator.worker_started
        worker_done = loop.run_in_executor(None, self.worker.stop, left()) if worker_started else None
        if self.server is not None:
            await self.server.stop(left())
        if self.health_server is not None:  # probes see NOT_SERVING until the very end
            await self.health_server.stop(0)
        if worker_done is not None:
            await worker_done
        if self.ocr is not None:
            self.ocr.close()
        if self.models is not None:
            self.models.close()
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
        if self._watchdog is not None:  # pings go on through the drain, which can take grace_s
            self._watchdog.cancel()
        log.info("stopped", drained_s=round(time.monotonic() - started, 3))


def default_model_version(config: AgentConfig) -> str:
    """The version the agent reports when it serves model files rather than a bundle: a known set's own files
    are '<set>-rapidocr-<release>' ('ppocrv4-rapidocr-1.4.4', 'ppocrv6-small-rapidocr-3.10.0'); other files
    are named by a hash of their contents."""
    chosen = config.chosen_models()
    known = chosen.known
    if known is not None and not missing_or_bad(chosen.paths["det"].parent, known.files):
        return f"{known.name}-rapidocr-{known.wheel.partition('==')[2]}"
    digest = hashlib.sha256()
    for role in ("det", "cls", "rec"):
        path = chosen.paths[role]
        digest.update(path.read_bytes() if path.exists() else b"missing")
    return f"local-{digest.hexdigest()[:12]}"


def serve(config: AgentConfig, *, on_listening: Callable[[Agent], None] | None = None) -> int:
    """Run the agent until SIGTERM or SIGINT, then drain and stop. The exit status."""

    async def main() -> None:
        agent = Agent(config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):  # before start: a signal during loading drains too
            loop.add_signal_handler(sig, stop.set)
        await agent.start()
        if on_listening is not None:
            on_listening(agent)
        await stop.wait()
        log.info("signal_received", grace_s=config.server.grace_s)
        await agent.stop()

    asyncio.run(main())
    return 0
