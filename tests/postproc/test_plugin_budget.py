"""A plugin's time budget: a call that overruns is stopped, the result keeps its lines and carries the error,
and the plugins after it still run."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from vkocr.postproc.errors import PluginTimeout
from vkocr.postproc.plugin_budget import call_within
from vkocr.postproc.registry import PluginRegistry
from vkocr.postproc.result import OcrLine, OcrResult

BOX = [[0.0, 0.0], [10.0, 0.0], [10.0, 5.0], [0.0, 5.0]]


class Careless:
    """Loops for ever and swallows every Exception, as careless code does; counts its turns."""

    name = "careless"

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.turns = 0

    def __call__(self, result: OcrResult) -> dict[str, Any]:
        while True:
            try:
                self.turns += 1
            except Exception:  # noqa: BLE001, S110 - the carelessness under test
                pass


class Count:
    name = "count"

    def __init__(self, options: Mapping[str, Any]) -> None: ...

    def __call__(self, result: OcrResult) -> dict[str, Any]:
        return {"count": len(result.lines)}


def run_in_thread(fn: Any, limit_s: float = 30.0) -> Any:
    """`fn()` on a thread, failing the test (instead of hanging the suite) when it does not return."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    worker.start()
    worker.join(limit_s)
    assert out, f"did not return within {limit_s} s"
    return out[0]


def test_an_overrunning_plugin_is_stopped_and_the_result_survives() -> None:
    registry = PluginRegistry({"careless": Careless, "count": Count})
    chain = registry.build_chain(["careless", "count"], budget_s=0.2)
    careless = chain.plugins[0][1]
    assert isinstance(careless, Careless)
    result = OcrResult(lines=[OcrLine("LOT 42", 0.9, BOX)])
    run_in_thread(lambda: chain.run(result))
    assert [line.text for line in result.lines] == ["LOT 42"] and result.fields == {"count": 1}
    assert result.errors == [{"plugin": "careless",
                              "error": "PluginTimeout: plugin 'careless' overran its budget of 200 ms and was stopped"}]
    turns = careless.turns
    time.sleep(0.2)
    assert careless.turns == turns, "the plugin still runs"


def test_calls_within_their_budget_return_their_result_or_their_error() -> None:
    assert call_within(lambda: 42, 1.0, "quick") == 42

    def fail() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        call_within(fail, 1.0, "failing")
    with pytest.raises(PluginTimeout, match="'slow' overran its budget of 50 ms"):
        call_within(lambda: time.sleep(0.5), 0.05, "'slow'")
    for i in range(200):  # stops near the end of a call never leak into the next ones on the same threads
        assert call_within(lambda i=i: i, 1.0, "quick") == i


def test_no_budget_runs_on_the_callers_thread() -> None:
    seen: list[str] = []

    class Where:
        name = "where"

        def __init__(self, options: Mapping[str, Any]) -> None: ...

        def __call__(self, result: OcrResult) -> dict[str, Any]:
            seen.append(threading.current_thread().name)
            return {}

    PluginRegistry({"where": Where}).build_chain(["where"], budget_s=None).run(OcrResult())
    PluginRegistry({"where": Where}).build_chain(["where"]).run(OcrResult())
    assert seen[0] == threading.current_thread().name and seen[1].startswith("vkocr-plugin")
