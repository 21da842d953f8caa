"""The agent's fleet client: a board that pulls.

It subscribes to its group's and its own retained desired state (agent/fleet/topics.py; its own wins while a
rollout's wave names it) and publishes its retained reported state, with a last will that marks it offline. When
the desired state changes it

    checks     the signer is one of the store's trusted keys, and the version is not older than the store's
               high-water mark (unless the desired state is a rollback to a version this board has stored)
    pulls      the bundle by digest from the OCI registry (agent/fleet/oci.py checks the digests)
    verifies   our ed25519 signature and the manifest (agent/bundles, as for an upload), the signer and the
               version the desired state names, and the high-water mark again with the manifest's date
    stores     the version (ModelStore.add)
    activates  staged: load, self-tests, warm, swap (agent/bundles/activation.py)
    reports    the result; on any failure the old version keeps serving and the state says why

One update at a time, on the client's own thread; a desired state that arrives meanwhile is taken next (only the
newest counts). The same desired state of the same rollout is not tried twice while the process runs; a new
rollout of the same bundle (after a rollback, or to retry a failure) is.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import paho.mqtt.client as mqtt

from vkocr.agent.bundles.activation import Activator
from vkocr.agent.bundles.errors import ActivationError, ActivationFailed, BundleError, DowngradeRefused
from vkocr.agent.bundles.high_water import release_numbers
from vkocr.agent.bundles.signing import short_fingerprint
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.fleet import topics
from vkocr.agent.fleet.broker import KEEPALIVE_S, BrokerAccess, connect_and_wait, new_client
from vkocr.agent.fleet.errors import BrokerError, DesiredStateError, FleetError
from vkocr.agent.fleet.install import pull_into_store
from vkocr.agent.fleet.oci import RegistryAccess
from vkocr.agent.fleet.topics import FAILED, INSTALLED, REFUSED, UPDATING, Desired, Reported
from vkocr.agent.serving.config import AgentConfig
from vkocr.agent.serving.state import StateBoard
from vkocr.log import get_logger

log = get_logger(__name__)


class BoardClient:
    """Start with `start()` (connects; BrokerError when the broker refuses), stop with `stop()`."""

    def __init__(self, *, fleet: str, group: str, board: str, broker: BrokerAccess, registry: RegistryAccess,
                 store: ModelStore, activator: Activator, state: StateBoard, report_interval_s: float = 30.0) -> None:
        self.fleet, self.group, self.board = fleet, group, board
        self.broker, self.registry = broker, registry
        self.store, self.activator, self.state = store, activator, state
        self.report_interval_s = report_interval_s
        self.client = new_client(broker, client_id=f"vkocr-board-{board}")
        self.client.will_set(topics.board_online(fleet, board), b"false", qos=topics.QOS, retain=True)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self._desired: dict[str, Desired | None] = {"group": None, "board": None}
        self._tried: set[tuple[str, bool, str]] = set()  # (bundle, rollback, rollout) acted on
        self._wake = threading.Condition()
        self._stopping = False
        self._reported = Reported(board, group, version=store.active() or "")
        self._report_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"fleet-{board}", daemon=True)
        self._unsubscribe = state.subscribe(lambda _snap: self.report())

    # --- MQTT ------------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect (paho reconnects from then on: a board that starts while the broker is away keeps serving and
        catches up when it answers) and start the update thread."""
        try:
            connect_and_wait(self.client, self.broker)
        except BrokerError as exc:
            log.error("fleet_broker_unreachable", board=self.board, error=str(exc))
            host, port, _tls = self.broker.host_port()
            self.client.connect_async(host, port, keepalive=KEEPALIVE_S)
            self.client.loop_start()
        self._thread.start()
        log.info("fleet_client_started", fleet=self.fleet, group=self.group, board=self.board, broker=self.broker.url)

    def stop(self) -> None:
        """Say goodbye (online false, as the last will would) and disconnect; an update in progress finishes
        on its own thread (the activator's stop ends it)."""
        self._unsubscribe()
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self.client.publish(topics.board_online(self.fleet, self.board), b"false", qos=topics.QOS, retain=True) \
            .wait_for_publish(5)
        self.client.disconnect()
        self.client.loop_stop()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        log.info("fleet_client_stopped", board=self.board)

    def _on_connect(self, client: mqtt.Client, userdata: object, flags: object, reason: object,
                    props: object) -> None:
        if getattr(reason, "is_failure", False):
            log.warning("fleet_broker_refused", board=self.board, reason=str(reason))
            return
        client.subscribe([(topics.group_desired(self.fleet, self.group), topics.QOS),
                          (topics.board_desired(self.fleet, self.board), topics.QOS)])
        client.publish(topics.board_online(self.fleet, self.board), b"true", qos=topics.QOS, retain=True)
        self.report()

    def _on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        source = "board" if message.topic == topics.board_desired(self.fleet, self.board) else "group"
        desired: Desired | None = None
        if message.payload:
            try:
                desired = topics.decode(Desired, bytes(message.payload)).check()
            except DesiredStateError as exc:
                log.warning("fleet_desired_malformed", topic=message.topic, error=str(exc))
                self.report(result=REFUSED, error=f"desired state on {message.topic}: {exc}")
                return
        with self._wake:
            self._desired[source] = desired
            self._wake.notify_all()

    def report(self, **changes: str) -> None:
        """Publish the reported state (retained) with the serving state as it is now, and `changes`."""
        with self._report_lock:  # the update thread, paho's and the serving state's listeners all report
            snap = self.state.get()
            self._reported = replace(self._reported, **changes, health=snap.state.value, seen=time.time(),
                                     version=snap.model_version or self.store.active() or "")
            self.client.publish(topics.board_state(self.fleet, self.board), topics.encode(self._reported),
                                qos=topics.QOS, retain=True)

    # --- updates ---------------------------------------------------------------------------------------------

    def _next(self) -> Desired | None:
        """The desired state to act on: the board's own, else the group's; None when there is nothing new."""
        desired = self._desired["board"] or self._desired["group"]
        if desired is None or (desired.bundle, desired.rollback, desired.rollout) in self._tried:
            return None
        return desired

    def _run(self) -> None:
        last_report = time.monotonic()
        while True:
            with self._wake:
                desired = self._next()
                while desired is None and not self._stopping:
                    self._wake.wait(max(0.1, self.report_interval_s - (time.monotonic() - last_report)))
                    desired = self._next()
                    if desired is None and time.monotonic() - last_report >= self.report_interval_s:
                        break
                if self._stopping:
                    return
            if desired is not None:
                self._tried.add((desired.bundle, desired.rollback, desired.rollout))
                self._update(desired)
            self.report()
            last_report = time.monotonic()

    def _update(self, desired: Desired) -> None:
        context = {"board": self.board, "version": desired.version, "bundle": desired.bundle,
                   "rollout": desired.rollout, "rollback": desired.rollback}
        if desired.version == self.store.active() and self.state.serving:
            self.report(desired=desired.bundle, rollout=desired.rollout, result=INSTALLED, error="")
            return
        self.report(desired=desired.bundle, rollout=desired.rollout, result=UPDATING, error="", self_test="")
        log.info("fleet_update_started", **context)
        try:
            self._check_before_pull(desired)
            if desired.version not in {info.version for info in self.store.versions()}:
                self._pull_and_store(desired)
            activated = self.activator.activate(desired.version, rollback=desired.rollback,
                                                who=f"fleet {desired.rollout}")
        except (DesiredStateError, DowngradeRefused) as exc:
            log.warning("fleet_update_refused", reason=str(exc), **context)
            self.report(result=REFUSED, error=str(exc))
        except ActivationFailed as exc:
            tests = "; ".join(t.describe() for t in exc.self_tests if not t.passed)
            log.error("fleet_update_failed", step=exc.step, reason=str(exc), **context)
            self.report(result=FAILED, error=str(exc), self_test=f"failed: {tests}" if tests else "")
        except (FleetError, BundleError, ActivationError, OSError) as exc:
            log.error("fleet_update_failed", reason=str(exc), **context)
            self.report(result=FAILED, error=str(exc))
        else:
            log.info("fleet_update_installed", previous=activated.previous, **context)
            passed = sum(t.passed for t in activated.self_tests)
            self.report(result=INSTALLED, error="", self_test=f"passed {passed}/{len(activated.self_tests)}")

    def _check_before_pull(self, desired: Desired) -> None:
        """Refuse before any download: an untrusted signer, or (outside a rollback) an older version."""
        if desired.signer not in self.store.trusted:
            raise DesiredStateError(f"signer {short_fingerprint(desired.signer)} is not trusted by this board "
                                    f"(trusted: {self.store.trusted.describe()}); nothing was installed")
        mark = self.store.high_water.read()
        if mark is None:
            return
        if desired.rollback:
            if desired.version not in {info.version for info in self.store.versions()}:
                raise DesiredStateError(f"rollback to {desired.version}: this board never stored it")
        elif release_numbers(desired.version) < release_numbers(mark.version):
            raise DesiredStateError(f"version {desired.version} is older than {mark.version}, which this board "
                                    "has run (anti-rollback); nothing was installed")

    def _pull_and_store(self, desired: Desired) -> None:
        pull_into_store(self.store, desired.bundle, self.registry, version=desired.version, signer=desired.signer,
                        rollback=desired.rollback)

def board_client(config: AgentConfig, store: ModelStore, activator: Activator, state: StateBoard) -> BoardClient:
    """The fleet client `[fleet]` describes, not yet started."""
    fleet = config.fleet
    return BoardClient(
        fleet=fleet.fleet, group=fleet.group, board=fleet.board_name,
        broker=BrokerAccess(fleet.broker, fleet.username or fleet.board_name, fleet.secret("password_file"),
                            fleet.ca, fleet.cert, fleet.key),
        registry=RegistryAccess(fleet.registry_user, fleet.secret("registry_password_file"),
                                fleet.registry_plain_http, fleet.registry_ca),
        store=store, activator=activator, state=state, report_interval_s=fleet.report_interval_s)
