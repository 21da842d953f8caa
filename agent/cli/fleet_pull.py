"""`vkocr fleet rollout|status|rollback --fleet F`: the pull mode. Desired state on the MQTT broker, bundles in an
OCI registry (agent/fleet/); the boards pull, and every command reads and writes state that lives in the broker,
so any operator machine sees the same. Broker password from $VKOCR_BROKER_PASSWORD, registry password from
$VKOCR_REGISTRY_PASSWORD (never flags: they would show in `ps`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from typing import Any

from vkocr.errors import VkocrError

EXIT_FAILED = 1


def add_pull_arguments(parser: argparse.ArgumentParser) -> None:
    pull = parser.add_argument_group("pull mode (boards follow desired state on an MQTT broker)")
    pull.add_argument("--fleet", metavar="NAME", help="the fleet (topics vkocr/NAME/…)")
    pull.add_argument("--group", default="", metavar="GROUP", help="the group of boards (rollout, rollback: "
                      "required; status: all groups when left out)")
    pull.add_argument("--broker", default=os.environ.get("VKOCR_BROKER", ""), metavar="mqtts://HOST:PORT",
                      help="the MQTT broker (default $VKOCR_BROKER); password from $VKOCR_BROKER_PASSWORD")
    pull.add_argument("--user", default="operator", help="broker user (default operator)")
    pull.add_argument("--broker-ca", default="", metavar="CA.pem", help="CA of the broker's TLS certificate")
    pull.add_argument("--registry-user", default="", help="registry user; password from $VKOCR_REGISTRY_PASSWORD")
    pull.add_argument("--registry-plain-http", action="store_true", help="a registry without TLS")


def _say(line: str) -> None:
    print(f"vkocr fleet: {line}", file=sys.stderr, flush=True)


def _view(args: argparse.Namespace) -> Any:
    from vkocr.agent.fleet.broker import BrokerAccess
    from vkocr.agent.fleet.view import FleetView

    if not args.broker:
        raise VkocrError("--fleet needs --broker (or $VKOCR_BROKER)")
    return FleetView(BrokerAccess(args.broker, args.user, os.environ.get("VKOCR_BROKER_PASSWORD", ""),
                                  args.broker_ca), args.fleet)


def _table(view: Any, group: str) -> str:
    from vkocr.agent.cli.fleet_command import format_table

    rows = view.boards(group)
    now = time.time()
    return format_table(("BOARD", "GROUP", "ONLINE", "VERSION", "HEALTH", "LAST SEEN", "RESULT"), [
        (r.board, r.group, "yes" if r.online else "no", r.version or "-", r.health or "-",
         f"{max(0, now - r.last_seen):.0f} s ago" if r.last_seen else "-",
         (r.result or "-") + (f": {r.error}" if r.error else "")) for r in rows])


def guarded(run: Any) -> Any:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return int(run(args))
        except VkocrError as exc:
            print(f"vkocr fleet: error: {exc}", file=sys.stderr)
            return EXIT_FAILED
    return wrapped


@guarded
def cmd_pull_rollout(args: argparse.Namespace) -> int:
    from vkocr.agent.fleet.oci import Reference, Registry, RegistryAccess
    from vkocr.agent.fleet.topics import Desired, check_name
    from vkocr.agent.fleet.waves import WavePlan, rollout

    group = check_name("group", args.group or "")
    plan = WavePlan(args.canary, args.batch, args.soak, args.max_failures, args.wave_timeout,
                    args.pending_deadline or 0.0)
    reference = Reference.parse(args.bundle)
    access = RegistryAccess(args.registry_user, os.environ.get("VKOCR_REGISTRY_PASSWORD", ""),
                            args.registry_plain_http)
    with Registry(reference.host, access) as registry:
        digest, annotations = registry.describe(reference)
    version = annotations.get("org.opencontainers.image.version", "")
    signer = annotations.get("vnd.vkocr.bundle.signer", "")
    desired = Desired(version, str(reference.by_digest(digest)), signer, rollout=f"{version}-{int(time.time())}")
    desired.check()
    with _view(args) as view:
        _say(f"rolling out {version} ({desired.bundle}) to group {group} of fleet {args.fleet}: canary "
             f"{plan.canary}, batches of {plan.batch}, soak {plan.soak_s:g} s, at most {plan.max_failures} failed")
        record = rollout(view, group, desired, plan, _say)
        view.settle()
        if args.json:
            print(json.dumps({"rollout": asdict(record), "boards": [asdict(r) for r in view.boards(group)]},
                             indent=2), flush=True)
        else:
            print(_table(view, group), flush=True)
    if record.status == "done":
        _say(f"done: {version} is the desired state of group {group}" +
             (f"; pending (offline, will catch up): {', '.join(record.pending)}" if record.pending else ""))
        return 0
    _say(f"rollout {'incomplete' if record.status == 'incomplete' else 'stopped'}: {record.reason}")
    return EXIT_FAILED


@guarded
def cmd_pull_status(args: argparse.Namespace) -> int:
    with _view(args) as view:
        if args.json:
            print(json.dumps({"boards": [asdict(r) for r in view.boards(args.group)],
                              "desired": {g: asdict(d) for g, d in view.desired.items()},
                              "rollouts": {g: asdict(r) for g, r in view.rollouts.items()}}, indent=2), flush=True)
            return 0
        print(_table(view, args.group))
        for group, record in sorted(view.rollouts.items()):
            if args.group and group != args.group:
                continue
            line = f"rollout {record.rollout} of group {group}: {record.status}, wave {record.wave}/{len(record.waves)}"
            line += f", failed: {', '.join(record.failed)}" if record.failed else ""
            pending = [b for b in record.pending if (s := view.states.get(b)) is None or s.version != record.version]
            line += f", pending: {', '.join(pending)}" if pending else ""  # those that caught up are not
            print(line + (f" ({record.reason})" if record.reason else ""))
    return 0


@guarded
def cmd_rollback(args: argparse.Namespace) -> int:
    from vkocr.agent.fleet.topics import FAILED, INSTALLED, REFUSED, check_name
    from vkocr.agent.fleet.waves import rollback

    FINAL = (INSTALLED, FAILED, REFUSED)
    if not args.fleet:
        raise VkocrError("rollback needs --fleet (and --group); push mode's agents roll back on a failed rollout")
    group = check_name("group", args.group or "")
    with _view(args) as view:
        target = rollback(view, group, f"rollback-{int(time.time())}")
        _say(f"group {group} goes back to {target.version}; waiting up to {args.wave_timeout:g} s for its online "
             "boards")
        def settled(board: str) -> bool:  # answered this desired state (or is offline: it catches up later)
            state = view.states[board]
            return not view.online.get(board) or (state.rollout == target.rollout and state.result in FINAL)

        view.wait_for(lambda: all(settled(r.board) for r in view.boards(group)), args.wave_timeout)
        if args.json:
            print(json.dumps({"group": group, "version": target.version,
                              "boards": [asdict(r) for r in view.boards(group)]}, indent=2), flush=True)
        else:
            print(_table(view, group), flush=True)
        behind = [r.board for r in view.boards(group) if r.online and (r.version, r.result) != (target.version,
                                                                                                INSTALLED)]
    if behind:
        _say(f"not back yet: {', '.join(behind)}")
        return EXIT_FAILED
    return 0
