"""sd_notify(3) for a unit with Type=notify and WatchdogSec=: READY=1 when the agent serves, WATCHDOG=1 from
the event loop, STOPPING=1 when it drains, STATUS= lines on every state change. Without $NOTIFY_SOCKET (not
started by systemd) every call does nothing.

No library: sdnotify has not been maintained since 2017, systemd-python builds against libsystemd's headers,
and cysystemd's wheels (libsystemd bundled, 2.4 MB) need glibc 2.34 or newer, which not every board has. The
protocol is one datagram of "KEY=value" lines to the unix socket named by $NOTIFY_SOCKET ('@' at the start: the
abstract namespace), a few lines here.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Mapping

from vkocr.agent.serving.state import ServingState, StateSnapshot
from vkocr.log import get_logger

log = get_logger(__name__)


class SystemdNotifier:
    """Messages to systemd's notify socket. `from_environment()` reads $NOTIFY_SOCKET, $WATCHDOG_USEC and
    $WATCHDOG_PID as sd_notify(3) and sd_watchdog_enabled(3) do."""

    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        # '@name' is Linux's abstract namespace, which the kernel spells with a leading NUL byte
        self.address = "\0" + address[1:] if address and address.startswith("@") else address
        self.watchdog_interval_s = watchdog_usec / 2e6 if watchdog_usec else None  # half, as systemd advises
        self.ready_sent = False
        self._failed_once = False

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> SystemdNotifier:
        env = os.environ if env is None else env
        usec_text, pid_text = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
        usec = int(usec_text) if usec_text.isdigit() and int(usec_text) > 0 else None
        if pid_text and pid_text != str(os.getpid()):  # the watchdog is another process's (e.g. a wrapper's)
            usec = None
        return cls(env.get("NOTIFY_SOCKET") or None, usec)

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def notify(self, *fields: str) -> bool:
        """Send one datagram; True when it was sent. Never blocks (the socket is non-blocking, and a full queue
        drops the message) and never raises: systemd being away must not take the agent down."""
        if not self.address:
            return False
        message = "\n".join(field.replace("\n", " ") for field in fields).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK) as s:
                s.sendto(message, self.address)
        except OSError as exc:
            if not self._failed_once:  # once: a missing socket would otherwise log at every watchdog ping
                log.warning("systemd_notify_failed", socket=self.address.replace("\0", "@"), error=str(exc))
                self._failed_once = True
            return False
        return True

    def follow(self, snapshot: StateSnapshot) -> None:
        """A state change: STATUS= always; READY=1 the first time the agent serves, or settles in FAILED (a store
        without an active version waits for an activation: start-up is over, and a start timeout would kill the
        agent that the Models service could bring to SERVING)."""
        fields = [f"STATUS={status_line(snapshot)}"]
        if snapshot.state in (ServingState.SERVING, ServingState.FAILED) and not self.ready_sent:
            fields.insert(0, "READY=1")
            self.ready_sent = True
        self.notify(*fields)

    def stopping(self) -> None:
        self.notify("STOPPING=1", "STATUS=draining in-flight requests")

    async def watchdog(self) -> None:
        """WATCHDOG=1 every half watchdog interval until cancelled. It runs as a task on the agent's event loop,
        so the pings stop when the loop stops turning: a stuck loop is what the watchdog must catch (health and
        every RPC need it)."""
        if not self.enabled or self.watchdog_interval_s is None:
            return
        while True:
            self.notify("WATCHDOG=1")
            await asyncio.sleep(self.watchdog_interval_s)


def status_line(snapshot: StateSnapshot) -> str:
    """What `systemctl status vkocr` shows: the state, then the device, backend and model when known."""
    line = f"{snapshot.state.value}: {snapshot.reason}" if snapshot.reason else snapshot.state.value
    if snapshot.device:
        line += f", device {snapshot.device} ({snapshot.backend or 'unknown backend'})"
    if snapshot.model_version:
        line += f", model {snapshot.model_version}"
    return line
