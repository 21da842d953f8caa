"""OcrResult's JSON is DESIGN.md's contract."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vkocr.postproc.plugins.merge_lines import Paragraph
from vkocr.postproc.result import CharBox, OcrLine, OcrResult


def test_json_contract() -> None:
    box = np.array([[1, 2], [30, 2], [30, 12], [1, 12]], dtype=np.float32).tolist()
    result = OcrResult(lines=[OcrLine("正品促销", np.float32(0.98).item(), box, 180)], timings_ms={"det": 2.5})
    obj = json.loads(result.to_json(image="a.jpg", device="NVIDIA H200"))
    assert obj == {
        "image": "a.jpg",
        "device": "NVIDIA H200",
        "lines": [{"text": "正品促销", "score": pytest.approx(0.98), "box": box, "angle": 180}],
        "timings_ms": {"det": 2.5},
    }
    assert "\n" not in result.to_json() and "正品促销" in result.to_json()  # one line, UTF-8 text


def test_fields_errors_and_chars_serialise() -> None:
    quad = [[0.0, 0.0], [4.0, 0.0], [4.0, 4.0], [0.0, 4.0]]
    line = OcrLine("ab", 0.5, quad, chars=(CharBox("a", quad, 0.4), CharBox("b", quad, 0.6)))
    result = OcrResult(lines=[line], fields={"p": [Paragraph("ab", quad, (0,))], "n": np.int64(3)},
                       errors=[{"plugin": "x", "error": "E"}])
    obj = json.loads(result.to_json())
    assert obj["fields"] == {"p": [{"text": "ab", "box": quad, "lines": [0]}], "n": 3}
    assert obj["errors"] == [{"plugin": "x", "error": "E"}]
    assert obj["lines"][0]["chars"][1] == {"text": "b", "box": quad, "score": 0.6}
    with pytest.raises(ValueError, match="overwrite"):
        result.to_json(lines=[])
