"""The agent's `[fleet]` section: the fleet client that pulls model updates (agent/fleet/board.py). Empty
`broker`: no fleet client. Needs `[models] store` (updates go through the model store)."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from pathlib import Path

from vkocr.agent.serving.errors import ConfigError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass
class FleetConfig:
    broker: str = ""  # mqtt://HOST:PORT or mqtts://HOST:PORT (TLS); empty: no fleet client
    fleet: str = ""  # the fleet's name: the topics' second level (vkocr/<fleet>/…)
    group: str = ""  # the group whose desired state this board follows
    board: str = ""  # this board's name in the fleet; empty: the host name
    username: str = ""  # this board's broker user (the broker's ACL lets it publish only its own state); empty: board
    password_file: str = ""  # a file holding its password (a systemd credential, a mounted Secret): never in here
    ca: str = ""  # PEM CA the broker's certificate must chain to (mqtts); empty: the system's trust store
    cert: str = ""  # client certificate and key, for brokers that authenticate boards by certificate
    key: str = ""
    report_interval_s: float = 30.0  # the reported state is published at least this often (its `seen`)
    registry_user: str = ""  # OCI registry user (basic, or for a Bearer token); empty: anonymous
    registry_password_file: str = ""  # a file holding the registry password
    registry_ca: str = ""  # PEM CA of the registry's TLS certificate; empty: the system's trust store
    registry_plain_http: bool = False  # pull over plain HTTP (a registry on loopback or a closed network only)

    def secret(self, key: str) -> str:
        """The content of the file `key` names (password_file, registry_password_file), without the final
        newline; "" when none is named. ConfigError naming the key when it cannot be read."""
        path = getattr(self, key)
        if not path:
            return ""
        try:
            return Path(path).read_text().rstrip("\n")
        except OSError as exc:
            raise ConfigError(f"[fleet]: {key} {path}: {exc.strerror or exc}") from exc

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
        self.secret("password_file")
        self.secret("registry_password_file")
        if not self.report_interval_s >= 1.0:
            raise ConfigError(f"[fleet]: report_interval_s must be at least 1 s, got {self.report_interval_s}")
