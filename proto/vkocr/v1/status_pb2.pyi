import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServingState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SERVING_STATE_UNSPECIFIED: _ClassVar[ServingState]
    LOADING: _ClassVar[ServingState]
    SERVING: _ClassVar[ServingState]
    REBUILDING: _ClassVar[ServingState]
    DRAINING: _ClassVar[ServingState]
    FAILED: _ClassVar[ServingState]
SERVING_STATE_UNSPECIFIED: ServingState
LOADING: ServingState
SERVING: ServingState
REBUILDING: ServingState
DRAINING: ServingState
FAILED: ServingState

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchStatusRequest(_message.Message):
    __slots__ = ("interval",)
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    interval: _duration_pb2.Duration
    def __init__(self, interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AgentStatus(_message.Message):
    __slots__ = ("sequence", "time", "state", "reason", "device", "backend", "model_version", "queue_depth", "queue_capacity", "in_flight", "latency_p50_ms", "latency_p99_ms", "latency_window_s", "requests_total", "errors_total", "rejected_total", "pool_used_bytes", "pool_reserved_bytes", "temperature_c", "power_w", "uptime_s", "device_rebuilds", "plans", "backend_reason")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    QUEUE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P50_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P99_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_WINDOW_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ERRORS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    REJECTED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    POOL_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    POOL_RESERVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_C_FIELD_NUMBER: _ClassVar[int]
    POWER_W_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    DEVICE_REBUILDS_FIELD_NUMBER: _ClassVar[int]
    PLANS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_REASON_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    time: _timestamp_pb2.Timestamp
    state: ServingState
    reason: str
    device: str
    backend: str
    model_version: str
    queue_depth: int
    queue_capacity: int
    in_flight: int
    latency_p50_ms: float
    latency_p99_ms: float
    latency_window_s: float
    requests_total: int
    errors_total: int
    rejected_total: int
    pool_used_bytes: int
    pool_reserved_bytes: int
    temperature_c: float
    power_w: float
    uptime_s: float
    device_rebuilds: int
    plans: _containers.RepeatedCompositeFieldContainer[ModelPlans]
    backend_reason: str
    def __init__(self, sequence: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., state: _Optional[_Union[ServingState, str]] = ..., reason: _Optional[str] = ..., device: _Optional[str] = ..., backend: _Optional[str] = ..., model_version: _Optional[str] = ..., queue_depth: _Optional[int] = ..., queue_capacity: _Optional[int] = ..., in_flight: _Optional[int] = ..., latency_p50_ms: _Optional[float] = ..., latency_p99_ms: _Optional[float] = ..., latency_window_s: _Optional[float] = ..., requests_total: _Optional[int] = ..., errors_total: _Optional[int] = ..., rejected_total: _Optional[int] = ..., pool_used_bytes: _Optional[int] = ..., pool_reserved_bytes: _Optional[int] = ..., temperature_c: _Optional[float] = ..., power_w: _Optional[float] = ..., uptime_s: _Optional[float] = ..., device_rebuilds: _Optional[int] = ..., plans: _Optional[_Iterable[_Union[ModelPlans, _Mapping]]] = ..., backend_reason: _Optional[str] = ...) -> None: ...

class ModelPlans(_message.Message):
    __slots__ = ("model", "plans", "plan_memory_bytes", "recorded_total", "distinct_shapes")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PLANS_FIELD_NUMBER: _ClassVar[int]
    PLAN_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    RECORDED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_SHAPES_FIELD_NUMBER: _ClassVar[int]
    model: str
    plans: int
    plan_memory_bytes: int
    recorded_total: int
    distinct_shapes: int
    def __init__(self, model: _Optional[str] = ..., plans: _Optional[int] = ..., plan_memory_bytes: _Optional[int] = ..., recorded_total: _Optional[int] = ..., distinct_shapes: _Optional[int] = ...) -> None: ...
