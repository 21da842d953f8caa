"""Errors raised by ``postproc``. Every one derives from ``PostprocError``, a ``vkocr.errors.VkocrError``
(postprocessing imports neither the engine nor the agent, only the root)."""

from __future__ import annotations

from vkocr.errors import VkocrError


class PostprocError(VkocrError):
    """Base class of every error ``postproc`` raises on purpose; raised only as one of its subclasses."""


class CharsetError(PostprocError):
    """Raised when the recogniser's dictionary cannot be built from the model metadata or a keys file, when a
    keys file's dictionary does not fit the model's output width, or when the model's output uses a class the
    dictionary does not have."""


class PluginError(PostprocError):
    """Base class of plugin configuration errors, raised only as one of its subclasses (while building a
    chain, never while running one)."""


class UnknownPluginError(PluginError):
    """Raised at configuration time when a chain names a plugin that is neither built in nor installed under
    the ``vkocr.postproc`` entry-point group."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown postprocessing plugin {name!r}; known: {', '.join(known) or 'none'}")


class PluginLoadError(PluginError):
    """Raised at configuration time when an installed plugin's entry point cannot be imported or does not
    give a plugin factory."""


class PluginConfigError(PluginError):
    """Raised at configuration time when a plugin rejects its options (unknown key, bad pattern, wrong type,
    a pattern or a number of fields over its limit).

    ``field`` is the path of the refused option inside the plugin's options (``lot.pattern``) when the plugin
    names one; ``plugin`` is the plugin's name (the chain fills it in), so that a request's error can name
    ``options.plugins.options.regex_fields.lot.pattern``.
    """

    def __init__(self, message: str, *, field: str = "", plugin: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.plugin = plugin


class PluginTimeout(PostprocError):
    """Raised by ``plugin_budget.call_within`` when a plugin overran its time budget (the plugin is then
    stopped); the chain records it in the result's errors, and the lines and other plugins' fields stay."""
