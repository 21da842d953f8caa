"""Whether the agent's OCR port takes a new client: readiness must not say SERVING while idle or hostile
connections hold every slot of [server] max_connections (the health-only port has slots of its own, so a probe
there would otherwise report a board no client can reach).

At the limit gRPC core accepts a connection and closes it at once; with room it sends its HTTP/2 SETTINGS
(plaintext) or waits for the client's TLS handshake. The probe connects every interval, reads at most one byte
for a moment, and closes: no TLS, no call, whatever the port's credentials. Its connection is gone before the
next client's, and costs the server one accept."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from vkocr.log import get_logger

log = get_logger(__name__)

CONNECT_TIMEOUT_S = 1.0
CLOSED_AT_ONCE_S = 0.25  # how long a refused connection takes to be closed by the server, at most


def probe_host(listen_host: str) -> str:
    """The address of the listening port from this process: loopback for a wildcard."""
    if listen_host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if listen_host in ("::", "[::]"):
        return "::1"
    return listen_host.strip("[]")


async def port_takes_a_client(host: str, port: int) -> bool:
    """Connect to host:port: False when the connection fails or the server closes it at once."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError):
        return False
    try:
        first = await asyncio.wait_for(reader.read(1), CLOSED_AT_ONCE_S)
    except TimeoutError:
        return True  # open and waiting for our handshake (TLS)
    except OSError:
        return False  # reset
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return bool(first)  # the server's SETTINGS; b"": closed at once


class PortProbe:
    """Checks the port every `interval_s` and calls `on_change(takes_clients)` when the answer changes."""

    def __init__(self, host: str, port: int, interval_s: float,
                 on_change: Callable[[bool], Awaitable[None]]) -> None:
        self.host, self.port, self.interval_s = host, port, interval_s
        self.on_change = on_change
        self.takes_clients = True

    async def run(self) -> None:
        while True:
            takes = await port_takes_a_client(self.host, self.port)
            if takes != self.takes_clients:
                self.takes_clients = takes
                log.warning("ocr_port_full" if not takes else "ocr_port_takes_clients", port=self.port)
                await self.on_change(takes)
            await asyncio.sleep(self.interval_s)
