"""merge_lines: lines → paragraphs on synthetic layouts."""

from __future__ import annotations

import numpy as np
import pytest

from vkocr.postproc.errors import PluginConfigError
from vkocr.postproc.plugins.merge_lines import MergeLines, Paragraph, join_texts
from vkocr.postproc.result import OcrLine, OcrResult


def _line(text: str, x0: float, y0: float, x1: float, y1: float) -> OcrLine:
    return OcrLine(text, 0.9, [[x0, y0], [x1, y0], [x1, y1], [x0, y1]])


def _paragraphs(lines: list[OcrLine], **options: object) -> list[Paragraph]:
    return MergeLines(options)(OcrResult(lines=lines))["paragraphs"]


def test_two_columns_and_a_heading() -> None:
    lines = [
        _line("Report", 10, 0, 200, 40),  # heading: twice the body height
        _line("left one", 10, 50, 190, 70),
        _line("right one", 260, 50, 450, 70),
        _line("left two", 10, 74, 180, 94),
        _line("right two", 260, 75, 440, 95),
        _line("left three", 10, 98, 120, 118),
        _line("footer", 10, 300, 150, 320),  # far below
    ]
    order = np.random.default_rng(0).permutation(len(lines))  # input order must not matter
    paras = _paragraphs([lines[i] for i in order])
    assert [p.text for p in paras] == ["Report", "left one left two left three", "right one right two", "footer"]
    left = paras[1]
    assert left.box == [[10.0, 50.0], [190.0, 50.0], [190.0, 118.0], [10.0, 118.0]]
    assert [[lines[i] for i in order][k].text for k in left.lines] == ["left one", "left two", "left three"]


def test_cjk_joins_without_spaces_and_custom_separator() -> None:
    lines = [_line("取决于所使用的", 0, 0, 300, 30), _line("执行提供者", 0, 34, 200, 64), _line("CUDA", 0, 68, 80, 98)]
    assert [p.text for p in _paragraphs(lines)] == ["取决于所使用的执行提供者CUDA"]
    assert [p.text for p in _paragraphs(lines, separator="\n")] == ["取决于所使用的\n执行提供者\nCUDA"]
    assert join_texts(["hello", "world", "你好", "x"]) == "hello world你好x"


def test_thresholds_split_paragraphs() -> None:
    lines = [_line("a", 0, 0, 100, 20), _line("b", 0, 45, 100, 65), _line("c", 150, 70, 250, 90)]
    assert [p.text for p in _paragraphs(lines)] == ["a", "b", "c"]  # gap 25 > 1.0·20; c does not overlap b
    assert [p.text for p in _paragraphs(lines, max_gap=1.5)] == ["a b", "c"]
    assert [p.text for p in _paragraphs(lines, max_gap=1.5, min_overlap=0.0)] == ["a b", "c"]
    assert _paragraphs([]) == []


def test_field_name_and_bad_options() -> None:
    result = OcrResult(lines=[_line("x", 0, 0, 10, 10)])
    assert list(MergeLines({"field": "blocks"})(result)) == ["blocks"]
    for options, message in [({"gap": 1}, "unknown options"), ({"max_gap": -1}, "non-negative"),
                             ({"separator": 3}, "separator"), ({"field": ""}, "field")]:
        with pytest.raises(PluginConfigError, match=message):
            MergeLines(options)
