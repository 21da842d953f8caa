"""A time budget for one plugin call: the call runs on a plugin thread, and one that overruns is stopped.

A Python thread cannot be killed, so an overrunning call is stopped the way ``sys.exit`` stops a program:
``SystemExit`` (not an Exception, so a plugin's ``except Exception`` does not swallow it) is raised inside its
thread at the next bytecode it runs (``PyThreadState_SetAsyncExc``). The caller does not wait for
that: it gets ``PluginTimeout`` as soon as the budget is spent, so the result goes on with its lines. Code
stuck inside one C call (a backtracking ``re`` match) stops only when the call returns; until then it keeps its
thread, and a pool of ``PLUGIN_THREADS`` bounds how many such calls can pile up (a call that finds no free
thread within its budget is never started, and times out like the others).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Final, TypeVar

from vkocr.log import get_logger
from vkocr.postproc.errors import PluginTimeout

log = get_logger(__name__)

T = TypeVar("T")
PLUGIN_THREADS: Final = 8

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _plugin_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(PLUGIN_THREADS, thread_name_prefix="vkocr-plugin")
        return _pool


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Raise `exception` in the thread at its next bytecode; None takes back one not raised yet."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exception) if exception else None)


class _Call:
    """One call and where it stands: "queued", "running", "done" or "abandoned" (its budget ran out before a
    thread took it); `lock` orders the stop against the call's own end."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.lock = threading.Lock()
        self.state = "queued"
        self.thread_id = 0
        self.stopped = False

    def run(self) -> Any:
        try:
            with self.lock:
                if self.state == "abandoned":
                    return None
                self.state, self.thread_id = "running", threading.get_ident()
            try:
                return self.fn()
            finally:
                with self.lock:
                    self.state = "done"
                    if self.stopped:  # the stop came as the call ended: take it back before it hits the pool
                        _raise_in(self.thread_id, None)
        except SystemExit:  # the stop (or the plugin's own sys.exit): the caller has its answer already
            log.info("postproc_plugin_stopped")
            return None

    def stop(self) -> None:
        """The budget is spent: never start, or stop the running call."""
        with self.lock:
            if self.state == "queued":
                self.state = "abandoned"
            elif self.state == "running" and not self.stopped:
                self.stopped = True
                _raise_in(self.thread_id, SystemExit)


def call_within(fn: Callable[[], T], budget_s: float, what: str) -> T:
    """``fn()`` on a plugin thread; its result, or its exception. PluginTimeout (naming `what`) when it has not
    returned within `budget_s`: the call is then stopped, and nothing waits for it."""
    call = _Call(fn)
    future: Future[T] = _plugin_pool().submit(call.run)
    try:
        return future.result(timeout=budget_s)
    except FutureTimeout:
        call.stop()
        raise PluginTimeout(f"{what} overran its budget of {budget_s * 1e3:g} ms and was stopped") from None
