"""Prometheus metrics of one agent, in a registry of its own (several agents may share a process).

Names, with the default namespace: `vkocr_requests_total{method,code}`, `vkocr_request_seconds{method}`,
`vkocr_stage_seconds{stage}` (0.5 ms to 60 s: a CPU-only board's stages take seconds), gauges
`vkocr_queue_depth`, `vkocr_queue_capacity` (requests the queue holds before RESOURCE_EXHAUSTED),
`vkocr_in_flight`, `vkocr_pool_used_bytes`, `vkocr_pool_reserved_bytes`, `vkocr_serving`, counters
`vkocr_device_rebuilds_total`, `vkocr_rejected_total`, and
`vkocr_build_info{version,device,backend,backend_reason,precision,precision_reason,model_version}` (which backend
and storage precision serve, and why);
per model (det, cls, rec) the gauges `vkocr_plans{model}` and `vkocr_plan_memory_bytes{model}` and the counter
`vkocr_plans_recorded_total{model}` (PlanCollector, once `watch_plans` is called); the device's
`vkocr_temperature_celsius` and `vkocr_power_watts` as the status service reads them (SensorCollector, once
`watch_sensors` is called), each absent while the platform does not tell it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vkocr.agent.serving.config import is_loopback
from vkocr.agent.serving.errors import ConfigError
from vkocr.log import get_logger

if TYPE_CHECKING:
    from vkocr.agent.serving.plans import PlanStats
    from vkocr.agent.serving.sensors import Sensors

log = get_logger(__name__)

STAGES = ("queue", "decode", "det", "db", "batch_wait", "cls", "rec", "postproc", "plugins")
# Timings a request reports that are no stage of their own, so left out without a warning: "total" is the whole
# request (vkocr_request_seconds has it), "plugin.<name>" one plugin's share of "plugins".
NOT_STAGES = frozenset({"total"})
STAGE_PART_PREFIX = "plugin."
# seconds: a GPU's stages take milliseconds, the CPU backend's on a small board seconds (rec, tens of lines)
STAGE_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0,
                 60.0)
REQUEST_BUCKETS = (*STAGE_BUCKETS, 120.0, 300.0, 600.0)  # up to the 600 s `vkocr client` waits on lavapipe


class MetricsServer:
    """The /metrics HTTP endpoint serving one registry; `shutdown()` stops it and closes its socket."""

    def __init__(self, httpd: WSGIServer, thread: threading.Thread) -> None:
        self._httpd, self._thread = httpd, thread
        self.port: int = httpd.server_address[1]

    def shutdown(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5.0)


class Metrics:
    def __init__(self, namespace: str = "vkocr") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.namespace = namespace
        ns, reg = namespace, self.registry
        self.requests = Counter("requests", "Requests answered, by method and gRPC status code name",
                                ["method", "code"], namespace=ns, registry=reg)
        self.request_seconds = Histogram("request_seconds", "Time from receiving a request to answering it",
                                         ["method"], namespace=ns, registry=reg, buckets=REQUEST_BUCKETS)
        self.stage_seconds = Histogram("stage_seconds", "Time per pipeline stage (queue: waiting for the GPU)",
                                       ["stage"], namespace=ns, registry=reg, buckets=STAGE_BUCKETS)
        for stage in STAGES:  # every stage shows up from the first scrape, at zero
            self.stage_seconds.labels(stage)
        self.queue_depth = Gauge("queue_depth", "Requests waiting for the GPU worker", namespace=ns, registry=reg)
        self.queue_capacity = Gauge("queue_capacity", "Requests the queue holds; more are refused "
                                    "(RESOURCE_EXHAUSTED)", namespace=ns, registry=reg)
        self.in_flight = Gauge("in_flight", "Requests accepted and not yet answered", namespace=ns, registry=reg)
        self.pool_used_bytes = Gauge("pool_used_bytes", "GPU memory in the engine pool's live allocations",
                                     namespace=ns, registry=reg)
        self.pool_reserved_bytes = Gauge("pool_reserved_bytes", "GPU memory the engine pool holds from the driver",
                                         namespace=ns, registry=reg)
        self.serving = Gauge("serving", "1 while the agent serves requests, else 0", namespace=ns, registry=reg)
        self.device_rebuilds = Counter("device_rebuilds", "Times the device context was rebuilt",
                                       namespace=ns, registry=reg)
        self.rejected_requests = Counter("rejected", "Requests refused because the queue was full",
                                         namespace=ns, registry=reg)
        self.build = Info("build", "Agent version, device, backend (and why it serves) and active model version",
                          namespace=ns, registry=reg)
        self._unknown_stages: set[str] = set()

    def observe_request(self, method: str, code_name: str, seconds: float, stages_ms: Mapping[str, float]) -> None:
        """One answered request: its gRPC status code name ('OK', 'INVALID_ARGUMENT', ...), its total time, and
        its per-stage times in milliseconds (stages outside STAGES are left out, to bound the label set; a
        name that is neither a stage nor a known timing of another kind is logged once)."""
        self.requests.labels(method, code_name).inc()
        self.request_seconds.labels(method).observe(seconds)
        for stage, ms in stages_ms.items():
            if stage in STAGES:
                self.stage_seconds.labels(stage).observe(ms / 1e3)
            elif stage in NOT_STAGES or stage.startswith(STAGE_PART_PREFIX):
                continue
            elif stage not in self._unknown_stages:
                self._unknown_stages.add(stage)
                log.warning("metrics_unknown_stage", stage=stage, known=STAGES)

    def set_queue_capacity(self, capacity: int) -> None:
        self.queue_capacity.set(capacity)

    def set_serving(self, serving: bool) -> None:
        self.serving.set(1 if serving else 0)

    def rebuilt(self) -> None:
        """The device context was rebuilt once more."""
        self.device_rebuilds.inc()

    def rejected(self) -> None:
        """One request refused for a full queue (its answer goes through `observe_request` as well)."""
        self.rejected_requests.inc()

    def set_info(self, version: str, device: str, model_version: str, *, backend: str = "",
                 backend_reason: str = "", precision: str = "", precision_reason: str = "") -> None:
        self.build.info({"version": version, "device": device, "backend": backend,
                         "backend_reason": backend_reason, "precision": precision,
                         "precision_reason": precision_reason, "model_version": model_version})

    def watch_plans(self, snapshot: Callable[[], PlanStats]) -> None:
        """Export the plan statistics `snapshot()` returns at each scrape (it must not block)."""
        self.registry.register(PlanCollector(snapshot, self.namespace))

    def watch_sensors(self, read: Callable[[], Sensors | None]) -> None:
        """Export the temperature and power `read()` returns at each scrape (None: the device has no sensors)."""
        self.registry.register(SensorCollector(read, self.namespace))

    def render(self) -> bytes:
        """The text exposition format, as a scrape would get it."""
        return generate_latest(self.registry)

    def start_http(self, host: str, port: int, *, public: bool = False) -> tuple[MetricsServer, int]:
        """Serve /metrics on a daemon thread; port 0 picks a free port, returned with the server. Plaintext and
        unauthenticated: a non-loopback `host` is refused unless `public` (config metrics.public)."""
        if not public and not is_loopback(host):
            raise ConfigError(f"[metrics]: {host} is not a loopback address; metrics are plaintext and "
                              "unauthenticated: set metrics.public = true (--metrics-public) to serve them there")
        httpd, thread = start_http_server(port, addr=host, registry=self.registry)
        server = MetricsServer(httpd, thread)
        return server, server.port  # the agent logs metrics_listening, once


class PlanCollector(Collector):
    """Prometheus: `vkocr_plans{model}`, `vkocr_plan_memory_bytes{model}` and `vkocr_plans_recorded_total{model}`
    from the published snapshot, read at scrape time (never from the GPU worker)."""

    def __init__(self, snapshot: Callable[[], PlanStats], namespace: str = "vkocr") -> None:
        self._snapshot = snapshot
        self._ns = namespace

    def collect(self) -> Iterator[Metric]:
        stats = self._snapshot()
        plans = GaugeMetricFamily(f"{self._ns}_plans", "Plans (a model recorded for one input shape) cached now",
                                  labels=["model"])
        memory = GaugeMetricFamily(f"{self._ns}_plan_memory_bytes", "Device and staging memory the cached plans "
                                   "hold", labels=["model"])
        recorded = CounterMetricFamily(f"{self._ns}_plans_recorded", "Plans recorded since start, over every "
                                       "device rebuild and model activation", labels=["model"])
        for entry in stats.models:
            plans.add_metric([entry.model], entry.plans)
            memory.add_metric([entry.model], entry.plan_memory_bytes)
            recorded.add_metric([entry.model], entry.recorded_total)
        yield from (plans, memory, recorded)


class SensorCollector(Collector):
    """Prometheus: `vkocr_temperature_celsius` and `vkocr_power_watts`, read at scrape time; a reading the
    platform does not give is left out, not exported as 0 (which would read as a cold, idle device)."""

    def __init__(self, read: Callable[[], Sensors | None], namespace: str = "vkocr") -> None:
        self._read = read
        self._ns = namespace

    def describe(self) -> Iterator[Metric]:
        """The families without samples: registering must not wait for NVML or sysfs."""
        yield self._temperature()
        yield self._power()

    def collect(self) -> Iterator[Metric]:
        sensors = self._read()
        if sensors is not None and sensors.temperature_c is not None:
            yield self._temperature(sensors.temperature_c)
        if sensors is not None and sensors.power_w is not None:
            yield self._power(sensors.power_w)

    def _temperature(self, celsius: float | None = None) -> Metric:
        return GaugeMetricFamily(f"{self._ns}_temperature_celsius", "Device temperature (NVML, hwmon or a GPU "
                                 "thermal zone)", value=celsius)

    def _power(self, watts: float | None = None) -> Metric:
        return GaugeMetricFamily(f"{self._ns}_power_watts", "Device power draw (NVML or hwmon)", value=watts)
