"""Postprocessing plugins: the protocol, the registry (built-ins plus installed entry points), and the
ordered chain that runs them with failure isolation and a time budget.

A plugin is built once per configuration from its options (so bad options fail at configuration time) and
then called with each ``OcrResult``; it reads the result and returns the fields it adds. It never mutates the
result itself: the chain merges the returned fields, so a plugin that raises leaves the result exactly as it
was, and the chain records ``{"plugin": name, "error": ...}`` in ``result.errors`` and logs
``postproc_plugin_failed``. A plugin that overruns its budget (``budget_s``) is stopped (postproc/plugin_budget.py)
and recorded the same way.

Third-party plugins register a factory (usually the plugin class) under the ``vkocr.postproc`` entry-point
group; the entry point's name is the plugin's name::

    [project.entry-points."vkocr.postproc"]
    stamp = "mypkg.stamp:StampPlugin"
"""

from __future__ import annotations

import importlib.metadata
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol, runtime_checkable

from vkocr.log import get_logger
from vkocr.postproc.errors import PluginConfigError, PluginError, PluginLoadError, UnknownPluginError
from vkocr.postproc.plugin_budget import call_within
from vkocr.postproc.result import OcrResult

ENTRY_POINT_GROUP = "vkocr.postproc"
DEFAULT_BUDGET_S = 0.5  # a plugin's time per result (OcrOptions.plugin_budget_ms sets the agent's)

log = get_logger(__name__)


@runtime_checkable
class PostprocPlugin(Protocol):
    """A configured plugin: ``name`` and a call that returns the fields it adds to the result."""

    name: str

    def __call__(self, result: OcrResult) -> Mapping[str, Any]: ...


PluginFactory = Callable[[Mapping[str, Any]], PostprocPlugin]
"""Builds a plugin from its options; raises ``PluginConfigError`` (or ``ValueError``/``TypeError``) on bad ones."""


def _builtins() -> dict[str, PluginFactory]:
    from vkocr.postproc.plugins.merge_lines import MergeLines
    from vkocr.postproc.plugins.regex_fields import RegexFields

    return {RegexFields.name: RegexFields, MergeLines.name: MergeLines}


class PluginRegistry:
    """Plugin factories by name: built-ins, installed entry points (loaded on first use), and any registered
    by hand. A name registered later replaces an earlier one. Entry points are read when the registry is made,
    and each is imported once, on first use (threads may share a registry)."""

    def __init__(
        self,
        factories: Mapping[str, PluginFactory] | None = None,
        entry_points: Iterable[importlib.metadata.EntryPoint] = (),
    ) -> None:
        self._factories: dict[str, PluginFactory] = dict(factories or {})
        self._entry_points = {ep.name: ep for ep in entry_points if ep.name not in self._factories}
        self._lock = threading.Lock()

    def register(self, name: str, factory: PluginFactory) -> None:
        self._factories[name] = factory
        self._entry_points.pop(name, None)

    def names(self) -> list[str]:
        return sorted({*self._factories, *self._entry_points})

    def factory(self, name: str) -> PluginFactory:
        """The factory registered under ``name``; UnknownPluginError or PluginLoadError otherwise."""
        with self._lock:
            if name in self._factories:
                return self._factories[name]
            ep = self._entry_points.get(name)
            if ep is None:
                raise UnknownPluginError(name, self.names())
            self._factories[name] = load_entry_point(ep)
            del self._entry_points[name]
            return self._factories[name]

    def build_chain(
        self, names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None,
        budget_s: float | None = DEFAULT_BUDGET_S,
    ) -> PluginChain:
        """An ordered chain of the named plugins, each built from ``options[name]`` (empty when absent; options
        of plugins not in ``names`` are ignored), each call given ``budget_s`` (None: no budget, no thread).
        Raises UnknownPluginError, PluginLoadError or PluginConfigError (naming the plugin), so a bad
        configuration fails here and never while serving."""
        options = options or {}
        plugins = []
        for name in names:
            plugin_options = options.get(name) or {}
            if not isinstance(plugin_options, Mapping):
                raise PluginConfigError(f"options of plugin {name!r} must be a mapping, got {plugin_options!r}")
            factory = self.factory(name)
            try:
                plugin = factory(plugin_options)
            except PluginConfigError as exc:
                exc.plugin = exc.plugin or name
                raise
            except PluginError:
                raise
            except (ValueError, TypeError, KeyError) as exc:
                raise PluginConfigError(f"plugin {name!r} rejected its options: {exc}", plugin=name) from exc
            except Exception as exc:  # third-party construction code: any failure is a configuration error
                raise PluginLoadError(f"plugin {name!r} failed to start: {type(exc).__name__}: {exc}") from exc
            if not isinstance(plugin, PostprocPlugin):
                raise PluginLoadError(f"factory of plugin {name!r} returned {type(plugin).__name__}, not a plugin")
            plugins.append((name, plugin))
        return PluginChain(plugins, budget_s)


def load_entry_point(ep: importlib.metadata.EntryPoint) -> PluginFactory:
    """Import an entry point's object; it must be callable (a plugin class or a factory function)."""
    try:
        obj = ep.load()
    except Exception as exc:  # any import-time failure of third-party code is a load error
        raise PluginLoadError(f"cannot load plugin {ep.name!r} from {ep.value!r}: {exc}") from exc
    if not callable(obj):
        raise PluginLoadError(f"plugin entry point {ep.name!r} ({ep.value!r}) is not callable")
    factory: PluginFactory = obj
    return factory


def installed_entry_points() -> list[importlib.metadata.EntryPoint]:
    """Entry points of installed distributions in the ``vkocr.postproc`` group."""
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def default_registry() -> PluginRegistry:
    """Built-in plugins plus every installed ``vkocr.postproc`` entry point (built-ins win on a clash)."""
    return PluginRegistry(_builtins(), installed_entry_points())


def build_chain(names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None) -> PluginChain:
    """``default_registry().build_chain(names, options)``."""
    return default_registry().build_chain(names, options)


class PluginChain:
    """Configured plugins in order. Running it merges each plugin's fields into the result in turn (later
    plugins see earlier fields) and records each plugin's time as ``timings_ms["plugin.<name>"]``; a plugin
    that raises, overruns ``budget_s`` (then it is stopped), or returns something other than a mapping with
    string keys, leaves the result untouched and is recorded in ``result.errors``."""

    def __init__(self, plugins: Sequence[tuple[str, PostprocPlugin]] = (),
                 budget_s: float | None = DEFAULT_BUDGET_S) -> None:
        self.plugins = list(plugins)
        self.budget_s = budget_s

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.plugins]

    def __len__(self) -> int:
        return len(self.plugins)

    def run(self, result: OcrResult) -> OcrResult:
        for name, plugin in self.plugins:
            start = time.perf_counter()
            try:
                if self.budget_s is None:
                    added = plugin(result)
                else:
                    added = call_within(partial(plugin, result), self.budget_s, f"plugin {name!r}")
                if not isinstance(added, Mapping) or not all(isinstance(k, str) for k in added):
                    raise TypeError(f"plugin returned {type(added).__name__}, expected a mapping of field names")
                added = dict(added)
            except Exception as exc:  # noqa: BLE001 - isolation: no plugin may take the OCR result down
                message = f"{type(exc).__name__}: {exc}"
                result.errors.append({"plugin": name, "error": message})
                log.warning("postproc_plugin_failed", plugin=name, error=message)
                continue
            result.fields.update(added)
            result.timings_ms[f"plugin.{name}"] = (time.perf_counter() - start) * 1e3
        return result
