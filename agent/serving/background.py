"""An agent on an event loop thread of its own, for tests, benchmarks and embedding: `start_agent` starts one
and returns once its models serve."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from vkocr.agent.serving.config import AgentConfig
from vkocr.agent.serving.server import Agent
from vkocr.agent.serving.state import ServingState
from vkocr.errors import VkocrError


class BackgroundAgent:
    """An agent on its own event loop thread (tests, benchmarks, embedding): `start_agent()` returns one."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="vkocr-agent-loop", daemon=True)

    @property
    def port(self) -> int:
        return self.agent.port

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.agent.port}"

    def call(self, coroutine: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self, grace_s: float = 5.0) -> None:
        if self.loop.is_closed():
            return
        try:
            self.call(self.agent.stop(grace_s), timeout=grace_s + 30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()


def start_agent(config: AgentConfig, *, wait_serving: bool = True, timeout: float = 300.0,
                before_start: Callable[[Agent], None] | None = None, **agent_args: Any) -> BackgroundAgent:
    """Start an agent on a background thread; with `wait_serving`, return once its models are loaded (raises
    when they failed to load). `before_start` gets the agent before it starts (to subscribe to its state from
    the first change)."""
    background = BackgroundAgent(Agent(config, **agent_args))
    if before_start is not None:
        before_start(background.agent)
    background._thread.start()
    try:
        background.call(background.agent.start(), timeout=60)
        if wait_serving:
            if not background.agent.worker.loaded.wait(timeout):
                raise VkocrError(f"models did not load within {timeout:.0f} s")
            snapshot = background.agent.state.get()
            if snapshot.state is not ServingState.SERVING:
                raise VkocrError(f"agent is {snapshot.state.value}: {snapshot.reason}")
    except BaseException:
        background.stop(0)
        raise
    return background
