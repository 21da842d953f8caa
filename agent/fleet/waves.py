"""The rollout controller: desired state published wave by wave, each wave gated on the boards' reported states.

    plan       the group's boards (the inventory) in waves: `canary` boards, then batches of `batch` (a count, or
               a share of the group); online boards go first
    wave       each board of the wave gets its own retained desired state; the wave is over when every board in it
               is installed, failed (its report names this bundle and a failure) or offline. An offline board is
               pending, not a failure: its desired state stays retained and it catches up when it returns. An online
               board that has not finished within `wave_timeout_s` counts as failed
    soak       the wave's installed boards must stay SERVING the new version for `soak_s`
    stop       more than `max_failures` failed boards: no further wave; the failed boards' own desired state is
               cleared (they keep the group's, the old version); `vkocr fleet rollback` takes the others back
    finish     the group's desired state becomes the new version (boards that join later install it) and the
               boards' own desired states are cleared
    deadline   with `pending_deadline_s`, the pending boards have that long to come back and install; those that
               did not count as failed (the rollout is "incomplete" beyond `max_failures`)

The record (topics.RolloutRecord) is published retained after every step, so `vkocr fleet status` on any machine
shows where the rollout stands.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from vkocr.agent.fleet import topics
from vkocr.agent.fleet.errors import RolloutError
from vkocr.agent.fleet.topics import FAILED, INSTALLED, REFUSED, Desired, RolloutRecord
from vkocr.agent.fleet.view import FleetView

Say = Callable[[str], None]


@dataclass(frozen=True)
class WavePlan:
    canary: int = 1
    batch: str = "25%"  # boards per wave after the canary: a count ("5") or a share of the group ("25%")
    soak_s: float = 30.0
    max_failures: int = 0
    wave_timeout_s: float = 600.0
    pending_deadline_s: float = 0.0  # after the last wave, how long pending boards have to catch up; 0: no limit


def batch_size(batch: str, boards: int) -> int:
    """`--batch` as a number of boards: "5" is 5, "25%" a quarter of `boards` (at least one)."""
    try:
        value = float(batch.removesuffix("%"))
    except ValueError:
        value = 0.0
    percent = batch.endswith("%")
    if not (0 < value <= 100 if percent else value >= 1 and value.is_integer()):
        raise RolloutError(f"--batch must be a number of boards (e.g. 5) or a percentage (e.g. 25%), got {batch!r}")
    return max(1, math.ceil(boards * value / 100)) if percent else int(value)


def plan_waves(boards: list[str], online: dict[str, bool], canary: int, batch_text: str) -> list[list[str]]:
    """Online boards first (a canary that is off proves nothing), then the others; canary, then batches."""
    if canary < 0:
        raise RolloutError("--canary must be 0 or more")
    ordered = sorted(boards, key=lambda b: (not online.get(b, False), b))
    batch = batch_size(batch_text, len(ordered))
    waves = [ordered[:canary]] if canary else []
    rest = ordered[canary:]
    waves += [rest[i:i + batch] for i in range(0, len(rest), batch)]
    return [wave for wave in waves if wave]


def _outcome(view: FleetView, board: str, desired: Desired) -> str:
    """installed, failed, offline or '' (still working) for one board of a wave."""
    state = view.states.get(board)
    if state is not None and state.desired == desired.bundle and state.rollout == desired.rollout:
        if state.result == INSTALLED and state.version == desired.version:
            return "installed"
        if state.result in (FAILED, REFUSED):
            return "failed"
    if not view.online.get(board, False):
        return "offline"
    return ""


def rollout(view: FleetView, group: str, desired: Desired, plan: WavePlan, say: Say) -> RolloutRecord:
    """Run the rollout to its end or its stop; the record it returns is the one published last."""
    fleet = view.fleet
    rows = view.boards(group)
    if not rows:
        raise RolloutError(f"no board of fleet {fleet} reports group {group}: nothing to roll out to")
    waves = plan_waves([r.board for r in rows], {r.board: r.online for r in rows}, plan.canary, plan.batch)
    previous = view.desired.get(group)
    record = RolloutRecord(desired.rollout, desired.version, desired.bundle, desired.signer, group, "running", waves,
                           previous=asdict(previous) if previous else {})
    view.publish(topics.rollout_record(fleet, group), record)
    failed: list[str] = []
    pending: list[str] = []
    for number, wave in enumerate(waves, 1):
        say(f"wave {number}/{len(waves)}: {', '.join(wave)}")
        started = time.monotonic()
        for board in wave:
            view.publish(topics.board_desired(fleet, board), desired)
        view.wait_for(lambda wave=wave: all(_outcome(view, b, desired) for b in wave),  # type: ignore[misc]
                      plan.wave_timeout_s)
        outcomes = {b: _outcome(view, b, desired) or "failed" for b in wave}
        installed = [b for b, o in outcomes.items() if o == "installed"]
        failed += [b for b, o in outcomes.items() if o == "failed"]
        pending += [b for b, o in outcomes.items() if o == "offline"]
        say(f"wave {number}: {len(installed)} installed, {sum(o == 'failed' for o in outcomes.values())} failed, "
            f"{sum(o == 'offline' for o in outcomes.values())} offline (pending) in {time.monotonic() - started:.1f} s")
        if len(failed) <= plan.max_failures and installed and plan.soak_s > 0:
            failed += _soak(view, installed, desired, plan.soak_s)
        record = replace(record, wave=number, failed=sorted(failed), pending=sorted(pending), updated=time.time())
        if len(failed) > plan.max_failures:
            reasons = "; ".join(f"{b}: {view.states[b].error or 'not serving ' + desired.version}"
                                for b in failed if b in view.states)
            for board in failed:
                view.publish(topics.board_desired(fleet, board), None)
            record = replace(record, status="stopped", reason=f"{len(failed)} failed (at most {plan.max_failures} "
                             f"allowed): {reasons}")
            view.publish(topics.rollout_record(fleet, group), record)
            return record
        view.publish(topics.rollout_record(fleet, group), record)
    view.publish(topics.group_desired(fleet, group), desired)
    for board in (b for wave in waves for b in wave):
        view.publish(topics.board_desired(fleet, board), None)
    record = replace(record, status="done", updated=time.time())
    if pending and plan.pending_deadline_s > 0:
        record = _await_pending(view, record, desired, plan, say)
    view.publish(topics.rollout_record(fleet, group), record)
    return record


def _await_pending(view: FleetView, record: RolloutRecord, desired: Desired, plan: WavePlan,
                   say: Say) -> RolloutRecord:
    """The deadline that decides when an offline board counts: those not installed by then are failures."""
    say(f"waiting up to {plan.pending_deadline_s:g} s for the pending boards: {', '.join(record.pending)}")
    view.wait_for(lambda: all(_outcome(view, b, desired) == "installed" for b in record.pending),
                  plan.pending_deadline_s)
    overdue = [b for b in record.pending if _outcome(view, b, desired) != "installed"]
    failed = sorted({*record.failed, *overdue})
    record = replace(record, pending=[], failed=failed, updated=time.time())
    if len(failed) > plan.max_failures:
        return replace(record, status="incomplete", reason=f"{', '.join(overdue)} did not install {desired.version} "
                       f"within {plan.pending_deadline_s:g} s of the last wave (at most {plan.max_failures} failed "
                       "allowed); their desired state stays, they install it when they return")
    return record


def _soak(view: FleetView, boards: list[str], desired: Desired, soak_s: float) -> list[str]:
    """The boards that stopped serving the new version (health or version) during the soak."""
    bad: set[str] = set()

    def check() -> bool:
        for board in boards:
            state = view.states.get(board)
            if view.online.get(board, False) and (state is None or state.health != "SERVING"
                                                   or state.version != desired.version):
                bad.add(board)
        return False  # watch until the end

    view.wait_for(check, soak_s)
    return sorted(bad)


def rollback(view: FleetView, group: str, rollout_id: str) -> Desired:
    """The group back to the desired state it had before its last rollout: boards that switched activate the
    version they ran before (a rollback, allowed below their high-water mark), the others are already there."""
    record = view.rollouts.get(group)
    if record is None or not record.previous:
        raise RolloutError(f"nothing to roll back to: group {group} of fleet {view.fleet} had no desired state "
                           "before its last rollout")
    previous = Desired(**{**record.previous, "rollback": True, "rollout": rollout_id})
    view.publish(topics.group_desired(view.fleet, group), previous)
    for wave in record.waves:
        for board in wave:
            view.publish(topics.board_desired(view.fleet, board), None)
    view.publish(topics.rollout_record(view.fleet, group),
                 replace(record, status="rolled back", reason=f"back to {previous.version}", updated=time.time()))
    return previous
