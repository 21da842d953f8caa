"""A connection to the fleet's MQTT broker (any MQTT 3.1.1 broker: Mosquitto, EMQX, HiveMQ, AWS IoT Core) through
paho-mqtt: `mqtt://host:port` or `mqtts://host:port` (TLS, with a CA and optionally a client certificate),
user name and password per board or operator. paho's own thread runs the network loop and reconnects."""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import paho.mqtt.client as mqtt

from vkocr.agent.fleet.errors import BrokerError

KEEPALIVE_S = 30
CONNECT_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class BrokerAccess:
    url: str  # mqtt://host:port or mqtts://host:port
    username: str = ""
    password: str = ""
    ca: str = ""  # PEM CA for mqtts; empty: the system's trust store
    cert: str = ""  # client certificate (brokers that authenticate by certificate)
    key: str = ""

    def host_port(self) -> tuple[str, int, bool]:
        parts = urlsplit(self.url)
        if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
            raise BrokerError(f"broker {self.url!r} must be mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
        tls = parts.scheme == "mqtts"
        try:
            port = parts.port or (8883 if tls else 1883)
        except ValueError as exc:
            raise BrokerError(f"broker {self.url!r}: {exc}") from exc
        return parts.hostname, port, tls


def new_client(access: BrokerAccess, client_id: str) -> mqtt.Client:
    """A paho client with the credentials and TLS of `access`, not yet connected."""
    host, port, tls = access.host_port()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311)
    if access.username:
        client.username_pw_set(access.username, access.password or None)
    if tls:
        client.tls_set(ca_certs=access.ca or None, certfile=access.cert or None, keyfile=access.key or None,
                       tls_version=ssl.PROTOCOL_TLS_CLIENT)
    client.reconnect_delay_set(min_delay=1, max_delay=30)
    return client


def connect_and_wait(client: mqtt.Client, access: BrokerAccess, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Connect, start paho's loop thread and wait for the broker's answer; BrokerError when it refuses or does
    not answer (the loop is stopped then)."""
    host, port, _tls = access.host_port()
    answered = threading.Event()
    outcome: list[str] = []
    previous = client.on_connect

    def on_connect(c: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        outcome.append("" if not getattr(reason, "is_failure", False) else str(reason))
        answered.set()
        if previous is not None:
            previous(c, userdata, flags, reason, props)  # type: ignore[call-arg]  # paho types v1's and v2's

    client.on_connect = on_connect
    try:
        client.connect(host, port, keepalive=KEEPALIVE_S)
    except (OSError, ValueError) as exc:
        raise BrokerError(f"cannot reach the broker {access.url}: {exc}") from exc
    client.loop_start()
    if not answered.wait(timeout) or outcome[0]:
        client.loop_stop()
        why = outcome[0] if outcome and outcome[0] else f"no answer within {timeout:g} s"
        raise BrokerError(f"the broker {access.url} refused {access.username or 'this client'}: {why}")
    client.on_connect = previous
