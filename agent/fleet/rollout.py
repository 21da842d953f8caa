"""Fleet updates: a signed bundle onto several agents, canary first, then in batches, with automatic rollback.

    preflight  every agent answers ListBundles (reachable, and this client may manage its models): its active
               version
    upload     the bundle to every agent, in chunks; a broken upload resumes where the agent says it stopped
    canary     activate on the first `canary` agents (each runs the bundle's self-tests before it swaps), soak
    batches    then `batch` agents at a time, each batch activated and soaked before the next
    rollback   on any failure: Rollback on every agent this rollout switched; the others never changed

The soak watches each updated agent for `soak_s` through grpc.health.v1 Watch and the WatchStatus stream: the gate
fails when health leaves SERVING, the agent stops serving the new version, its errors grow beyond
`max_error_rate` of its requests, or its p99 latency passes `max_p99_ms`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from vkocr.agent.ocr.model_files import sha256_of
from vkocr.agent.serving.client import OcrClient
from vkocr.agent.serving.durations import ms_of
from vkocr.agent.serving.proto_enums import shown_name
from vkocr.agent.serving.rpc_status import describe_rpc_error
from vkocr.log import get_logger
from vkocr.v1 import models_pb2, status_pb2

log = get_logger(__name__)

CHUNK_BYTES = 1 << 20
UPLOAD_ATTEMPTS = 4
# A broken connection, a chunk the agent wanted from another offset, another stream on the same upload: resume.
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED,
                       grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.CANCELLED, grpc.StatusCode.RESOURCE_EXHAUSTED})
MAX_PARALLEL = 8
ASK_ACTIVE_ATTEMPTS = 5  # after a failed Activate: how often to ask the agent which version it serves

Connect = Callable[[str], OcrClient]
Say = Callable[[str], None]


# --- upload ---------------------------------------------------------------------------------------------------


def upload_id_for(sha256: str) -> str:
    """One id per bundle content, so an upload broken in one run resumes in the next."""
    return f"bundle-{sha256[:40]}"


def _chunks(path: Path, upload_id: str, offset: int, size: int, sha256: str,
            chunk_bytes: int) -> Iterator[models_pb2.UploadBundleRequest]:
    """From `offset` to the end; the first chunk names the whole bundle (and is sent even when empty, so a
    complete upload the agent has not stored yet is stored)."""
    with path.open("rb") as f:
        f.seek(offset)
        first = True
        while first or offset < size:
            data = f.read(chunk_bytes)
            yield models_pb2.UploadBundleRequest(upload_id=upload_id, offset=offset, data=data,
                                                 total_size=size if first else 0, sha256=sha256 if first else "")
            offset += len(data)
            first = False


def upload_bundle(client: OcrClient, path: Path, *, chunk_bytes: int = CHUNK_BYTES, timeout: float = 600.0,
                  attempts: int = UPLOAD_ATTEMPTS, sha256: str | None = None) -> models_pb2.UploadBundleResponse:
    """Upload `path`, resuming from what the agent holds (after a failure in this call or an earlier one).
    Raises the last grpc.RpcError when it cannot be stored (a refused bundle is not retried)."""
    path = Path(path)
    size = path.stat().st_size
    digest = sha256 or sha256_of(path)
    upload_id = upload_id_for(digest)
    for attempt in range(1, attempts + 1):
        try:
            held = client.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id=upload_id), timeout=30)
            offset = held.received if held.total_size == size else 0
            result: models_pb2.UploadBundleResponse = client.models.UploadBundle(
                _chunks(path, upload_id, offset, size, digest, chunk_bytes), timeout=timeout)
            return result
        except grpc.RpcError as err:
            code = err.code() if isinstance(err, grpc.Call) else None
            if code not in RETRYABLE or attempt == attempts:
                raise
            log.warning("upload_retry", upload_id=upload_id, attempt=attempt, error=describe_rpc_error(err))
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


# --- soak -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gates:
    max_error_rate: float = 0.01  # errors / requests during the soak
    max_p99_ms: float | None = None


def evaluate_soak(samples: Sequence[status_pb2.AgentStatus], health: Sequence[str], version: str,
                  gates: Gates) -> str | None:
    """Why the soak failed, or None. `samples`: the Status stream during the soak; `health`: the health Watch
    statuses seen."""
    bad_health = [h for h in health if h != "SERVING"]
    if bad_health:
        return f"health went {bad_health[0]}"
    if not samples:
        return "no status received during the soak"
    for sample in samples:
        state = shown_name(status_pb2.ServingState, sample.state).upper()
        if state != "SERVING":
            return f"state {state}" + (f" ({sample.reason})" if sample.reason else "")
        if sample.model_version != version:
            return f"serves {sample.model_version or 'nothing'}, not {version}"
        p99_ms = ms_of(sample.latency_p99)
        if gates.max_p99_ms is not None and p99_ms > gates.max_p99_ms:
            return f"p99 latency {p99_ms:.0f} ms above {gates.max_p99_ms:.0f} ms"
    first, last = samples[0], samples[-1]
    requests = last.requests_total - first.requests_total
    errors = last.errors_total - first.errors_total
    if requests > 0 and errors / requests > gates.max_error_rate:
        return f"error rate {errors}/{requests} ({errors / requests:.1%}) above {gates.max_error_rate:.1%}"
    return None


def soak(client: OcrClient, version: str, seconds: float, gates: Gates) -> str | None:
    """Watch health and status for `seconds`; why the gate failed, or None."""
    samples: list[status_pb2.AgentStatus] = []
    health: list[str] = []

    def watch(stream: Callable[[], Iterator[Any]], into: list[Any]) -> str | None:
        try:
            for item in stream():
                into.append(item)  # noqa: PERF402 - one by one: what came before the deadline counts
        except grpc.RpcError as err:
            if isinstance(err, grpc.Call) and err.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                return None  # the soak's end
            return f"lost contact: {describe_rpc_error(err)}"
        return "the agent ended the stream"

    interval = min(1.0, max(0.1, seconds / 5))
    with ThreadPoolExecutor(2) as pool:
        watched_health = pool.submit(watch, lambda: client.watch_health(timeout=seconds), health)
        watched_status = pool.submit(watch, lambda: client.watch_status(interval, timeout=seconds), samples)
        lost = watched_health.result() or watched_status.result()
    return lost or evaluate_soak(samples, health, version, gates)


# --- rollout --------------------------------------------------------------------------------------------------


@dataclass
class Row:
    agent: str
    old: str = ""
    new: str = ""
    result: str = "not started"
    switched: bool = False  # this rollout activated the new version here (so a rollback must undo it)


@dataclass
class RolloutReport:
    version: str
    rows: list[Row] = field(default_factory=list)
    ok: bool = False
    reason: str = ""


def switched_to(active: str | None, old: str, version: str) -> bool:
    """Whether an agent that had `old` active before the rollout has `version` active now (`active`, from its
    ListBundles; None when it could not be asked), so that a rollback must undo it. An Activate that failed on the
    client's side (DEADLINE_EXCEEDED, CANCELLED, INTERNAL, a lost connection) may still have switched the
    agent: its activation runs to its end whatever the client does."""
    return active is not None and active == version and old != version


def active_version(client: OcrClient, *, attempts: int = ASK_ACTIVE_ATTEMPTS, pause_s: float = 0.5) -> str | None:
    """The agent's active version (its ListBundles), asked up to `attempts` times; None when it never answered."""
    for attempt in range(1, attempts + 1):
        try:
            listed = client.models.ListBundles(models_pb2.ListBundlesRequest(), timeout=30)
            return str(listed.active_version)
        except grpc.RpcError as err:
            log.warning("active_version_unknown", attempt=attempt, error=describe_rpc_error(err))
            if attempt < attempts:
                time.sleep(pause_s * attempt)
    return None


def waves(agents: Sequence[str], canary: int, batch: int) -> list[list[str]]:
    """[canaries, batch, batch, …]."""
    if canary < 0 or batch < 1:
        raise ValueError("canary must be 0 or more and batch at least 1")
    first = list(agents[:canary])
    rest = list(agents[canary:])
    return ([first] if first else []) + [rest[i:i + batch] for i in range(0, len(rest), batch)]


def _parallel(rows: Sequence[Row], work: Callable[[Row], None]) -> None:
    with ThreadPoolExecutor(min(MAX_PARALLEL, max(1, len(rows)))) as pool:
        list(pool.map(work, rows))


def rollout(bundle: Path, agents: Sequence[str], version: str, connect: Connect, *, canary: int = 1,
            batch: int = 1, soak_s: float = 30.0, gates: Gates | None = None, activate_timeout: float = 600.0,
            allow_downgrade: bool = False, say: Say = lambda _: None) -> RolloutReport:
    """`allow_downgrade`: activate even where `version` is older than the agent's high-water mark (an agent
    refuses that otherwise, FAILED_PRECONDITION, and the rollout stops there). An agent that does not answer
    the preflight is left out (PENDING), not a failure: the others go on."""
    gates = gates or Gates()
    report = RolloutReport(version, [Row(agent, new=version) for agent in agents])
    rows = {row.agent: row for row in report.rows}
    clients = {agent: connect(agent) for agent in agents}
    try:
        reachable = _preflight(report, clients, say)
        if reachable and _upload(report, clients, bundle, say):
            for number, wave in enumerate(waves(reachable, canary, batch)):
                name = "canary" if number == 0 and canary else f"batch {number + (0 if canary else 1)}"
                if not _wave(report, [rows[a] for a in wave], clients, name, soak_s, gates, activate_timeout,
                             say, allow_downgrade=allow_downgrade):
                    _roll_back(report, clients, say)
                    break
            else:
                report.ok = True
                pending = [row.agent for row in report.rows if row.result.startswith(PENDING)]
                if pending:
                    report.reason = f"{', '.join(pending)} did not answer: roll out again when back"
    finally:
        for client in clients.values():
            client.close()
    return report


PENDING = "pending"


def _preflight(report: RolloutReport, clients: dict[str, OcrClient], say: Say) -> list[str]:
    """The agents that answered, in order; the others' rows say PENDING and why."""
    def check(row: Row) -> None:
        try:
            listed = clients[row.agent].models.ListBundles(models_pb2.ListBundlesRequest(), timeout=30)
            row.old = listed.active_version
            row.result = "not started"
        except grpc.RpcError as err:
            row.result = f"{PENDING} (unreachable or refused: {describe_rpc_error(err)})"
            say(f"{row.agent}: {row.result}; the others go on")

    _parallel(report.rows, check)
    reachable = [row.agent for row in report.rows if row.result == "not started"]
    if not reachable:
        report.reason = "no agent answered; nothing was changed"
        say(report.reason)
    return reachable


def _upload(report: RolloutReport, clients: dict[str, OcrClient], bundle: Path, say: Say) -> bool:
    digest = sha256_of(bundle)

    def send(row: Row) -> None:
        try:
            stored = upload_bundle(clients[row.agent], bundle, sha256=digest)
        except grpc.RpcError as err:
            row.result = f"upload failed: {describe_rpc_error(err)}"
            return
        if stored.version != report.version:
            row.result = f"upload failed: the agent read version {stored.version}, not {report.version}"
            return
        say(f"{row.agent}: uploaded {report.version}")

    _parallel([r for r in report.rows if r.old != report.version and not r.result.startswith(PENDING)], send)
    failed = [row for row in report.rows if row.result.startswith("upload failed")]
    if failed:
        report.reason = f"upload failed on {', '.join(r.agent for r in failed)}; nothing was activated"
        say(report.reason)
    return not failed


def _wave(report: RolloutReport, wave: list[Row], clients: dict[str, OcrClient], name: str, soak_s: float,
          gates: Gates, activate_timeout: float, say: Say, *, allow_downgrade: bool = False) -> bool:
    def activate(row: Row) -> None:
        if row.old == report.version:
            row.result = "unchanged (already active)"
            return
        say(f"{name}: activating {report.version} on {row.agent}")
        try:
            request = models_pb2.ActivateRequest(version=report.version, allow_downgrade=allow_downgrade)
            done = clients[row.agent].models.Activate(request, timeout=activate_timeout)
        except grpc.RpcError as err:
            row.result = f"activation failed: {describe_rpc_error(err)}"
            active = active_version(clients[row.agent])  # it may have switched all the same
            row.switched = switched_to(active, row.old, report.version)
            if active is None:
                row.result += f" (its active version is unknown: check whether it serves {report.version})"
            elif row.switched:
                row.result += f" (yet it activated {report.version})"
            return
        row.switched = done.active_version == report.version
        row.result = "activated"

    _parallel(wave, activate)
    failed = [row for row in wave if row.result.startswith("activation failed")]
    if failed:
        report.reason = f"{name}: activation failed on {', '.join(r.agent for r in failed)}"
        say(report.reason)
        return False
    switched = [row for row in wave if row.switched]
    if switched:
        say(f"{name}: soaking {', '.join(r.agent for r in switched)} for {soak_s:g} s")

    def watch(row: Row) -> None:
        why = soak(clients[row.agent], report.version, soak_s, gates)
        row.result = f"soak failed: {why}" if why else "updated"

    _parallel(switched, watch)
    failed = [row for row in wave if row.result.startswith("soak failed")]
    if failed:
        report.reason = f"{name}: soak gate failed on {', '.join(r.agent for r in failed)}"
        say(report.reason)
        return False
    return True


def _roll_back(report: RolloutReport, clients: dict[str, OcrClient], say: Say) -> None:
    def undo(row: Row) -> None:
        why = row.result if row.result not in ("activated", "updated") else ""
        try:
            done = clients[row.agent].models.Rollback(models_pb2.RollbackRequest(), timeout=600)
        except grpc.RpcError as err:
            row.result = f"ROLLBACK FAILED: {describe_rpc_error(err)}"
            return
        back = done.active_version
        row.result = ("rolled back" if back == row.old else f"rolled back to {back}, not {row.old}") \
            + (f" ({why})" if why else "")
        say(f"{row.agent}: rolled back to {back}")

    switched = [row for row in report.rows if row.switched]
    if switched:
        say(f"rolling back {', '.join(r.agent for r in switched)}")
    _parallel(switched, undo)
