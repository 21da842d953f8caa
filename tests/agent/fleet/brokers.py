"""A real Mosquitto broker and a real OCI registry (CNCF distribution, Debian's docker-registry) on loopback ports,
as the fleet tests use them: the broker with a password per board and the ACL of deploy/mosquitto/acl.conf."""

from __future__ import annotations

import getpass
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.agent.agents import free_port
from vkocr.agent.fleet.broker import BrokerAccess

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
REGISTRY = "/usr/bin/docker-registry"
OPERATOR = "operator"
ACL_TEMPLATE = Path(__file__).resolve().parents[3] / "deploy" / "mosquitto" / "acl.conf"


def wait_port(port: int, process: subprocess.Popen[bytes], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass(frozen=True)
class Broker:
    url: str
    passwords: dict[str, str]  # user → password
    fleet: str

    def access(self, user: str) -> BrokerAccess:
        return BrokerAccess(self.url, user, self.passwords[user])


def acl_for(fleet: str, groups: dict[str, str]) -> str:
    """deploy/mosquitto/acl.conf for `fleet`, with one `user` block per board giving read on its group."""
    text = ACL_TEMPLATE.read_text().replace("FLEET", fleet)
    blocks = [f"user {board}\ntopic read vkocr/{fleet}/groups/{group}/desired\n" for board, group in groups.items()]
    return text + "\n" + "\n".join(blocks)


@contextmanager
def mosquitto(work: Path, fleet: str, groups: dict[str, str]) -> Iterator[Broker]:
    """Mosquitto with a password for the operator and for each board of `groups` (board → group)."""
    work.mkdir(parents=True, exist_ok=True)
    passwords = {user: f"pw-{user}" for user in (OPERATOR, *groups)}
    password_file = work / "passwords"
    password_file.write_text("")
    for user, password in passwords.items():
        subprocess.run(["mosquitto_passwd", "-b", str(password_file), user, password], check=True)
    (work / "acl").write_text(acl_for(fleet, groups))
    port = free_port()
    (work / "mosquitto.conf").write_text(
        # run as whoever runs the tests (as root Mosquitto would switch to user mosquitto, who cannot read here)
        f"user {getpass.getuser()}\nlistener {port} 127.0.0.1\nallow_anonymous false\npassword_file {password_file}\n"
        f"acl_file {work / 'acl'}\npersistence false\nlog_dest file {work / 'mosquitto.log'}\n")
    process = subprocess.Popen([MOSQUITTO, "-c", str(work / "mosquitto.conf")], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_port(port, process, "mosquitto")
        yield Broker(f"mqtt://127.0.0.1:{port}", passwords, fleet)
    finally:
        stop(process)


@contextmanager
def registry(work: Path) -> Iterator[str]:
    """The CNCF distribution registry on a loopback port, storing under `work`; yields HOST:PORT."""
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = work / "config.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
                      f"    rootdirectory: {work / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n")
    process = subprocess.Popen([REGISTRY, "serve", str(config)], stdout=subprocess.DEVNULL,
                               stderr=(work / "registry.log").open("wb"))
    try:
        wait_port(port, process, "docker-registry")
        requests.get(f"http://127.0.0.1:{port}/v2/", timeout=10).raise_for_status()
        yield f"127.0.0.1:{port}"
    finally:
        stop(process)
