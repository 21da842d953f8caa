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
    SERVING_STATE_LOADING: _ClassVar[ServingState]
    SERVING_STATE_SERVING: _ClassVar[ServingState]
    SERVING_STATE_REBUILDING: _ClassVar[ServingState]
    SERVING_STATE_DRAINING: _ClassVar[ServingState]
    SERVING_STATE_FAILED: _ClassVar[ServingState]

class Backend(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKEND_UNSPECIFIED: _ClassVar[Backend]
    BACKEND_VULKAN: _ClassVar[Backend]
    BACKEND_CPU: _ClassVar[Backend]
    BACKEND_NUMPY: _ClassVar[Backend]

class ModelKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODEL_KIND_UNSPECIFIED: _ClassVar[ModelKind]
    MODEL_KIND_DET: _ClassVar[ModelKind]
    MODEL_KIND_CLS: _ClassVar[ModelKind]
    MODEL_KIND_REC: _ClassVar[ModelKind]
    MODEL_KIND_ORI: _ClassVar[ModelKind]
SERVING_STATE_UNSPECIFIED: ServingState
SERVING_STATE_LOADING: ServingState
SERVING_STATE_SERVING: ServingState
SERVING_STATE_REBUILDING: ServingState
SERVING_STATE_DRAINING: ServingState
SERVING_STATE_FAILED: ServingState
BACKEND_UNSPECIFIED: Backend
BACKEND_VULKAN: Backend
BACKEND_CPU: Backend
BACKEND_NUMPY: Backend
MODEL_KIND_UNSPECIFIED: ModelKind
MODEL_KIND_DET: ModelKind
MODEL_KIND_CLS: ModelKind
MODEL_KIND_REC: ModelKind
MODEL_KIND_ORI: ModelKind

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: AgentStatus
    def __init__(self, status: _Optional[_Union[AgentStatus, _Mapping]] = ...) -> None: ...

class WatchStatusRequest(_message.Message):
    __slots__ = ("interval",)
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    interval: _duration_pb2.Duration
    def __init__(self, interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WatchStatusResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: AgentStatus
    def __init__(self, status: _Optional[_Union[AgentStatus, _Mapping]] = ...) -> None: ...

class AgentStatus(_message.Message):
    __slots__ = ("sequence", "time", "state", "reason", "device", "backend", "model_version", "queue_depth", "queue_capacity", "in_flight", "latency_p50", "latency_p99", "latency_window", "requests_total", "errors_total", "rejected_total", "pool_used_bytes", "pool_reserved_bytes", "temperature_c", "power_w", "uptime", "device_rebuilds", "plans", "backend_reason", "precision", "precision_reason")
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
    LATENCY_P50_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P99_FIELD_NUMBER: _ClassVar[int]
    LATENCY_WINDOW_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ERRORS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    REJECTED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    POOL_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    POOL_RESERVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_C_FIELD_NUMBER: _ClassVar[int]
    POWER_W_FIELD_NUMBER: _ClassVar[int]
    UPTIME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_REBUILDS_FIELD_NUMBER: _ClassVar[int]
    PLANS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_REASON_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    PRECISION_REASON_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    time: _timestamp_pb2.Timestamp
    state: ServingState
    reason: str
    device: str
    backend: Backend
    model_version: str
    queue_depth: int
    queue_capacity: int
    in_flight: int
    latency_p50: _duration_pb2.Duration
    latency_p99: _duration_pb2.Duration
    latency_window: _duration_pb2.Duration
    requests_total: int
    errors_total: int
    rejected_total: int
    pool_used_bytes: int
    pool_reserved_bytes: int
    temperature_c: float
    power_w: float
    uptime: _duration_pb2.Duration
    device_rebuilds: int
    plans: _containers.RepeatedCompositeFieldContainer[ModelPlans]
    backend_reason: str
    precision: str
    precision_reason: str
    def __init__(self, sequence: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., state: _Optional[_Union[ServingState, str]] = ..., reason: _Optional[str] = ..., device: _Optional[str] = ..., backend: _Optional[_Union[Backend, str]] = ..., model_version: _Optional[str] = ..., queue_depth: _Optional[int] = ..., queue_capacity: _Optional[int] = ..., in_flight: _Optional[int] = ..., latency_p50: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., latency_p99: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., latency_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., requests_total: _Optional[int] = ..., errors_total: _Optional[int] = ..., rejected_total: _Optional[int] = ..., pool_used_bytes: _Optional[int] = ..., pool_reserved_bytes: _Optional[int] = ..., temperature_c: _Optional[float] = ..., power_w: _Optional[float] = ..., uptime: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., device_rebuilds: _Optional[int] = ..., plans: _Optional[_Iterable[_Union[ModelPlans, _Mapping]]] = ..., backend_reason: _Optional[str] = ..., precision: _Optional[str] = ..., precision_reason: _Optional[str] = ...) -> None: ...

class ModelPlans(_message.Message):
    __slots__ = ("model", "plans", "plan_memory_bytes", "recorded_total", "distinct_shapes")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PLANS_FIELD_NUMBER: _ClassVar[int]
    PLAN_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    RECORDED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_SHAPES_FIELD_NUMBER: _ClassVar[int]
    model: ModelKind
    plans: int
    plan_memory_bytes: int
    recorded_total: int
    distinct_shapes: int
    def __init__(self, model: _Optional[_Union[ModelKind, str]] = ..., plans: _Optional[int] = ..., plan_memory_bytes: _Optional[int] = ..., recorded_total: _Optional[int] = ..., distinct_shapes: _Optional[int] = ...) -> None: ...
