"""A third-party plugin as a careless vendor might write one, installed through a real entry point by the
hostile-request tests: it never returns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vkocr.postproc.result import OcrResult


class Spin:
    """Loops for ever, swallowing every Exception (as careless code does), counting its turns in ``turns``."""

    name = "spin"
    turns = 0

    def __init__(self, options: Mapping[str, Any]) -> None:
        pass

    def __call__(self, result: OcrResult) -> dict[str, Any]:
        while True:
            try:
                Spin.turns += 1
            except Exception:  # noqa: BLE001, S110 - the carelessness under test
                pass
