"""The CLI wing's errors: what stops a bench from giving its numbers or its charts."""

from __future__ import annotations

from vkocr.agent.errors import AgentError


class ChartError(AgentError):
    """Raised when a chart cannot be drawn: matplotlib cannot be imported (the message says to
    ``pip install 'vkocr[plots]'``), the JSON is no bench result of a kind with a chart, or it lacks a key the
    chart needs (the message names the key and where it was looked for)."""


class StartupBenchError(AgentError):
    """Raised when the agent of a startup run does not start, does not serve in time, or cannot answer."""
