"""Logging set-up for the process (the CLI and the agent): key/value lines (or JSON) on stderr, filtered by
level.

vkocr's modules log through vkocr.log (structlog over the standard `logging` hierarchy); this is the
application side: structlog's chain ends in ``ProcessorFormatter.wrap_for_formatter``, and one handler on the
root logger renders vkocr's events and any other library's records alike.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

from vkocr.log import ROOT


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]  # TextIO, through the property below
    """A stream handler on ``sys.stderr`` looked up at every record, not bound now: a redirected or replaced
    stderr (tests, daemons) must never leave the agent writing to a closed file."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:  # type: ignore[override]  # StreamHandler.stream is an attribute; here a property
        return sys.stderr


def configure_logging(level: str = "warning", *, json: bool = False) -> None:
    """vkocr's events at ``level`` and above (and other libraries' warnings) on stderr, as ``ConsoleRenderer``
    lines or JSON objects (``event``, ``level``, ``timestamp``, ``logger`` and the event's key/values). Called
    again, it replaces its own handler."""
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.processors.add_log_level,
            structlog.stdlib.add_logger_name,
            stamp,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    render: list[structlog.typing.Processor] = (
        [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()] if json
        else [structlog.dev.ConsoleRenderer(colors=False)]
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *render],
        foreign_pre_chain=[structlog.processors.add_log_level, structlog.stdlib.add_logger_name, stamp],
    )
    handler = StderrHandler()
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, StderrHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    logging.getLogger(ROOT).setLevel(logging.getLevelName(level.upper()))
