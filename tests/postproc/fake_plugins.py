"""Plugins that the registry tests load through entry points."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vkocr.postproc.result import OcrResult


class UpperText:
    """Adds ``upper``: all line texts, upper-cased, joined by ``sep``."""

    name = "upper_text"

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.sep = str(options.get("sep", " "))

    def __call__(self, result: OcrResult) -> dict[str, Any]:
        return {"upper": self.sep.join(line.text.upper() for line in result.lines)}


NOT_CALLABLE = 42
