"""The fleet's MQTT topics and the JSON messages on them. Every message is retained and sent at QoS 1, so a board
or an operator that connects later reads the current state at once; an empty retained message clears a topic.

    vkocr/<fleet>/groups/<group>/desired   operator → the group's boards: the version they should serve
    vkocr/<fleet>/boards/<board>/desired   operator → one board, during a rollout's waves (wins over the group's)
    vkocr/<fleet>/boards/<board>/state     board → everyone: version, health, the last update's result
    vkocr/<fleet>/boards/<board>/online    board → everyone: "true"; its last will sets "false"
    vkocr/<fleet>/rollouts/<group>         operator → operators: the rollout record (waves, boards, outcome)

A board may publish only its own state and online topics and read only its own and its group's desired state
(deploy/mosquitto/acl.conf).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from vkocr.agent.fleet.errors import DesiredStateError

PREFIX = "vkocr"
QOS = 1
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a fleet, group or board: one topic level, no wildcards

T = TypeVar("T")


def check_name(kind: str, name: str) -> str:
    if not NAME.fullmatch(name):
        raise DesiredStateError(f"{kind} {name!r} must be 1-64 letters, digits, '.', '_' or '-' (one MQTT topic "
                                "level)")
    return name


def group_desired(fleet: str, group: str) -> str:
    return f"{PREFIX}/{fleet}/groups/{group}/desired"


def board_desired(fleet: str, board: str) -> str:
    return f"{PREFIX}/{fleet}/boards/{board}/desired"


def board_state(fleet: str, board: str) -> str:
    return f"{PREFIX}/{fleet}/boards/{board}/state"


def board_online(fleet: str, board: str) -> str:
    return f"{PREFIX}/{fleet}/boards/{board}/online"


def rollout_record(fleet: str, group: str) -> str:
    return f"{PREFIX}/{fleet}/rollouts/{group}"


def everything(fleet: str) -> str:
    return f"{PREFIX}/{fleet}/#"


def split(topic: str) -> tuple[str, str, str] | None:
    """(kind, name, leaf) of a fleet topic: ("boards", "b1", "state"), ("groups", "g", "desired"),
    ("rollouts", "g", ""); None for another topic."""
    parts = topic.split("/")
    if len(parts) == 5 and parts[0] == PREFIX and parts[2] in ("boards", "groups"):
        return parts[2], parts[3], parts[4]
    if len(parts) == 4 and parts[0] == PREFIX and parts[2] == "rollouts":
        return "rollouts", parts[3], ""
    return None


def encode(message: Any) -> bytes:
    return json.dumps(asdict(message), separators=(",", ":"), sort_keys=True).encode()


def decode(cls: type[T], payload: bytes) -> T:
    """A message from its JSON, unknown keys ignored (a newer sender); DesiredStateError when it is no object."""
    try:
        data = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DesiredStateError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise DesiredStateError("not a JSON object")
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]  # T is one of this module's dataclasses
    try:
        return cls(**{k: v for k, v in data.items() if k in known})
    except TypeError as exc:
        raise DesiredStateError(str(exc)) from exc


@dataclass(frozen=True)
class Desired:
    """What a board should serve: `bundle` is an OCI reference by digest; `signer` the full fingerprint of the
    key that must have signed it. `rollback`: the version may be older than the board's high-water mark (it
    must be one the board has served, `vkocr fleet rollback`)."""

    version: str
    bundle: str
    signer: str
    rollout: str = ""
    rollback: bool = False

    def check(self) -> Desired:
        if not self.version or not isinstance(self.version, str):
            raise DesiredStateError("desired state names no version")
        if not re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", str(self.bundle)):
            raise DesiredStateError(f"desired state's bundle {self.bundle!r} is no OCI reference by digest")
        if not re.fullmatch(r"[0-9a-f]{64}", str(self.signer)):
            raise DesiredStateError("desired state's signer is not a key fingerprint (64 hex digits)")
        return self


# A board's result for the desired state it last acted on
INSTALLED, UPDATING, FAILED, REFUSED = "installed", "updating", "failed", "refused"


@dataclass(frozen=True)
class Reported:
    """A board's state, as it publishes it. `desired` is the bundle reference it last acted on and `result`
    what came of it (INSTALLED, UPDATING, FAILED: the pull, a check or a self-test failed and the old version
    still serves; REFUSED: an untrusted signer or an older version, nothing was installed)."""

    board: str
    group: str
    version: str = ""
    health: str = ""
    desired: str = ""
    rollout: str = ""
    result: str = ""
    error: str = ""
    self_test: str = ""
    seen: float = field(default_factory=time.time)


@dataclass(frozen=True)
class RolloutRecord:
    """What `vkocr fleet rollout` publishes as it goes: any operator's `fleet status` reads it."""

    rollout: str
    version: str
    bundle: str
    signer: str
    group: str
    status: str  # running, done, stopped
    waves: list[list[str]]
    wave: int = 0  # the wave in progress (1-based), or the last one
    failed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # offline boards that will catch up
    reason: str = ""
    previous: dict[str, Any] = field(default_factory=dict)  # the group's desired state before (for rollback)
    updated: float = field(default_factory=time.time)
