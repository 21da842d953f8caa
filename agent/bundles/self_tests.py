"""A bundle's self-tests: every image it carries is read by the version's new pipeline, and its expected text must
appear among the lines (the activation's self_tests step, agent/bundles/activation.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from vkocr.agent.bundles.stored import InstalledVersion
from vkocr.agent.ocr.pipeline import OcrPipeline
from vkocr.log import get_logger

log = get_logger(__name__)


@dataclass(frozen=True)
class SelfTestOutcome:
    image: str  # the path inside the bundle, e.g. selftest/label.png
    expected: str
    got: str  # the recognised lines, one per line of text
    passed: bool
    error: str = ""  # why the image could not be read at all

    def describe(self) -> str:
        if self.error:
            return f"{self.image}: {self.error}"
        return f"{self.image}: expected {self.expected!r}, read {self.got.replace(chr(10), ' | ')!r}"



def run_self_tests(pipeline: OcrPipeline, installed: InstalledVersion) -> tuple[SelfTestOutcome, ...]:
    """Read every self-test image of `installed` with `pipeline` (its options and plugin chain, as it will
    serve)."""
    outcomes = []
    root = installed.root
    for case in installed.self_tests:
        name = case.image.relative_to(root).as_posix() if case.image.is_relative_to(root) else case.image.name
        started = time.monotonic()
        try:
            result = pipeline(case.image)
        except Exception as exc:  # noqa: BLE001 - an image the new models cannot read fails its test
            outcome = SelfTestOutcome(name, case.expect, "", False, f"{type(exc).__name__}: {exc}")
        else:
            got = "\n".join(line.text for line in result.lines)
            outcome = SelfTestOutcome(name, case.expect, got, case.expect in got)
        log.info("activation_self_test", image=name, expected=case.expect, got=outcome.got,
                 passed=outcome.passed, error=outcome.error or None,
                 ms=round((time.monotonic() - started) * 1e3))
        outcomes.append(outcome)
    return tuple(outcomes)
