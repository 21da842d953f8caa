"""vkocr's loggers: structlog's API on top of the standard `logging` hierarchy (the engine's, postproc's and
the agent's alike).

``get_logger(name)`` gives a structlog logger over ``logging.getLogger(name)``; events are snake_case names
with key/value context (``log.info("plan_recorded", graph=..., ms=...)``). Where they go:

- structlog not configured (vkocr used as a library): each event becomes one `logging` record on its logger,
  ``msg`` "event key=value …" and the key/values in ``record.event_dict``. The "vkocr" logger carries a
  ``NullHandler``, so nothing is printed unless the application configures `logging`.
- structlog configured with another chain than its defaults (the CLI and the agent, agent/cli/logs.py; an
  application with its own structlog set-up; ``structlog.testing.capture_logs`` in tests): the configured
  processors run, then the event goes to the same `logging` logger (the CLI's chain ends in
  ``ProcessorFormatter.wrap_for_formatter``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, cast

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

ROOT = "vkocr"
logging.getLogger(ROOT).addHandler(logging.NullHandler())


def render_to_stdlib(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> dict[str, Any]:
    """The keyword arguments of one `logging` call: ``msg`` "event key=value …", the event and its key/values
    as ``extra={"event_dict": …}``, and ``exc_info``/``stack_info`` as `logging` takes them."""
    kwargs: dict[str, Any] = {key: event_dict.pop(key) for key in ("exc_info", "stack_info")
                              if key in event_dict}
    event = event_dict.pop("event", "")
    context = " ".join(f"{key}={value!r}" for key, value in event_dict.items())
    kwargs["msg"] = f"{event} {context}" if context else str(event)
    kwargs["extra"] = {"event_dict": {"event": event, **event_dict}}
    return kwargs


LIBRARY_PROCESSORS: list[Processor] = [
    structlog.stdlib.filter_by_level,  # a disabled level costs one isEnabledFor
    structlog.processors.StackInfoRenderer(),
    render_to_stdlib,
]


# structlog's built-in default chain, as it stands before anybody configures structlog; `capture_logs` puts
# the same processors back when it ends, which still counts as "not configured" here
_BUILTIN: list[Processor] | None = (None if structlog.is_configured()
                                    else list(structlog.get_config()["processors"]))


class _Processors:
    """The processors of every vkocr logger, chosen per event: the chain structlog was configured with (the
    CLI, an application's own, ``capture_logs``), or LIBRARY_PROCESSORS while structlog has only its
    defaults."""

    def __iter__(self) -> Iterator[Processor]:
        configured: list[Processor] = structlog.get_config()["processors"]
        if not structlog.is_configured() or configured == _BUILTIN:
            return iter(LIBRARY_PROCESSORS)
        return iter(configured)


_PROCESSORS = _Processors()


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger (``structlog.stdlib.BoundLogger`` API) over ``logging.getLogger(name)``; ``name`` is
    the module's dotted name under "vkocr" (``__name__``)."""
    logger = structlog.wrap_logger(logging.getLogger(name), processors=_PROCESSORS,
                                   wrapper_class=structlog.stdlib.BoundLogger,
                                   cache_logger_on_first_use=False)
    return cast(structlog.stdlib.BoundLogger, logger)  # a lazy proxy that binds to this class
