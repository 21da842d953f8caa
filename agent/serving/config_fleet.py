"""The agent's `[fleet]` section: the fleet client that pulls model updates (agent/fleet/board.py). Empty
`broker`: no fleet client. Needs `[models] store` (updates go through the model store)."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from vkocr.agent.serving.errors import ConfigError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass
class FleetConfig:
    broker: str = ""  # mqtt://HOST:PORT or mqtts://HOST:PORT (TLS); empty: no fleet client
    fleet: str = ""  # the fleet's name: the topics' second level (vkocr/<fleet>/…)
    group: str = ""  # the group whose desired state this board follows
    board: str = ""  # this board's name in the fleet; empty: the host name
    username: str = ""  # this board's broker credentials (the broker's ACL lets it publish only its own state)
    password: str = ""
    ca: str = ""  # PEM CA the broker's certificate must chain to (mqtts); empty: the system's trust store
    cert: str = ""  # client certificate and key, for brokers that authenticate boards by certificate
    key: str = ""
    report_interval_s: float = 30.0  # the reported state is published at least this often (its `seen`)
    registry_user: str = ""  # OCI registry credentials (basic, or for a Bearer token); empty: anonymous
    registry_password: str = ""
    registry_ca: str = ""  # PEM CA of the registry's TLS certificate; empty: the system's trust store
    registry_plain_http: bool = False  # pull over plain HTTP (a registry on loopback or a closed network only)

    @property
    def board_name(self) -> str:
        return self.board or socket.gethostname().split(".")[0]

    def validate(self, store: str) -> None:
        if not self.broker:
            return
        if not re.fullmatch(r"mqtts?://[^/\s]+/?", self.broker):
            raise ConfigError(f"[fleet]: broker must be mqtt://HOST:PORT or mqtts://HOST:PORT, got {self.broker!r}")
        if not store:
            raise ConfigError("[fleet]: a fleet client installs through the model store; set [models] store")
        for key in ("fleet", "group"):
            if not NAME.fullmatch(getattr(self, key)):
                raise ConfigError(f"[fleet]: {key} must be 1-64 letters, digits, '.', '_' or '-', got "
                                  f"{getattr(self, key)!r}")
        if not NAME.fullmatch(self.board_name):
            raise ConfigError(f"[fleet]: board {self.board_name!r} must be 1-64 letters, digits, '.', '_' or '-'")
        if bool(self.cert) != bool(self.key):
            raise ConfigError("[fleet]: cert and key go together; set both or neither")
        if not self.report_interval_s >= 1.0:
            raise ConfigError(f"[fleet]: report_interval_s must be at least 1 s, got {self.report_interval_s}")
