"""`vkocr serve` as its own process, stopped with SIGTERM while requests are in flight: every request gets an
answer (its text, or UNAVAILABLE/CANCELLED once the grace period is over), nothing hangs, the process logs
"stopped" and exits 0, and a request sent after the signal is refused."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from tests.agent.agents import FONT, lot_number, word_png
from tests.paths import ROOT
from vkocr.agent.cli import bench_startup
from vkocr.agent.serving.client import OcrClient

pytestmark = pytest.mark.skipif(not os.path.exists(FONT),
                                reason="fonts-dejavu-core (installed by ./test.sh) renders the test images")

# Far more than the burst needs on any machine (lavapipe reads one of these words in 0.4 s on an idle 2-core
# machine, in seconds on a loaded one): the drain ends when the last answer leaves, so this is no wait, and the
# request on the GPU at the signal finishes however slow the device is. What the end of a grace period cancels
# is tested in test_hostile_requests, with the worker held.
GRACE_S = 120.0
LISTENING = re.compile(r"^vkocr agent listening on (\S+):(\d+) \(plaintext\)")


class ServeProcess(bench_startup.ServeProcess):
    """`python -m vkocr.agent.cli.main serve` (the startup bench's child process) with what this test waits for."""

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__([sys.executable, "-m", "vkocr.agent.cli.main", "serve", "--listen", "127.0.0.1:0"], env,
                         cwd=ROOT)

    def wait_for(self, what: str, condition: Callable[[], Any], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = condition()
            if found:
                return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"{what}: not seen (exit status {self.proc.poll()}); stdout: {self.stdout}; "
                             f"stderr tail: {self.stderr[-20:]}")

    def finish(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture
def serve_process() -> Iterator[ServeProcess]:
    env = {**os.environ, "VKOCR_SERVER_GRACE_S": str(GRACE_S),  # VKOCR_VALIDATION as this session has it
           "VKOCR_PLANS_WARM_SHAPES": "",  # no warm-up: seconds on lavapipe, for plans this test never uses
           "VKOCR_DEVICE_SELECT": "llvmpipe"}  # named: lavapipe is never chosen automatically
    process = ServeProcess(env)
    try:
        yield process
    finally:
        process.kill()


def outcome(client: OcrClient, i: int) -> tuple[int, str, str]:
    """(i, "OK", text) or (i, code name, details) of one recognition-only request."""
    try:
        response = client.recognize(word_png(lot_number(i)), request_id=f"id-{i}", use_det=False,
                                    use_cls=False, timeout=120)
    except grpc.RpcError as err:
        return i, err.code().name, err.details() or ""
    return i, "OK", response.lines[0].text if response.lines else ""


def test_sigterm_drains_in_flight_requests_and_exits_0(serve_process: ServeProcess) -> None:
    agent = serve_process

    def listening() -> re.Match[str] | None:
        return next((m for line in agent.stdout if (m := LISTENING.match(line))), None)

    found = agent.wait_for("the listening line", listening, 120)
    target = f"{found.group(1)}:{found.group(2)}"
    agent.wait_for("the serving line", lambda: any(line.startswith("serving ") for line in agent.stdout), 300)

    # more requests than the device's image slots (10 on lavapipe): the lanes take what the slots hold, the rest
    # wait in the queue
    burst = 16
    with OcrClient(target, timeout=120) as client, ThreadPoolExecutor(burst) as pool:
        assert outcome(client, 0) == (0, "OK", lot_number(0))  # plans recorded before the burst
        futures = [pool.submit(outcome, client, i) for i in range(1, burst + 1)]

        def on_the_gpu() -> bool:  # jobs queued behind others: the lanes have taken some
            status = client.status(timeout=10)
            return status.in_flight > 0 and status.queue_depth > 0

        agent.wait_for("a request on the GPU and one queued", on_the_gpu, 60)
        agent.proc.send_signal(signal.SIGTERM)

        agent.wait_for("draining", lambda: any(e.get("event") == "state" and e.get("state") == "DRAINING"
                                               for e in agent.events()), 30)
        with OcrClient(target, timeout=30) as late:  # after the signal: refused, by the agent or the socket
            late_answer = outcome(late, 100)
        assert late_answer[1] == "UNAVAILABLE", late_answer

        answers = [future.result(timeout=GRACE_S + 60) for future in futures]  # none hangs
    assert sorted(i for i, _, _ in answers) == list(range(1, burst + 1))  # none lost
    for i, code, text in answers:
        ok = code == "OK" and text == lot_number(i)
        assert ok or code in ("UNAVAILABLE", "CANCELLED"), (i, code, text)
    assert any(code == "OK" for _, code, _ in answers), answers  # the one on the GPU at the signal finished

    assert agent.finish(timeout=GRACE_S + 30) == 0  # within the grace period and a margin
    events = agent.events()
    names = [e.get("event") for e in events]
    assert "signal_received" in names and "stopped" in names, agent.stderr[-20:]
    assert names.index("signal_received") < names.index("stopped")
    assert not [e for e in events if e.get("event") == "vulkan_validation"]
