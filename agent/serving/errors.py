"""The serving wing's errors: why a request got no result from the GPU worker (the gRPC boundary,
agent/serving/status_table.py, maps each to a status code), and what is wrong with the agent's configuration, its
TLS files, or a client's target."""

from __future__ import annotations

from pathlib import Path

from vkocr.agent.errors import AgentError


class WorkerError(AgentError):
    """Base of why a request got no result from the worker (the gRPC boundary, agent/serving/status_table.py, maps
    each subclass to a status code); raised only as one of its subclasses."""


class QueueFull(WorkerError):
    """Raised by `submit` when the bounded queue in front of the GPU is full."""


class NotServing(WorkerError):
    """Raised when the agent is not serving: no models loaded, loading, rebuilding, failed, or stopped before
    the request reached the GPU."""


class DeadlineDropped(WorkerError):
    """Raised when a request's deadline passed before its GPU work started (the worker drops it), or before
    its answer was ready (the service's log line and status for a handler gRPC cancelled at the deadline)."""


class CancelledDropped(WorkerError):
    """Raised when a request was cancelled (by its client, or by the agent's shutdown) before its GPU work
    started; the request is dropped."""


class DeviceFailed(WorkerError):
    """Raised when a request's device stages failed with a Vulkan error and a rebuild and retry did not
    recover (or the device cannot come back)."""


class ReadingLanesLost(WorkerError):
    """Raised when a flow stops with requests detected but no reading lane left to read them (every one failed),
    into the worker's recovery (never to a client): the worker rebuilds and hands them in again, as after a
    device failure."""


class ConfigError(AgentError):
    """Raised when the configuration file or an override (environment, command line) is invalid; the message
    names the key."""


class TlsFileError(AgentError):
    """Raised when a TLS certificate, key or CA file is missing, unreadable, not PEM, or when a key does not
    match its certificate. ``path`` is the file at fault."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"TLS file {str(path)!r}: {problem}")
        self.path = path


# Also a ValueError: the CLI (agent/cli/client_command.py, fleet_command.py) treats every ValueError of opening
# a client, this one and a bad TLS flag combination alike, as a usage error.
class TargetError(AgentError, ValueError):
    """Raised when a target is not HOST:PORT, a host does not resolve, or several hosts cannot share one
    channel (mixed IPv4/IPv6, or different names over TLS without a server name override)."""


class BrokenWire(AgentError):
    """Raised by agent/serving/wire_precheck.py when a request's bytes are not a protobuf message: the check
    steps aside and protobuf's own parser gives the refusal its words."""


class TooManyFields(AgentError):
    """Raised by agent/serving/wire_precheck.py when a request's options hold more fields than it walks (the
    request is refused INVALID_ARGUMENT before protobuf parses it)."""
