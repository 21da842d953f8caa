"""Import the `vulkan` CFFI binding once, turning 'no loader' into one clear error, and map VkResult failures.

Every Vulkan call in vk/ goes through `vkocr.engine.loader.vk` (the binding) and every error through `call()` here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from vkocr.engine.errors import DeviceLost, OutOfMemory, VulkanError, VulkanUnavailable

INSTALL_HINT = (
    "install the Vulkan loader and a driver: on Debian/Ubuntu `apt-get install libvulkan1 mesa-vulkan-drivers` "
    "(Mesa's lavapipe runs on any CPU); on NVIDIA the proprietary driver ships its own Vulkan driver"
)

T = TypeVar("T")


@cache
def binding() -> Any:
    """The `vulkan` module, imported on first use so that `--help` works on a machine without Vulkan."""
    try:
        import vulkan
    except OSError as exc:  # the binding dlopens libvulkan.so.1 at import time
        raise VulkanUnavailable(f"no Vulkan loader (libvulkan.so.1) found: {INSTALL_HINT}") from exc
    return vulkan


def result_name(exc: BaseException) -> str:
    """VK_ERROR_DEVICE_LOST from the binding's exception class VkErrorDeviceLost."""
    name = type(exc).__name__
    words: list[str] = []
    for ch in name:
        if ch.isupper() and words:
            words.append("_")
        words.append(ch.upper())
    return "".join(words).replace("V_K_", "VK_")


def call(fn: Callable[..., T], *args: Any) -> T:
    """Call a binding function; a VkResult error becomes a VulkanError subclass naming the call and the result."""
    vk = binding()
    try:
        return fn(*args)
    except (vk.VkError, vk.VkException) as exc:
        name = result_name(exc)
        fn_name = getattr(fn, "__name__", repr(fn))
        if "DEVICE_LOST" in name:
            raise DeviceLost(fn_name, name) from exc
        if "OUT_OF" in name and "MEMORY" in name:
            raise OutOfMemory(fn_name, name) from exc
        raise VulkanError(fn_name, name) from exc


def check(result: int, call_name: str) -> None:
    """For raw `binding().lib` calls that return a VkResult instead of raising."""
    if result == 0:
        return
    vk = binding()
    exc = vk.exception_codes.get(result)
    name = result_name(exc()) if exc is not None else f"VkResult({result})"
    if "DEVICE_LOST" in name:
        raise DeviceLost(call_name, name)
    if "OUT_OF" in name and "MEMORY" in name:
        raise OutOfMemory(call_name, name)
    raise VulkanError(call_name, name)
