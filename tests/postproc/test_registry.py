"""The plugin registry and chain: built-ins, entry-point discovery, configuration errors, failure isolation."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from vkocr.postproc import registry
from vkocr.postproc.errors import PluginConfigError, PluginLoadError, UnknownPluginError
from vkocr.postproc.registry import ENTRY_POINT_GROUP, PluginRegistry, build_chain, default_registry
from vkocr.postproc.result import OcrLine, OcrResult


def _result(*texts: str) -> OcrResult:
    box = [[0.0, 0.0], [10.0, 0.0], [10.0, 5.0], [0.0, 5.0]]
    return OcrResult(lines=[OcrLine(t, 0.9, box) for t in texts], timings_ms={"det": 1.0})


def _ep(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


class Boom:
    name = "boom"

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.partial = options.get("partial", False)

    def __call__(self, result: OcrResult) -> dict[str, Any]:
        raise RuntimeError("exploded")


class Wrong:
    name = "wrong"

    def __init__(self, options: Mapping[str, Any]) -> None: ...

    def __call__(self, result: OcrResult) -> Any:
        return ["not", "a", "mapping"]


def test_builtins_are_registered() -> None:
    names = default_registry().names()
    assert {"regex_fields", "merge_lines"} <= set(names)


def test_chain_runs_in_order_and_later_plugins_see_earlier_fields() -> None:
    reg = PluginRegistry({"upper_text": _upper_factory()})
    reg.register("count", lambda opts: _Count())
    chain = reg.build_chain(["upper_text", "count"], {"upper_text": {"sep": "|"}})
    result = chain.run(_result("lot a1", "exp b2"))
    assert result.fields == {"upper": "LOT A1|EXP B2", "count": 1}
    assert chain.names == ["upper_text", "count"] and len(chain) == 2
    assert "plugin.upper_text" in result.timings_ms and result.errors == []


class _Count:
    name = "count"

    def __call__(self, result: OcrResult) -> dict[str, Any]:
        return {"count": len(result.fields)}


def _upper_factory() -> Any:
    from tests.postproc.fake_plugins import UpperText

    return UpperText


def test_unknown_plugin_fails_at_configuration() -> None:
    with pytest.raises(UnknownPluginError, match="'nope'.*merge_lines") as info:
        build_chain(["regex_fields", "nope"], {"regex_fields": {"lot": "LOT (\\w+)"}})
    assert info.value.name == "nope"


def test_bad_options_fail_at_configuration() -> None:
    with pytest.raises(PluginConfigError, match="bad pattern"):
        build_chain(["regex_fields"], {"regex_fields": {"lot": "LOT ("}})
    with pytest.raises(PluginConfigError, match="must be a mapping"):
        build_chain(["merge_lines"], {"merge_lines": ["max_gap", 1]})  # a list, not a mapping
    reg = PluginRegistry({"picky": lambda opts: int(opts["n"])})  # builds an int, not a plugin
    with pytest.raises(PluginConfigError, match="rejected its options"):
        reg.build_chain(["picky"], {"picky": {}})
    with pytest.raises(PluginLoadError, match="not a plugin"):
        reg.build_chain(["picky"], {"picky": {"n": 3}})
    reg.register("broken", _broken_factory)
    with pytest.raises(PluginLoadError, match="failed to start: OSError: no licence file"):
        reg.build_chain(["broken"])


def _broken_factory(options: Mapping[str, Any]) -> Any:
    raise OSError("no licence file")


def test_raising_plugin_keeps_the_result_and_records_the_error() -> None:
    reg = PluginRegistry({"boom": Boom, "wrong": Wrong, "upper_text": _upper_factory()})
    chain = reg.build_chain(["upper_text", "boom", "wrong"])
    before = _result("keep me")
    lines = list(before.lines)
    with capture_logs() as logs:
        result = chain.run(before)
    assert result.lines == lines and result.fields == {"upper": "KEEP ME"}
    assert result.errors == [
        {"plugin": "boom", "error": "RuntimeError: exploded"},
        {"plugin": "wrong", "error": "TypeError: plugin returned list, expected a mapping of field names"},
    ]
    failed = [e for e in logs if e["event"] == "postproc_plugin_failed"]
    assert [e["plugin"] for e in failed] == ["boom", "wrong"] and failed[0]["log_level"] == "warning"
    assert result.to_dict()["errors"] == result.errors


def test_entry_point_loading_with_stdlib_entry_points() -> None:
    reg = PluginRegistry({}, [_ep("upper_text", "tests.postproc.fake_plugins:UpperText")])
    assert reg.names() == ["upper_text"]
    assert reg.build_chain(["upper_text"]).run(_result("x")).fields == {"upper": "X"}
    with pytest.raises(PluginLoadError, match="cannot load"):
        PluginRegistry({}, [_ep("gone", "tests.postproc.no_such_module:X")]).factory("gone")
    with pytest.raises(PluginLoadError, match="not callable"):
        PluginRegistry({}, [_ep("num", "tests.postproc.fake_plugins:NOT_CALLABLE")]).factory("num")


def test_builtins_win_over_entry_points_of_the_same_name(monkeypatch: pytest.MonkeyPatch) -> None:
    shadow = _ep("merge_lines", "tests.postproc.fake_plugins:UpperText")
    monkeypatch.setattr(registry, "installed_entry_points", lambda: [shadow])
    chain = default_registry().build_chain(["merge_lines"])
    assert "paragraphs" in chain.run(_result("a")).fields


def test_installed_distribution_is_discovered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real (temporary) installed distribution declaring a vkocr.postproc entry point."""
    dist = tmp_path / "vkocr_fake_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vkocr-fake-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nshout = tests.postproc.fake_plugins:UpperText\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert str(tmp_path) in sys.path
    assert "shout" in default_registry().names()
    result = build_chain(["shout"], {"shout": {"sep": "/"}}).run(_result("a", "b"))
    assert result.fields == {"upper": "A/B"}
