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
