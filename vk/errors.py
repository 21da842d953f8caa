"""Every error the engine raises. One tree, so callers can catch `VkocrError` or something precise."""

from __future__ import annotations


class VkocrError(Exception):
    """Base of every error raised by vk/."""


class VulkanUnavailable(VkocrError):
    """Raised when no Vulkan loader or no Vulkan device exists on this machine. The message names what to install."""


class DeviceNotFound(VkocrError):
    """Raised when a device override (config or VKOCR_DEVICE) matches no device."""


class VulkanError(VkocrError):
    """Raised when a Vulkan call returns an error code. `result` is the VkResult name, e.g. VK_ERROR_OUT_OF_DEVICE_MEMORY."""

    def __init__(self, call: str, result: str) -> None:
        super().__init__(f"{call} failed: {result}")
        self.call = call
        self.result = result


class DeviceLost(VulkanError):
    """Raised when the driver reports VK_ERROR_DEVICE_LOST: every object of that device is unusable."""


class OutOfMemory(VulkanError):
    """Raised when host or device memory for an allocation is exhausted."""


class ShaderError(VkocrError):
    """Raised when a kernel's SPIR-V is missing, unreadable or out of date with its GLSL source."""


class KernelArgumentError(VkocrError, ValueError):
    """Raised when a kernel is given shapes or attributes it cannot run (checked before anything is recorded)."""


class RecorderStateError(VkocrError):
    """Raised when a recorder is used out of order (recording after end, submitting before end, reuse before wait)."""
