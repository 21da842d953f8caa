"""``regex_fields``: named regular expressions over the recognised lines → typed fields.

Options map a field name to a pattern, or to a spec::

    {"lot": r"LOT[:\\s]*(\\w+)",
     "expiry": {"pattern": r"EXP[:\\s]*(\\d{4}-\\d{2}-\\d{2})", "type": "date"},
     "weight": {"pattern": r"(\\d+[.,]\\d+)\\s*kg", "type": "float", "all": true}}

Spec keys: ``pattern`` (required), ``type`` (``str`` default, ``int``, ``float``, ``date``), ``all`` (every
match as a list instead of the first), ``ignore_case``, ``group`` (group number or name; default: the group
named ``value``, else group 1, else the whole match), ``format`` (``strptime`` format for dates; default ISO
``YYYY-MM-DD``). Lines are searched in result order, each on its own. A match whose text does not convert to
the type is skipped; a field without any converted match is left out (or is ``[]`` with ``all``).

Patterns come from requests, so they run on RE2 (``google-re2``), not on Python's ``re``: RE2 matches in time
linear in the text whatever the pattern (``^(.|.)*!$`` cannot backtrack for ever), bounds each compiled
pattern's memory, and refuses what it cannot do in linear time (backreferences, lookaround). Its syntax is
Python's otherwise, named groups ``(?P<name>…)`` included, except that ``\\w``, ``\\d`` and ``\\s`` match
ASCII only (``\\p{L}``, ``\\p{N}`` match every script's letters and digits). At most ``MAX_FIELDS``
fields, patterns of at most ``MAX_PATTERN_CHARS`` characters, field names of at most ``MAX_NAME_CHARS``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import re2

from vkocr.postproc.errors import PluginConfigError
from vkocr.postproc.result import OcrResult

_SPEC_KEYS = {"pattern", "type", "all", "ignore_case", "group", "format"}
MAX_FIELDS: Final = 32
MAX_PATTERN_CHARS: Final = 1000
MAX_NAME_CHARS: Final = 64
PATTERN_MEMORY_BYTES: Final = 1 << 20  # RE2's budget per compiled pattern (its default is 8 MiB)


def _to_float(text: str) -> float:
    return float(text.replace(",", ".") if text.count(",") == 1 and "." not in text else text)


def _converter(name: str, kind: str, fmt: str | None) -> Callable[[str], Any]:
    if kind == "str":
        return str
    if kind == "int":
        return int
    if kind == "float":
        return _to_float
    if kind == "date":
        if fmt is None:
            return dt.date.fromisoformat
        return lambda text: dt.datetime.strptime(text, fmt).date()
    raise PluginConfigError(f"unknown field type {_shown(kind)!r}; use str, int, float or date", field=f"{name}.type")


def _shown(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """`text`, cut to `limit` characters: error messages never echo a whole hostile option."""
    return text if len(text) <= limit else text[:limit] + "…"


def compile_pattern(name: str, pattern: str, ignore_case: bool) -> Any:
    """The pattern compiled by RE2; PluginConfigError naming ``<name>.pattern`` when it is too long or bad."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PluginConfigError(f"field {name!r}: the pattern has {len(pattern):,} characters, at most "
                                f"{MAX_PATTERN_CHARS:,}", field=f"{name}.pattern")
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the client's error, answered to it, not logged by RE2
    options.case_sensitive = not ignore_case
    options.max_mem = PATTERN_MEMORY_BYTES
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        said = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PluginConfigError(f"field {name!r}: bad pattern: {_shown(said, 200)}", field=f"{name}.pattern") \
            from None


@dataclass(frozen=True)
class FieldRule:
    name: str
    regex: Any  # an RE2 pattern (re2._Regexp, which the binding does not export for annotations)
    convert: Callable[[str], Any]
    all: bool
    group: int | str

    @classmethod
    def parse(cls, name: str, spec: Any) -> FieldRule:
        if not 1 <= len(name) <= MAX_NAME_CHARS:
            raise PluginConfigError(f"field name {_shown(name)!r} must be 1 to {MAX_NAME_CHARS} characters",
                                    field=_shown(name))
        if isinstance(spec, str):
            spec = {"pattern": spec}
        if not isinstance(spec, Mapping):
            raise PluginConfigError(f"field {name!r}: expected a pattern or a mapping, got {type(spec).__name__}",
                                    field=name)
        unknown = set(spec) - _SPEC_KEYS
        if unknown:
            raise PluginConfigError(f"field {name!r}: unknown keys {sorted(unknown)}", field=name)
        if not isinstance(spec.get("pattern"), str):
            raise PluginConfigError(f"field {name!r}: 'pattern' must be a string", field=f"{name}.pattern")
        regex = compile_pattern(name, spec["pattern"], bool(spec.get("ignore_case")))
        group = spec.get("group", "value" if "value" in regex.groupindex else (1 if regex.groups else 0))
        if isinstance(group, bool) or not isinstance(group, (int, str)):
            raise PluginConfigError(f"field {name!r}: 'group' must be a group number or name", field=f"{name}.group")
        if (isinstance(group, int) and not 0 <= group <= regex.groups) or (
            isinstance(group, str) and group not in regex.groupindex
        ):
            raise PluginConfigError(f"field {name!r}: the pattern has no group {_shown(str(group))!r}",
                                    field=f"{name}.group")
        fmt = spec.get("format")
        if fmt is not None and not isinstance(fmt, str):
            raise PluginConfigError(f"field {name!r}: 'format' must be a string", field=f"{name}.format")
        convert = _converter(name, str(spec.get("type", "str")), fmt)
        return cls(name, regex, convert, bool(spec.get("all", False)), group)

    def values(self, texts: list[str]) -> list[Any]:
        """Converted matches in line order; stops at the first one unless ``all``."""
        found = []
        for text in texts:
            for match in self.regex.finditer(text):
                raw = match.group(self.group)
                if raw is None:
                    continue
                try:
                    found.append(self.convert(raw.strip()))
                except ValueError:
                    continue
                if not self.all:
                    return found
        return found


class RegexFields:
    """Typed fields from named regular expressions; see the module docstring for the options."""

    name = "regex_fields"

    def __init__(self, options: Mapping[str, Any]) -> None:
        if not options:
            raise PluginConfigError("regex_fields needs at least one field pattern")
        if len(options) > MAX_FIELDS:
            raise PluginConfigError(f"regex_fields takes at most {MAX_FIELDS} fields, got {len(options)}")
        self.rules = [FieldRule.parse(str(name), spec) for name, spec in options.items()]

    def __call__(self, result: OcrResult) -> dict[str, Any]:
        texts = [line.text for line in result.lines]
        fields: dict[str, Any] = {}
        for rule in self.rules:
            values = rule.values(texts)
            if rule.all:
                fields[rule.name] = values
            elif values:
                fields[rule.name] = values[0]
        return fields
