"""What the pull-mode fleet tests share: a real Mosquitto (passwords, ACL) and registry on loopback, bundles pushed
there, and real agents (CPU backend) whose fleet client follows the broker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.brokers import OPERATOR, Broker
from tests.agent.fleet.fleet_agents import seed_store, store_config
from vkocr.agent.cli.main import main
from vkocr.agent.fleet.oci import Reference, Registry, RegistryAccess
from vkocr.agent.fleet.view import FleetView
from vkocr.agent.serving.background import BackgroundAgent, start_agent

FLEET = "plant-7"
GROUP = "line-a"
BOARDS = {"b1": GROUP, "b2": GROUP, "b3": GROUP}
PLAIN = RegistryAccess(plain_http=True)


def push(oci: str, bundle: Path, repository: str, version: str) -> str:
    """The bundle's reference by digest (what `vkocr bundle push` prints), pushed through the same code."""
    from vkocr.agent.bundles.bundle import read_manifest

    manifest = read_manifest(bundle)
    reference = Reference.parse(f"{oci}/{repository}:{version}")
    with Registry(oci, PLAIN) as registry:
        digest = registry.push_bundle(bundle, reference, {"org.opencontainers.image.version": manifest.version,
                                                          "vnd.vkocr.bundle.signer": str(manifest.signer)})
    return str(reference.by_digest(digest))


@dataclass
class Fleet:
    broker: Broker
    oci: str
    key: KeyPair
    work: Path
    agents: dict[str, BackgroundAgent] = field(default_factory=dict)

    def config(self, board: str) -> Any:
        password = self.work / f"{board}.password"
        password.write_text(self.broker.passwords[board] + "\n")
        return store_config(self.work / board, self.key, **{
            "device.select": "cpu", "fleet.broker": self.broker.url, "fleet.fleet": FLEET,
            "fleet.group": BOARDS[board], "fleet.board": board, "fleet.username": board,
            "fleet.password_file": str(password), "fleet.report_interval_s": 1.0,
            "fleet.registry_plain_http": True})

    def start(self, board: str) -> BackgroundAgent:
        self.agents[board] = start_agent(self.config(board), wait_serving=False)
        return self.agents[board]

    def stop(self, board: str) -> None:
        self.agents.pop(board).stop(5)

    def stop_all(self) -> None:
        for board in list(self.agents):
            self.stop(board)

    def seed(self, *bundles: Path) -> None:
        for board in BOARDS:
            seed_store(self.work / board, self.key, *bundles)

    def active(self, board: str) -> str | None:
        from vkocr.agent.bundles.store import ModelStore

        return ModelStore(self.work / board, self.key.trusted).active()

    @contextmanager
    def view(self) -> Iterator[FleetView]:
        with FleetView(self.broker.access(OPERATOR), FLEET) as view:
            yield view

    def cli(self, *args: str) -> int:
        """`vkocr fleet …` as the operator, against this broker and registry."""
        os.environ["VKOCR_BROKER_PASSWORD"] = self.broker.passwords[OPERATOR]
        try:
            return main(["fleet", *args, "--fleet", FLEET, "--broker", self.broker.url,
                         "--registry-plain-http"] + (["--group", GROUP] if "--group" not in args else []))
        finally:
            del os.environ["VKOCR_BROKER_PASSWORD"]
