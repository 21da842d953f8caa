"""Which backend runs the OCR models, and why: a Vulkan GPU, or the CPU backend (onnxruntime) when none is
usable, or a backend named outright ("cpu", "numpy", or a Vulkan device by index, UUID or name part); and the
stages that backend opens (`open_stages`), for OcrPipeline.open."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vkocr.agent.ocr.fallback_notice import FALLBACK_NOTICE
from vkocr.agent.ocr.lanes import LaneResources
from vkocr.agent.ocr.precision import PrecisionChoice, for_device, off_the_gpu
from vkocr.agent.ocr.stages import StageSet
from vkocr.engine.devices import Choice, DeviceInfo, cpu_implementation, survey
from vkocr.log import get_logger

log = get_logger(__name__)

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


def say_fallback(backend: str, choice: BackendChoice) -> None:
    """`cpu_backend_chosen`, at the level FALLBACK_NOTICE gives (a warning once for the agent, …)."""
    has_gpu = any(not cpu_implementation(device) for device in choice.devices)
    level = FALLBACK_NOTICE.level(has_gpu=has_gpu)
    getattr(log, level)("cpu_backend_chosen", backend=backend, reason=choice.reason)


@dataclass(frozen=True)
class OpenedStages:
    """The stages a backend opened, the Vulkan device they run on (None off the GPU: closed with the stages'
    pipeline), and why that backend."""

    stages: StageSet
    device: Any
    reason: str
    precision: PrecisionChoice


def open_stages(device: str | None, paths: Mapping[str, Path], *, cpu_threads: int = 0,
                lanes: LaneResources | None = None, precision: str = "fp32",
                model_set: str | None = None) -> OpenedStages:
    """The models of `paths` on the backend `device` names (choose_backend): the GPU stages with the streams and
    image slots of `lanes`, onnxruntime's with `cpu_threads` intra-op threads (0: every core), or the NumPy
    reference's. A CPU backend chosen because no GPU is usable says so (FallbackNotice). `precision`: auto, fp32
    or fp16 storage on the GPU (agent/ocr/precision.py, with `model_set`'s calibrated plans)."""
    choice = choose_backend(device)
    if choice.kind == "vulkan":
        from vkocr.agent.ocr.gpu_stages import GpuStages
        from vkocr.engine.device import Device

        lanes = lanes or LaneResources()
        dev = Device(choice.selector, queues=lanes.queues)
        try:
            chosen = for_device(precision, dev, model_set)
            log.info("precision_chosen", precision=chosen.precision, reason=chosen.reason)
            return OpenedStages(GpuStages(dev, paths, image_slots=lanes.image_slots, precision=chosen.plans), dev,
                                choice.reason, chosen)
        except BaseException:
            dev.close()
            raise
    stages: StageSet
    if choice.kind == NUMPY:
        from vkocr.agent.ocr.numpy_stages import NumpyStages

        stages = NumpyStages(paths)
    else:
        from vkocr.agent.ocr.ort_stages import OrtStages

        stages = OrtStages(paths, cpu_threads)
    if choice.fallback:
        say_fallback(stages.backend, choice)
    else:
        log.info("backend_chosen", backend=stages.backend, reason=choice.reason)
    return OpenedStages(stages, None, choice.reason, off_the_gpu(precision, "the CPU backend"))
