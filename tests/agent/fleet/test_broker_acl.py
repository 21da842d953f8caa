"""The broker's ACL (deploy/mosquitto/acl.conf) on a real Mosquitto: a board's credentials publish its own state
but not another board's, and read its group's desired state but not another group's; the last will marks a board
that vanished offline."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from tests.agent.fleet.brokers import MOSQUITTO, OPERATOR, Broker, mosquitto
from vkocr.agent.fleet import topics
from vkocr.agent.fleet.broker import connect_and_wait, new_client
from vkocr.agent.fleet.errors import BrokerError
from vkocr.agent.fleet.topics import Desired, Reported
from vkocr.agent.fleet.view import FleetView

pytestmark = pytest.mark.skipif(not shutil.which(MOSQUITTO), reason="mosquitto (./test.sh installs it)")
FLEET = "acl-test"
DIGEST = "0" * 64


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with mosquitto(tmp_path_factory.mktemp("acl"), FLEET, {"b1": "line-a", "b2": "line-a", "c1": "line-b"}) as b:
        yield b


def connected(broker: Broker, user: str, will: bool = False) -> mqtt.Client:
    client = new_client(broker.access(user), client_id=f"test-{user}")
    if will:
        client.will_set(topics.board_online(FLEET, user), b"false", qos=1, retain=True)
    connect_and_wait(client, broker.access(user))
    return client


def received(broker: Broker, user: str, topic: str, wait_s: float = 1.5) -> list[bytes]:
    """What `user` receives on `topic` right after subscribing (the retained message, if it may read it)."""
    got: list[bytes] = []
    arrived = threading.Event()
    client = new_client(broker.access(user), client_id=f"reader-{user}")

    def on_message(c: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        got.append(bytes(message.payload))
        arrived.set()

    client.on_message = on_message
    connect_and_wait(client, broker.access(user))
    client.subscribe(topic, 1)
    arrived.wait(wait_s)
    client.disconnect()
    client.loop_stop()
    return got


def test_a_board_cannot_publish_another_boards_state(broker: Broker) -> None:
    b1, b2 = connected(broker, "b1"), connected(broker, "b2")
    own = Reported("b1", "line-a", version="2.0.0", health="SERVING")
    b1.publish(topics.board_state(FLEET, "b1"), topics.encode(own), qos=1, retain=True).wait_for_publish(5)
    forged = Reported("b1", "line-a", version="6.6.6", health="SERVING")
    b2.publish(topics.board_state(FLEET, "b1"), topics.encode(forged), qos=1, retain=True).wait_for_publish(5)
    b2.publish(topics.group_desired(FLEET, "line-a"), b"{}", qos=1, retain=True).wait_for_publish(5)
    for client in (b1, b2):
        client.disconnect()
        client.loop_stop()
    with FleetView(broker.access(OPERATOR), FLEET) as view:
        assert view.states["b1"].version == "2.0.0"  # b2's forgery never reached anyone
        assert "line-a" not in view.desired  # nor may a board set desired state


def test_a_board_reads_its_groups_desired_state_only(broker: Broker) -> None:
    with FleetView(broker.access(OPERATOR), FLEET) as view:
        for group in ("line-a", "line-b"):
            view.publish(topics.group_desired(FLEET, group),
                         Desired(f"1.0.{group[-1]}", f"r.example/ocr@sha256:{DIGEST}", DIGEST))
    assert len(received(broker, "b1", topics.group_desired(FLEET, "line-a"))) == 1
    assert received(broker, "b1", topics.group_desired(FLEET, "line-b")) == []
    assert len(received(broker, "c1", topics.group_desired(FLEET, "line-b"))) == 1


def test_wrong_credentials_are_refused_naming_the_user(broker: Broker) -> None:
    access = broker.access("b1")
    wrong = type(access)(access.url, "b1", "not-the-password")
    with pytest.raises(BrokerError, match="refused b1"):
        connect_and_wait(new_client(wrong, "wrong"), wrong, timeout=5)


def test_the_last_will_marks_a_vanished_board_offline(broker: Broker) -> None:
    board = connected(broker, "b2", will=True)
    board.publish(topics.board_online(FLEET, "b2"), b"true", qos=1, retain=True).wait_for_publish(5)
    assert received(broker, OPERATOR, topics.board_online(FLEET, "b2")) == [b"true"]
    board.loop_stop()
    board.socket().close()  # gone without a DISCONNECT: the broker publishes the will
    with FleetView(broker.access(OPERATOR), FLEET) as view:
        assert view.wait_for(lambda: view.online.get("b2") is False, 10)


def test_example_acl_names_the_topics_the_code_uses() -> None:
    acl = (Path(__file__).resolve().parents[3] / "deploy" / "mosquitto" / "acl.conf").read_text()
    assert topics.board_state("FLEET", "%u") in acl and topics.board_online("FLEET", "%u") in acl
    assert topics.board_desired("FLEET", "%u") in acl
