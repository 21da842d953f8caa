#!/usr/bin/env python3
"""A fleet of simulated boards (the fleet protocol alone, no OCR) against a real Mosquitto on loopback, and the
rollout controller of `vkocr fleet rollout` driving it: how long the inventory takes to read, and each wave.

Each simulated board is one MQTT client (paho, as the agent's) that reports its retained state with a last will,
follows its own and its group's desired state, and "installs" in --install-s seconds (standing in for pull,
verify, load and self-test) before it reports. --offline of the boards report once and then disconnect: they are
pending, not failures. Prints one JSON object (the figures BENCHMARKS.md quotes) on stdout.

    .venv/bin/python scripts/fleet_simulation.py --boards 500 --offline 0.05
"""

from __future__ import annotations

import argparse
import getpass
import json
import multiprocessing
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt

from vkocr.agent.fleet import topics
from vkocr.agent.fleet.broker import BrokerAccess, connect_and_wait, new_client
from vkocr.agent.fleet.topics import INSTALLED, Desired, Reported
from vkocr.agent.fleet.view import FleetView
from vkocr.agent.fleet.waves import WavePlan, rollout

FLEET, GROUP = "sim", "line-a"
DIGEST = "sha256:" + "ab" * 32


class SimBoard:
    def __init__(self, url: str, name: str, install_s: float) -> None:
        self.name, self.install_s = name, install_s
        self.state = Reported(name, GROUP, version="1.0.0", health="SERVING")
        self.client = new_client(BrokerAccess(url, name), client_id=f"sim-{name}")
        self.client.will_set(topics.board_online(FLEET, name), b"false", qos=1, retain=True)
        self.client.on_message = self.on_message
        self.url = url

    def start(self) -> None:
        connect_and_wait(self.client, BrokerAccess(self.url, self.name))
        self.client.subscribe([(topics.group_desired(FLEET, GROUP), 1), (topics.board_desired(FLEET, self.name), 1)])
        self.client.publish(topics.board_online(FLEET, self.name), b"true", qos=1, retain=True)
        self.report()

    def report(self) -> None:
        self.state = replace(self.state, seen=time.time())
        self.client.publish(topics.board_state(FLEET, self.name), topics.encode(self.state), qos=1, retain=True)

    def on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        if not message.payload:
            return
        desired = topics.decode(Desired, bytes(message.payload))
        if desired.bundle == self.state.desired:
            return
        self.state = replace(self.state, desired=desired.bundle, rollout=desired.rollout, result="updating")
        self.report()

        def installed() -> None:
            self.state = replace(self.state, version=desired.version, result=INSTALLED)
            self.report()

        threading.Timer(self.install_s * random.uniform(0.5, 1.5), installed).start()

    def go_offline(self) -> None:
        self.client.publish(topics.board_online(FLEET, self.name), b"false", qos=1, retain=True).wait_for_publish(5)
        self.client.disconnect()
        self.client.loop_stop()


BOARDS_PER_PROCESS = 125


def run_boards(url: str, names: list[str], offline: set[str], install_s: float, ready: Any, stop: Any) -> None:
    """One process's boards: connect and report each, take the offline ones away again, serve until `stop`."""
    boards = [SimBoard(url, name, install_s) for name in names]
    for board in boards:
        board.start()
    for board in boards:
        if board.name in offline:
            board.go_offline()
    ready.wait()
    stop.wait()
    for board in boards:
        if board.name not in offline:
            board.client.disconnect()
            board.client.loop_stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--boards", type=int, default=500)
    parser.add_argument("--offline", type=float, default=0.05, help="share of boards offline (default 0.05)")
    parser.add_argument("--install-s", type=float, default=2.0, help="a board's simulated update (default 2 s)")
    parser.add_argument("--canary", type=int, default=5)
    parser.add_argument("--batch", default="25%")
    args = parser.parse_args()
    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    work = Path(tempfile.mkdtemp(prefix="fleet-sim-"))
    port = free_port()
    # anonymous users with the example ACL's per-user patterns: the broker still keeps each board to its topics
    (work / "acl").write_text(f"pattern write vkocr/{FLEET}/boards/%u/#\npattern read vkocr/{FLEET}/#\n"
                              f"user operator\ntopic readwrite vkocr/{FLEET}/#\n")
    (work / "mosquitto.conf").write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\nacl_file {work}/acl\n"
                                         f"max_keepalive 120\npersistence false\nuser {getpass.getuser()}\n")
    broker = subprocess.Popen([mosquitto, "-c", str(work / "mosquitto.conf")], stderr=subprocess.DEVNULL)
    url = f"mqtt://127.0.0.1:{port}"
    time.sleep(0.5)
    names = [f"b{i:03d}" for i in range(args.boards)]
    offline = set(random.Random(7).sample(names, round(args.offline * args.boards)))
    figures: dict[str, object] = {"boards": args.boards, "offline_share": args.offline, "install_s": args.install_s}
    # paho's loop waits in select(), which takes descriptors below 1024: BOARDS_PER_PROCESS clients a process
    stop = multiprocessing.Event()
    ready = multiprocessing.Barrier(len(range(0, len(names), BOARDS_PER_PROCESS)) + 1)
    processes = [multiprocessing.Process(target=run_boards, args=(url, names[i:i + BOARDS_PER_PROCESS], offline,
                                                                   args.install_s, ready, stop))
                 for i in range(0, len(names), BOARDS_PER_PROCESS)]
    try:
        started = time.monotonic()
        for process in processes:
            process.start()
        ready.wait(timeout=600)
        figures["connect_all_s"] = round(time.monotonic() - started, 2)
        started = time.monotonic()
        with FleetView(BrokerAccess(url, "operator"), FLEET) as view:
            rows = view.boards(GROUP)
            figures["inventory_s"] = round(time.monotonic() - started, 2)
            figures["inventory_boards"] = len(rows)
            figures["inventory_offline"] = sum(not r.online for r in rows)
            waves: list[dict[str, object]] = []
            last = [time.monotonic()]

            def say(line: str) -> None:
                print(line, file=sys.stderr, flush=True)
                if " installed, " in line:
                    now = time.monotonic()
                    waves.append({"line": line.split(": ", 1)[1], "s": round(now - last[0], 2)})
                elif line.startswith("wave "):
                    last[0] = time.monotonic()

            desired = Desired("2.0.0", f"registry.example/ocr/labels@{DIGEST}", "cd" * 32, "sim-2.0.0")
            plan = WavePlan(canary=args.canary, batch=args.batch, soak_s=0.0, max_failures=0, wave_timeout_s=120)
            started = time.monotonic()
            record = rollout(view, GROUP, desired, plan, say)
            figures["rollout_s"] = round(time.monotonic() - started, 2)
            figures["status"] = record.status
            figures["pending"] = len(record.pending)
            figures["failed"] = len(record.failed)
            figures["waves"] = waves
    finally:
        stop.set()
        for process in processes:
            process.join(30)
        broker.terminate()
        broker.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
