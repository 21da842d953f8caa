"""The operator's view of a fleet, read from the broker: every board's retained state and online flag, the
groups' desired states and the rollout records. Any operator machine that connects sees the same, because it
all lives in retained messages (agent/fleet/topics.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt

from vkocr.agent.fleet import topics
from vkocr.agent.fleet.broker import BrokerAccess, connect_and_wait, new_client
from vkocr.agent.fleet.errors import DesiredStateError
from vkocr.agent.fleet.topics import Desired, Reported, RolloutRecord
from vkocr.log import get_logger

log = get_logger(__name__)

SETTLE_S = 0.5  # retained messages arrive right after the subscription; this long without one: all are in


@dataclass(frozen=True)
class BoardRow:
    """One board in the inventory (`vkocr fleet status`)."""

    board: str
    group: str
    online: bool
    version: str
    health: str
    result: str
    error: str
    last_seen: float  # the reported state's time (epoch seconds); 0: never reported


class FleetView:
    """Connect, `load()` what is retained, then read `boards`, `desired`, `rollouts` (kept current) and publish."""

    def __init__(self, access: BrokerAccess, fleet: str) -> None:
        self.fleet = topics.check_name("fleet", fleet)
        self.access = access
        self.client = new_client(access, client_id=f"vkocr-operator-{fleet}-{time.monotonic_ns() % 10**9}")
        self.client.on_message = self._on_message
        self.states: dict[str, Reported] = {}
        self.online: dict[str, bool] = {}
        self.desired: dict[str, Desired] = {}  # by group
        self.board_desired: dict[str, Desired] = {}
        self.rollouts: dict[str, RolloutRecord] = {}
        self._changed = threading.Condition()
        self._last_message = time.monotonic()

    def __enter__(self) -> FleetView:
        connect_and_wait(self.client, self.access)
        self.client.subscribe(topics.everything(self.fleet), topics.QOS)
        self.settle()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def settle(self, quiet_s: float = SETTLE_S, limit_s: float = 10.0) -> None:
        """Wait until no message came for `quiet_s` (the retained ones are in)."""
        started = time.monotonic()
        while time.monotonic() - started < limit_s:
            with self._changed:
                if time.monotonic() - self._last_message >= quiet_s:
                    return
                self._changed.wait(quiet_s)

    def _on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        where = topics.split(message.topic)
        if where is None:
            return
        kind, name, leaf = where
        try:
            self._apply(kind, name, leaf, bytes(message.payload))
        except DesiredStateError as exc:
            log.warning("fleet_message_malformed", topic=message.topic, error=str(exc))
        with self._changed:
            self._last_message = time.monotonic()
            self._changed.notify_all()

    def _apply(self, kind: str, name: str, leaf: str, payload: bytes) -> None:
        table: dict[str, Any] | None = None
        value: Any = None
        if kind == "boards" and leaf == "state":
            table, value = self.states, payload and topics.decode(Reported, payload)
        elif kind == "boards" and leaf == "online":
            table, value = self.online, payload and payload == b"true"
        elif kind == "boards" and leaf == "desired":
            table, value = self.board_desired, payload and topics.decode(Desired, payload)
        elif kind == "groups" and leaf == "desired":
            table, value = self.desired, payload and topics.decode(Desired, payload)
        elif kind == "rollouts":
            table, value = self.rollouts, payload and topics.decode(RolloutRecord, payload)
        if table is None:
            return
        if payload:
            table[name] = value
        else:
            table.pop(name, None)

    def wait_for(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `done()` (called under the view's lock at each message) or the timeout."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 1.0))
        return True

    def publish(self, topic: str, message: Any | None) -> None:
        """Retained, QoS 1, waiting for the broker's acknowledgement; None clears the topic."""
        payload = b"" if message is None else topics.encode(message)
        self.client.publish(topic, payload, qos=topics.QOS, retain=True).wait_for_publish(10)

    def boards(self, group: str = "") -> list[BoardRow]:
        """The inventory: every board that ever reported (in `group`, if given), by name."""
        with self._changed:
            states = dict(self.states)
            online = dict(self.online)
        rows = [BoardRow(s.board, s.group, online.get(name, False), s.version, s.health, s.result, s.error, s.seen)
                for name, s in states.items() if not group or s.group == group]
        return sorted(rows, key=lambda r: r.board)
