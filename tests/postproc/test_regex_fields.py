"""regex_fields: named patterns → typed fields."""

from __future__ import annotations

import datetime as dt

import pytest

from vkocr.postproc.errors import PluginConfigError
from vkocr.postproc.plugins.regex_fields import RegexFields
from vkocr.postproc.result import OcrLine, OcrResult

BOX = [[0.0, 0.0], [10.0, 0.0], [10.0, 5.0], [0.0, 5.0]]


def _result(*texts: str) -> OcrResult:
    return OcrResult(lines=[OcrLine(t, 0.9, BOX) for t in texts])


LABEL = _result("ACME Pharma", "LOT: A1234", "EXP 2027-03-31", "Net 12,5 kg  gross 13.75 kg", "QTY 0040", "LOT B999")


def test_typed_first_matches() -> None:
    plugin = RegexFields({
        "lot": r"LOT[:\s]*(\w+)",
        "expiry": {"pattern": r"EXP[:\s]*(\d{4}-\d{2}-\d{2})", "type": "date"},
        "qty": {"pattern": r"QTY\s*(\d+)", "type": "int"},
        "net": {"pattern": r"(\d+[.,]\d+)\s*kg", "type": "float"},
        "serial": r"S/N\s*(\w+)",
    })
    fields = plugin(LABEL)
    assert fields == {"lot": "A1234", "expiry": dt.date(2027, 3, 31), "qty": 40, "net": 12.5}
    assert type(fields["qty"]) is int and "serial" not in fields


def test_all_matches_groups_case_and_formats() -> None:
    plugin = RegexFields({
        "lots": {"pattern": r"lot[:\s]*(?P<value>\w+)", "all": True, "ignore_case": True},
        "weights": {"pattern": r"(\d+[.,]\d+)\s*(kg)", "type": "float", "all": True, "group": 1},
        "unit": {"pattern": r"(\d+[.,]\d+)\s*(kg)", "group": 2},
        "made": {"pattern": r"made (\S+)", "type": "date", "format": "%d.%m.%Y"},
        "none": {"pattern": r"ZZZ(\d)", "all": True},
    })
    fields = plugin(_result(*[line.text for line in LABEL.lines], "made 05.01.2026"))
    assert fields["lots"] == ["A1234", "B999"]
    assert fields["weights"] == [12.5, 13.75] and fields["unit"] == "kg"
    assert fields["made"] == dt.date(2026, 1, 5) and fields["none"] == []


def test_unconvertible_matches_are_skipped() -> None:
    plugin = RegexFields({"n": {"pattern": r"N=(\S+)", "type": "int"}, "d": {"pattern": r"D=(\S+)", "type": "date"}})
    assert plugin(_result("N=x1 N=7", "D=2026-13-01", "D=2026-02-03")) == {"n": 7, "d": dt.date(2026, 2, 3)}
    assert plugin(_result("N=abc")) == {}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "at least one"),
        ({"x": "("}, "bad pattern"),
        ({"x": {"pattern": "a", "type": "bool"}}, "unknown field type"),
        ({"x": {"pattern": "a", "colour": 1}}, "unknown keys"),
        ({"x": {"type": "int"}}, "'pattern' must be"),
        ({"x": {"pattern": "(a)", "group": 3}}, "no group"),
        ({"x": 5}, "expected a pattern"),
    ],
)
def test_bad_options(options: dict, message: str) -> None:
    with pytest.raises(PluginConfigError, match=message):
        RegexFields(options)


def test_dates_serialise_in_the_result_json() -> None:
    result = _result("EXP 2027-03-31")
    result.fields.update(RegexFields({"expiry": {"pattern": r"EXP (\S+)", "type": "date"}})(result))
    assert '"fields": {"expiry": "2027-03-31"}' in result.to_json()


# --- hostile patterns: RE2, size limits, fields named in errors --------------------------------------------------


def test_a_catastrophic_backtracking_pattern_runs_in_linear_time() -> None:
    # Python's re tries 2^n paths here (n = 5,000: never ends); RE2 matches in time linear in the line
    plugin = RegexFields({"bang": r"^(.|.)*!$", "lot": r"LOT[:\s]*(\w+)"})
    assert plugin(_result("LOT: A1234 " + "x" * 5000)) == {"lot": "A1234"}
    assert plugin(_result("y" * 5000 + "!")) == {"bang": "y"}


@pytest.mark.parametrize(
    ("options", "message", "field"),
    [
        ({"lot": "A" * 1001}, "1,001 characters, at most 1,000", "lot.pattern"),
        ({f"f{i}": "A" for i in range(33)}, "at most 32 fields", ""),
        ({"n" * 65: "A"}, "1 to 64 characters", "n" * 64 + "…"),
        ({"lot": r"(a)\1"}, "bad pattern", "lot.pattern"),  # a backreference: RE2 has none
        ({"lot": r"(?=a)"}, "bad pattern", "lot.pattern"),  # nor lookaround
        ({"lot": "(a{1000}){1000}"}, "bad pattern", "lot.pattern"),
        ({"lot": {"pattern": "(a)", "group": 3}}, "no group", "lot.group"),
        ({"lot": {"pattern": "a", "type": "bool"}}, "unknown field type", "lot.type"),
    ],
)
def test_over_limit_and_unsupported_patterns_name_their_field(options: dict, message: str, field: str) -> None:
    with pytest.raises(PluginConfigError, match=message) as caught:
        RegexFields(options)
    assert caught.value.field == field
    assert len(str(caught.value)) < 300  # the refusal never echoes the whole option


def test_unicode_letters_need_unicode_classes() -> None:
    plugin = RegexFields({"ascii": r"LOT (\w+)", "any": r"LOT (\p{L}+)"})
    assert plugin(_result("LOT 批号")) == {"any": "批号"}
