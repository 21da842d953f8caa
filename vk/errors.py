"""Every error the engine raises, and the one place that classifies a VkResult (`vulkan_error`).

All of them derive from `EngineError`, itself a `vkocr.errors.VkocrError`, so callers catch the root, the
engine's branch or something precise. This module imports nothing of the engine.
"""

from __future__ import annotations

from vkocr.errors import VkocrError

__all__ = [
    "DeviceLost", "DeviceNotFound", "EngineError", "InputError", "KernelArgumentError", "LoweringError",
    "ModelError", "NoUsableDevice", "OutOfMemory", "RecorderStateError", "ShaderError", "ShapeError", "VkocrError",
    "VulkanError", "VulkanUnavailable", "vulkan_error",
]


class EngineError(VkocrError):
    """Base of every error the engine (vkocr.engine) raises; raised by the engine itself when no subclass
    names the problem: a closed plan, a host view of device-local memory, a missing validation layer."""


class VulkanUnavailable(EngineError):
    """Raised when no Vulkan loader or no Vulkan device exists on this machine. The message names what to
    install."""


class NoUsableDevice(VulkanUnavailable):
    """Raised when a Device is opened without naming one and the automatic choice finds no usable Vulkan GPU
    (none, every one denied by the quirks table, or only CPU implementations such as lavapipe). The message
    says which; name a device to open it anyway."""


class DeviceNotFound(EngineError):
    """Raised when a device override (config or VKOCR_DEVICE) matches no device."""


class VulkanError(EngineError):
    """Raised when a Vulkan call returns an error code. `result` is the VkResult name, e.g.
    VK_ERROR_OUT_OF_DEVICE_MEMORY."""

    def __init__(self, call: str, result: str) -> None:
        super().__init__(f"{call} failed: {result}")
        self.call = call
        self.result = result


class DeviceLost(VulkanError):
    """Raised when the driver reports VK_ERROR_DEVICE_LOST: every object of that device is unusable."""


class OutOfMemory(VulkanError):
    """Raised when host or device memory for an allocation is exhausted (VK_ERROR_OUT_OF_*_MEMORY, or no
    memory type with the flags an allocation needs)."""


def vulkan_error(call: str, result: str) -> VulkanError:
    """The error for `call` failing with the VkResult named `result`: the one place that classifies VkResults
    (`loader.call`, `loader.check` and the recorder's injected failures all come here)."""
    if "DEVICE_LOST" in result:
        return DeviceLost(call, result)
    if "OUT_OF" in result and "MEMORY" in result:  # host, device and descriptor-pool memory
        return OutOfMemory(call, result)
    return VulkanError(call, result)


class ShaderError(EngineError):
    """Raised when a kernel's SPIR-V is missing, unreadable or out of date with its GLSL source."""


class KernelArgumentError(EngineError):
    """Raised when a kernel is given shapes or attributes it cannot run (checked before anything is
    recorded)."""


class BindingTooLarge(KernelArgumentError, ValueError):
    """Raised when a tensor is larger than one descriptor may bind on this device (maxStorageBufferRange: 128 MiB
    on lavapipe and many embedded GPUs, 4 GiB on NVIDIA's desktop driver); checked before any memory grows, so
    the caller can run that shape elsewhere."""


class InputError(KernelArgumentError):
    """Raised when a plan's input has the wrong rank, a wrong fixed dimension (channels) or a dtype other than
    float32; checked before any GPU work."""


class RecorderStateError(EngineError):
    """Raised when a recorder is used out of order (recording after end, submitting before end, reuse before
    wait)."""


class ModelError(EngineError):
    """Raised when a model file cannot be read or uses operators vkocr does not implement."""


class LoweringError(ModelError):
    """Raised when a node cannot run on Vulkan (unknown op, unsupported attribute or input); names node and
    op."""


class ShapeError(EngineError):
    """Raised when a graph is specialised without a shape for one of its inputs, or when a node cannot take
    the shapes it is given (the message names the node)."""
