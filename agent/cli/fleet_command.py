"""`vkocr fleet …`: roll a signed bundle out to several agents (canary, batches, automatic rollback) and show
which versions they serve. Two modes: push (`--agents`: this process uploads to each agent's gRPC port, for a
small LAN) and pull (`--fleet`: desired state on an MQTT broker, boards pull from an OCI registry;
agent/cli/fleet_pull.py). An agent that does not answer is pending in both, never a reason to stop.

`rollout` prints its progress on stderr and a table (agent, old version, new version, result) on stdout, or
with --json one JSON object; exit status 0 when every agent serves the new version, 1 when the rollout stopped
(and rolled back what it had switched), 2 for usage errors. `status` prints a table or, with --json, one JSON
object; it exits 1 when an agent did not answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from vkocr.agent.cli.client_command import parse_duration
from vkocr.agent.cli.fleet_pull import add_pull_arguments, cmd_pull_rollout, cmd_pull_status, cmd_rollback

if TYPE_CHECKING:
    from vkocr.agent.serving.client import OcrClient

EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2

EXAMPLES = """\
examples:
  vkocr fleet rollout registry.example.com/ocr/labels:2.3.0 --fleet plant-7 --group line-a \\
      --broker mqtts://mqtt.plant7.example:8883 --canary 1 --batch 25% --soak 2m --max-failures 0
  vkocr fleet status --fleet plant-7 --broker mqtts://mqtt.plant7.example:8883 --json
  vkocr fleet rollback --fleet plant-7 --group line-a --broker mqtts://mqtt.plant7.example:8883
  vkocr fleet rollout labels-2.3.0.vkb --agents 10.0.4.11:50051,10.0.4.12:50051,10.0.4.13:50051 \\
      --canary 1 --batch 5 --soak 30s --tls-ca ca.pem --tls-cert operator.pem --tls-key operator.key
  vkocr fleet status --agents 10.0.4.11:50051,10.0.4.12:50051 --tls-ca ca.pem --tls-cert operator.pem \\
      --tls-key operator.key
"""


def add_fleet_parser(subparsers: Any) -> None:
    """Register `vkocr fleet` and its commands on the top-level subparsers."""
    fleet = subparsers.add_parser(
        "fleet", help="roll model bundles out to a fleet (boards pull) or to several agents (push); show versions",
        description="Pull mode (--fleet): publish a bundle's OCI reference as desired state on the MQTT broker, "
        "canary first, then in batches, each gated on the boards' reported states; offline boards are pending "
        "and catch up later (deploy/pull-fleet.md). Push mode (--agents): upload a signed bundle to several "
        "agents and activate it canary first, then in batches, watching each for a soak period and rolling every "
        "switched agent back when a gate fails; needs a client certificate the agents allow to manage models "
        "(their [auth] allowed_subjects).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = fleet.add_subparsers(dest="fleet_command", metavar="WHAT", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--agents", metavar="HOST:PORT[,HOST:PORT…]",
                        help="push mode: the agents, in rollout order (a small LAN; the pull mode is --fleet)")
    common.add_argument("--tls-ca", type=Path, metavar="CA.pem", help="use TLS, trusting this CA")
    common.add_argument("--tls-cert", type=Path, metavar="CERT.pem", help="client certificate (mutual TLS)")
    common.add_argument("--tls-key", type=Path, metavar="KEY.pem", help="the client certificate's key")
    common.add_argument("--tls-server-name", metavar="NAME",
                        help="the name to check in the agents' certificates (default: each target's host)")

    rollout = what.add_parser(
        "rollout", parents=[common], help="upload and activate a bundle: canary, batches, rollback on failure",
        description="Upload BUNDLE to every agent, activate it on --canary agents, watch them for --soak (health "
        "must stay SERVING, errors within --max-error-rate, p99 within --max-p99-ms), then the others --batch "
        "at a time the same way. On any failure every agent this rollout switched is rolled back and the exit "
        "status is 1.")
    rollout.add_argument("bundle", metavar="BUNDLE", help="push mode: the bundle file (BUNDLE.vkb); pull mode: "
                         "its OCI reference (REGISTRY/REPOSITORY:TAG or @sha256:…, from `vkocr bundle push`)")
    rollout.add_argument("--canary", type=int, default=1, metavar="N", help="agents updated first (default 1)")
    rollout.add_argument("--batch", default="1", metavar="N|P%", help="agents per batch after the canary: a "
                         "count or a share of them, e.g. 25%% (default 1)")
    rollout.add_argument("--max-failures", type=int, default=0, metavar="K", help="pull mode: failed boards "
                         "tolerated before the rollout stops (default 0)")
    rollout.add_argument("--wave-timeout", type=parse_duration, default=600.0, metavar="DURATION",
                         help="pull mode: an online board not done within this counts as failed (default 10m)")
    rollout.add_argument("--pending-deadline", type=parse_duration, default=None, metavar="DURATION",
                         help="pull mode: how long after the last wave offline (pending) boards have to catch up "
                         "before they count as failed (default: no limit, they stay pending)")
    rollout.add_argument("--soak", type=parse_duration, default=30.0, metavar="DURATION",
                         help="how long each canary and batch is watched, e.g. 30s or 2m (default 30s)")
    rollout.add_argument("--max-error-rate", type=float, default=0.01, metavar="FRACTION",
                         help="errors/requests allowed during a soak (default 0.01)")
    rollout.add_argument("--max-p99-ms", type=float, metavar="MS", help="p99 latency allowed during a soak "
                         "(default: not checked)")
    rollout.add_argument("--activate-timeout", type=parse_duration, default=600.0, metavar="DURATION",
                         help="deadline of one activation (loading and self-tests; default 10m)")
    rollout.add_argument("--allow-downgrade", action="store_true",
                         help="activate even on agents that have run a newer version (their high-water mark); "
                         "without it such an agent refuses (FAILED_PRECONDITION) and the rollout stops")
    rollout.add_argument("--json", action="store_true",
                         help='instead of the table, one JSON object on stdout: {"version", "ok", "reason", '
                         '"agents": [{"agent", "old", "new", "result", "switched"}]} (progress stays on stderr)')
    rollout.set_defaults(func=cmd_rollout)

    status = what.add_parser("status", parents=[common], help="state, active version and stored versions",
                             description="Per agent: serving state, active version, device and the versions "
                             "in its store (* marks the active one).")
    status.add_argument("--json", action="store_true",
                        help='instead of the table, one JSON object: {"agents": [{"agent", "reachable", "state", '
                        '"reason", "active_version", "device", "stored": [{"version", "active"}] or null, '
                        '"error"}]}')
    status.set_defaults(func=cmd_status)

    rollback = what.add_parser("rollback", parents=[common], help="pull mode: the group back to its desired "
                               "state before the last rollout", description="Publish the group's desired state "
                               "from before its last rollout as a rollback: boards that switched activate the "
                               "version they ran before; waits up to --wave-timeout for the online boards.")
    rollback.add_argument("--wave-timeout", type=parse_duration, default=600.0, metavar="DURATION")
    rollback.add_argument("--json", action="store_true", help="print the group's boards afterwards as JSON")
    rollback.set_defaults(func=cmd_rollback)
    for parser in (rollout, status, rollback):
        add_pull_arguments(parser)


def _agents(text: str) -> list[str]:
    agents = [part.strip() for part in text.split(",") if part.strip()]
    if not agents:
        raise ValueError("--agents names no agent")
    if len(set(agents)) != len(agents):
        raise ValueError("--agents names an agent twice")
    return agents


def _connector(args: argparse.Namespace) -> Any:
    from vkocr.agent.serving.client import OcrClient

    def connect(target: str) -> OcrClient:
        return OcrClient(target, ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key,
                         server_name_override=args.tls_server_name)

    return connect


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(v)) for v in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip() for row in [headers, *rows]]
    return "\n".join(lines)


def _mode(args: argparse.Namespace) -> str:
    if bool(args.agents) == bool(args.fleet):
        raise ValueError("name the agents to push to (--agents) or the fleet whose boards pull (--fleet), one of "
                         "them")
    return "push" if args.agents else "pull"


def cmd_rollout(args: argparse.Namespace) -> int:
    from vkocr.agent.bundles.bundle import read_manifest
    from vkocr.agent.fleet.errors import RolloutError
    from vkocr.agent.fleet.rollout import Gates, rollout
    from vkocr.agent.fleet.waves import batch_size

    try:
        if _mode(args) == "pull":
            batch_size(args.batch, 100)
            return int(cmd_pull_rollout(args))
        agents = _agents(args.agents)
        args.batch = batch_size(args.batch, len(agents))
        if args.canary < 0:
            raise ValueError("--canary must be 0 or more")
        connect = _connector(args)
        connect(agents[0]).close()  # a bad TLS flag combination is a usage error, before any change
    except (ValueError, RolloutError) as exc:
        print(f"vkocr fleet: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args.bundle = Path(args.bundle)
    version = read_manifest(args.bundle).version  # what the bundle says; every agent verifies it

    def say(line: str) -> None:
        print(f"vkocr fleet: {line}", file=sys.stderr, flush=True)

    say(f"rolling out {version} to {len(agents)} agent(s): canary {args.canary}, batches of {args.batch}, "
        f"soak {args.soak:g} s")
    report = rollout(args.bundle, agents, version, connect, canary=args.canary, batch=args.batch,
                     soak_s=args.soak, gates=Gates(args.max_error_rate, args.max_p99_ms),
                     activate_timeout=args.activate_timeout, allow_downgrade=args.allow_downgrade, say=say)
    if args.json:
        print(json.dumps({"version": report.version, "ok": report.ok, "reason": report.reason,
                          "agents": [{"agent": r.agent, "old": r.old, "new": r.new, "result": r.result,
                                      "switched": r.switched} for r in report.rows]}, indent=2, ensure_ascii=False),
              flush=True)
    else:
        print(format_table(("AGENT", "OLD VERSION", "NEW VERSION", "RESULT"),
                           [(r.agent, r.old or "-", r.new, r.result) for r in report.rows]), flush=True)
    if report.ok:
        say(f"done: {version} serves on every agent")
        return 0
    say(f"rollout stopped: {report.reason}")
    return EXIT_FAILED


def cmd_status(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    try:
        if _mode(args) == "pull":
            return int(cmd_pull_status(args))
        agents = _agents(args.agents)
        connect = _connector(args)
        connect(agents[0]).close()
    except ValueError as exc:
        print(f"vkocr fleet: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with ThreadPoolExecutor(min(8, len(agents))) as pool:
        rows = list(pool.map(lambda agent: agent_row(agent, connect), agents))
    if args.json:
        print(json.dumps({"agents": [asdict(row) for row in rows]}, indent=2, ensure_ascii=False), flush=True)
    else:
        print(format_table(("AGENT", "STATE", "ACTIVE", "DEVICE", "STORED"), [row.cells() for row in rows]),
              flush=True)
    return EXIT_FAILED if any(not row.reachable for row in rows) else 0


@dataclass(frozen=True)
class StoredVersion:
    version: str
    active: bool


@dataclass(frozen=True)
class AgentRow:
    """What `fleet status` says of one agent; what could not be asked stays empty and `error` says why."""

    agent: str
    reachable: bool
    state: str = ""  # SERVING, NOT_SERVING, …
    reason: str = ""  # why the agent is in that state, as it says
    active_version: str = ""
    device: str = ""
    stored: list[StoredVersion] | None = None  # None: the store could not be listed
    error: str = ""

    def cells(self) -> tuple[str, str, str, str, str]:
        """The table's row: agent, state, active version, device, stored versions (* the active one)."""
        if not self.reachable:
            return self.agent, f"UNREACHABLE ({self.error})", "-", "-", "-"
        state = self.state + (f" ({self.reason})" if self.reason else "")
        if self.stored is None:
            stored = f"({self.error})"
        else:
            stored = ", ".join(v.version + ("*" if v.active else "") for v in self.stored) or "none"
        return self.agent, state, self.active_version or "-", self.device or "-", stored


def agent_row(agent: str, connect: Any) -> AgentRow:
    """One agent's state, active version, device and stored versions; what failed, in their place."""
    import grpc

    from vkocr.agent.serving.proto_enums import shown_name
    from vkocr.agent.serving.rpc_status import describe_rpc_error
    from vkocr.v1 import models_pb2, status_pb2

    client: OcrClient = connect(agent)
    with client:
        try:
            status = client.status(timeout=10)
        except grpc.RpcError as err:
            return AgentRow(agent, reachable=False, error=describe_rpc_error(err))
        state = shown_name(status_pb2.ServingState, status.state).upper()
        try:
            listed = client.models.ListBundles(models_pb2.ListBundlesRequest(), timeout=10)
        except grpc.RpcError as err:
            return AgentRow(agent, True, state, status.reason, status.model_version, status.device,
                            error=describe_rpc_error(err))
        return AgentRow(agent, True, state, status.reason, listed.active_version, status.device,
                        [StoredVersion(b.version, b.active) for b in listed.bundles])
