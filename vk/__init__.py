"""vkocr.engine: a small Vulkan inference engine — devices, tensors, kernels, recording, ONNX models, plans.

    from vkocr.engine import Device, Model

    with Device("llvmpipe") as device:
        model = Model.load("det.onnx", device)     # see vkocr.engine.graph.model for the full signature

Knows nothing about OCR. The facade's names are imported on first use (PEP 562): ``vkocr.engine.graph.opset``
imports ``vkocr.engine.ops`` while this package initialises, and light users (errors, logging) load no
Vulkan. The errors (vkocr.engine.errors) are imported at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vkocr.engine.errors import *  # noqa: F403  # the engine's error tree: light, imports nothing of the engine
from vkocr.engine.errors import __all__ as _errors
from vkocr.lazy import lazy_exports

if TYPE_CHECKING:
    from vkocr.engine.device import Device
    from vkocr.engine.devices import DeviceInfo
    from vkocr.engine.graph.model import Model
    from vkocr.engine.graph.plan import Plan
    from vkocr.engine.pipeline import KernelDef, Pipeline
    from vkocr.engine.recorder import Recorder
    from vkocr.engine.tensor import Tensor

# public name -> the module that defines it (the errors are imported above)
_EXPORTS: dict[str, str] = {
    "Device": "vkocr.engine.device",
    "DeviceInfo": "vkocr.engine.devices",
    "Tensor": "vkocr.engine.tensor",
    "Recorder": "vkocr.engine.recorder",
    "KernelDef": "vkocr.engine.pipeline",
    "Pipeline": "vkocr.engine.pipeline",
    "Model": "vkocr.engine.graph.model",
    "Plan": "vkocr.engine.graph.plan",
}

__all__ = ["Device", "DeviceInfo", "KernelDef", "Model", "Pipeline", "Plan", "Recorder", "Tensor"]
__all__ += _errors


__getattr__, __dir__ = lazy_exports("vkocr.engine", _EXPORTS, globals())
