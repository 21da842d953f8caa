"""Which backend runs the OCR models, and why: a Vulkan GPU, or the CPU backend (onnxruntime) when none is
usable, or a backend named outright ("cpu", "numpy", or a Vulkan device by index, UUID or name part)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from vkocr.engine.devices import Choice, DeviceInfo, survey

CPU = "cpu"  # onnxruntime's CPU execution provider
NUMPY = "numpy"  # the NumPy reference executor: tests and `debug compare`
BACKEND_NAMES = (CPU, NUMPY)


@dataclass(frozen=True)
class BackendChoice:
    """`kind`: "vulkan", "cpu" or "numpy"; `selector`: what to pass to Device for Vulkan; `fallback`: the CPU
    was chosen because no usable GPU exists (a warning, said once by whoever opens it)."""

    kind: str
    reason: str
    selector: str | None = None
    devices: tuple[DeviceInfo, ...] = ()
    vulkan: Choice | None = None  # the engine's choice among the Vulkan devices, when it was asked
    fallback: bool = False


def choose_backend(device: str | None = None) -> BackendChoice:
    """`device`: None for VKOCR_DEVICE, else the automatic choice; "cpu", "numpy", or a Vulkan device."""
    named, source = device, "device"
    if named is None and os.environ.get("VKOCR_DEVICE"):
        named, source = os.environ["VKOCR_DEVICE"], "VKOCR_DEVICE"
    wanted = (named or "").strip().lower()
    if wanted in BACKEND_NAMES:
        return BackendChoice(wanted, f"{source}={named!r} names the {wanted} backend")
    devices, choice = survey(device)  # None: the engine reads VKOCR_DEVICE itself, and says so in its reason
    if choice.device is None:
        return BackendChoice(CPU, f"no usable GPU: {choice.reason}", None, tuple(devices), choice, fallback=True)
    return BackendChoice("vulkan", choice.reason, device, tuple(devices), choice)
