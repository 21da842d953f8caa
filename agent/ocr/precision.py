"""Which storage precision serves, and why: `precision = "auto" | "fp32" | "fp16"` ([ocr] in config,
`--precision` on the CLI, `vkocr.OCR(precision=…)`), the device's features, the quirks table, and the model
set's calibrated precision plans (agent/ocr/precision_plans/<set>.json, made by `vkocr calibrate`).

- `fp32`: every node stores fp32 (the answers of every earlier release, bit for bit).
- `fp16`: the set's calibrated plans (nodes out of fp16's range, or that change answers, stay fp32); a set
  without one stores fp16 everywhere but the outputs' producers. Refused on a device without 16-bit storage.
- `auto`: fp16 where the device has 16-bit storage, no quirk turns it off and the set's plans passed their
  sameness gate (fp16's lines and boxes equal fp32's on the parity and stream sets); fp32 otherwise, and on CPU
  implementations of Vulkan. Discrete GPUs take it too since the fp16 kernels caught up: on an H100
  (BENCHMARKS.md, 2026-12-07, session 44) ppocrv6-small's plan (det fp32, cls and rec fp16) ran rec 16×48×320
  1.43× faster than fp32, cls as fast and the stream at 10.7 ms against 10.9, its answers fp32's on 770 of 770
  lines and boxes; the agent at 16 clients, bound by its host, served as many images either way. (Until then
  auto kept fp32 on discrete GPUs, after fp16 storage ran 6-15 % slower on the H200 on 2026-12-05.) Integrated
  and embedded GPUs have far less bandwidth per FLOP, which fp16 storage halves (not yet measured on one).

The CPU backends (onnxruntime, NumPy) compute in fp32 whatever is asked; the choice says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

from vkocr.agent.errors import OptionsError
from vkocr.agent.ocr.options import PRECISIONS
from vkocr.engine.devices import cpu_implementation
from vkocr.engine.graph.precision import PrecisionPlan

ROLES = ("det", "cls", "rec")
FP16_QUIRK = "fp16_storage_broken"  # a quirks-table workaround flag (vk/quirks.py): the driver's fp16 loads are wrong
PLANS = files("vkocr.agent.ocr") / "precision_plans"


@dataclass(frozen=True)
class ShippedPlans:
    """A model set's calibrated precision plans, one per model, and what their sameness gate measured."""

    plans: dict[str, PrecisionPlan]
    gate_passed: bool
    gate: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision that serves (`fp32` or `fp16`), each model's plan, and why."""

    precision: str
    plans: dict[str, PrecisionPlan]
    reason: str


def shipped_plans(model_set: str) -> ShippedPlans | None:
    """The plans `vkocr calibrate` wrote for this set, or None when it has none."""
    path = PLANS / f"{model_set}.json"
    if not path.is_file():
        return None
    return parse_plans(path.read_text())


def parse_plans(text: str) -> ShippedPlans:
    """A set's plans file: {"models": {role: plan}, "gate": {"passed": bool, ...}, "calibration": {...}}."""
    data = json.loads(text)
    plans = {role: PrecisionPlan.from_json(json.dumps(plan)) for role, plan in data["models"].items()}
    gate = dict(data.get("gate", {}))
    return ShippedPlans(plans, bool(gate.get("passed", False)), gate)


def uniform(precision: str) -> dict[str, PrecisionPlan]:
    return {role: PrecisionPlan(precision) for role in ROLES}


def check_setting(setting: str) -> None:
    if setting not in PRECISIONS:
        raise OptionsError(f"precision {setting!r}: expected one of {', '.join(PRECISIONS)}")


def choose_precision(setting: str, *, fp16_storage: bool, workarounds: frozenset[str] | set[str],
                     model_set: str | None, device_name: str, cpu_driver: bool = False) -> PrecisionChoice:
    """The precision for a Vulkan device with these features; OptionsError for fp16 where it cannot run.
    `cpu_driver`: a CPU implementation of Vulkan (lavapipe), where fp16 storage saves no bandwidth and costs
    conversions, so auto keeps fp32 (and the tests' answers stay the reference's)."""
    check_setting(setting)
    if setting == "fp32":
        return PrecisionChoice("fp32", uniform("fp32"), "fp32 asked for")
    shipped = shipped_plans(model_set) if model_set else None
    unusable = (f"{device_name} has no 16-bit storage (storageBuffer16BitAccess)" if not fp16_storage else
                f"the quirks table turns fp16 storage off on {device_name}" if FP16_QUIRK in workarounds else None)
    if setting == "fp16":
        if unusable:
            raise OptionsError(f"precision fp16: {unusable}; use fp32 or auto")
        if shipped is None:
            return PrecisionChoice("fp16", uniform("fp16"), f"fp16 asked for; model set {model_set or '(folder)'} "
                                   "has no calibrated plan: every node stores fp16 but the outputs' producers")
        return PrecisionChoice("fp16", shipped.plans, f"fp16 asked for: {model_set}'s calibrated plan")
    if unusable:
        return PrecisionChoice("fp32", uniform("fp32"), f"auto: fp32, since {unusable}")
    if cpu_driver:
        return PrecisionChoice("fp32", uniform("fp32"), f"auto: fp32 on {device_name}, a CPU implementation of "
                               "Vulkan (fp16 storage saves no bandwidth there)")
    if shipped is None:
        return PrecisionChoice("fp32", uniform("fp32"),
                               f"auto: fp32, since model set {model_set or '(folder)'} has no calibrated fp16 plan")
    if not shipped.gate_passed:
        return PrecisionChoice("fp32", uniform("fp32"), f"auto: fp32, since {model_set}'s fp16 plan did not pass "
                               "its sameness gate")
    return PrecisionChoice("fp16", shipped.plans, f"auto: fp16 storage on {device_name} ({model_set}'s calibrated "
                           "plan passed its sameness gate)")


FP32_CHOICE = PrecisionChoice("fp32", uniform("fp32"), "fp32: the stages were given, not opened by precision")


def for_device(setting: str, device: Any, model_set: str | None) -> PrecisionChoice:
    """choose_precision for an open engine Device."""
    return choose_precision(setting, fp16_storage=device.info.fp16_storage, workarounds=device.workarounds,
                            model_set=model_set, device_name=device.info.name,
                            cpu_driver=cpu_implementation(device.info))


def off_the_gpu(setting: str, backend: str) -> PrecisionChoice:
    """The CPU backends compute in fp32 whatever is asked (an unknown setting is still refused)."""
    check_setting(setting)
    return PrecisionChoice("fp32", uniform("fp32"), f"{backend} computes in fp32")
