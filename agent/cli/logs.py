"""structlog set-up for the process: key/value lines (or JSON) on stderr, filtered by level."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(level: str = "warning", *, json: bool = False) -> None:
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        # sys.stderr looked up at every call, not bound now: a redirected or replaced stderr (tests, daemons)
        # must never leave the agent writing to a closed file
        logger_factory=lambda *args: structlog.PrintLogger(sys.stderr),
        cache_logger_on_first_use=False,
    )
