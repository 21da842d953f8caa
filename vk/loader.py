"""Import the `vulkan` CFFI binding once, turning 'no loader' into one clear error; name VkResult failures.

Every Vulkan call in vk/ goes through `binding()` here, and every failed VkResult through `call()` (binding
wrappers, which raise) or `check()` (raw `binding().lib` calls, which return it); both name the result and let
`vkocr.engine.errors.vulkan_error` classify it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from vkocr.engine.errors import VulkanUnavailable, vulkan_error

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
        raise vulkan_error(getattr(fn, "__name__", repr(fn)), result_name(exc)) from exc


def check(result: int, call_name: str) -> None:
    """For raw `binding().lib` calls that return a VkResult instead of raising: anything but VK_SUCCESS raises
    the VulkanError subclass `vulkan_error` gives."""
    if result == 0:
        return
    exc = binding().exception_codes.get(result)
    raise vulkan_error(call_name, result_name(exc()) if exc is not None else f"VkResult({result})")
