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
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vkocr.postproc.errors import PluginConfigError
from vkocr.postproc.result import OcrResult

_SPEC_KEYS = {"pattern", "type", "all", "ignore_case", "group", "format"}


def _to_float(text: str) -> float:
    return float(text.replace(",", ".") if text.count(",") == 1 and "." not in text else text)


def _converter(kind: str, fmt: str | None) -> Callable[[str], Any]:
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
    raise PluginConfigError(f"unknown field type {kind!r}; use str, int, float or date")


@dataclass(frozen=True)
class FieldRule:
    name: str
    regex: re.Pattern[str]
    convert: Callable[[str], Any]
    all: bool
    group: int | str

    @classmethod
    def parse(cls, name: str, spec: Any) -> FieldRule:
        if isinstance(spec, str):
            spec = {"pattern": spec}
        if not isinstance(spec, Mapping):
            raise PluginConfigError(f"field {name!r}: expected a pattern or a mapping, got {spec!r}")
        unknown = set(spec) - _SPEC_KEYS
        if unknown:
            raise PluginConfigError(f"field {name!r}: unknown keys {sorted(unknown)}")
        if not isinstance(spec.get("pattern"), str):
            raise PluginConfigError(f"field {name!r}: 'pattern' must be a string")
        try:
            regex = re.compile(spec["pattern"], re.IGNORECASE if spec.get("ignore_case") else 0)
        except re.error as exc:
            raise PluginConfigError(f"field {name!r}: bad pattern: {exc}") from exc
        group = spec.get("group", "value" if "value" in regex.groupindex else (1 if regex.groups else 0))
        if isinstance(group, bool) or not isinstance(group, (int, str)):
            raise PluginConfigError(f"field {name!r}: 'group' must be a group number or name")
        if (isinstance(group, int) and not 0 <= group <= regex.groups) or (
            isinstance(group, str) and group not in regex.groupindex
        ):
            raise PluginConfigError(f"field {name!r}: the pattern has no group {group!r}")
        fmt = spec.get("format")
        if fmt is not None and not isinstance(fmt, str):
            raise PluginConfigError(f"field {name!r}: 'format' must be a string")
        convert = _converter(str(spec.get("type", "str")), fmt)
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
