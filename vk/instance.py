"""The Vulkan instance: portability enumeration on, optional Khronos validation with messages collected."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Self

from vkocr.engine.errors import EngineError, VulkanError, VulkanUnavailable
from vkocr.engine.loader import INSTALL_HINT, binding, call
from vkocr.log import get_logger

log = get_logger(__name__)

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
PORTABILITY_EXTENSION = "VK_KHR_portability_enumeration"
DEBUG_UTILS_EXTENSION = "VK_EXT_debug_utils"


@dataclass
class ValidationLog:
    """Messages the validation layer reported (warnings and errors), newest last."""

    messages: list[str] = field(default_factory=list)


VALIDATION = ValidationLog()


def validation_requested() -> bool:
    """VKOCR_VALIDATION=1 turns the Khronos validation layer on for every instance this process creates."""
    return os.environ.get("VKOCR_VALIDATION", "") not in ("", "0", "false", "no")


def _on_validation_message(severity: int, types: int, data: Any, user_data: Any) -> int:
    vk = binding()
    message = vk.ffi.string(data.pMessage).decode("utf-8", "replace")
    VALIDATION.messages.append(message)
    log.error("vulkan_validation", message=message, severity=severity)
    return 0


class Instance:
    """A VkInstance. `close()` destroys it (after every device made from it)."""

    def __init__(self, *, validation: bool | None = None, app_name: str = "vkocr") -> None:
        vk = binding()
        self.validation = validation_requested() if validation is None else validation
        try:
            self.api_version = min(call(vk.vkEnumerateInstanceVersion), vk.VK_MAKE_VERSION(1, 3, 0))
        except (AttributeError, vk.ProcedureNotFoundError):  # a Vulkan 1.0 loader has no vkEnumerateInstanceVersion
            self.api_version = vk.VK_MAKE_VERSION(1, 0, 0)
        if self.api_version < vk.VK_MAKE_VERSION(1, 1, 0):
            raise VulkanUnavailable(f"the Vulkan loader supports only Vulkan 1.0; vkocr needs 1.1+: {INSTALL_HINT}")
        available = {e.extensionName for e in call(vk.vkEnumerateInstanceExtensionProperties, None)}
        extensions = [PORTABILITY_EXTENSION] if PORTABILITY_EXTENSION in available else []
        layers: list[str] = []
        if self.validation:
            layer_names = {p.layerName for p in call(vk.vkEnumerateInstanceLayerProperties)}
            if VALIDATION_LAYER not in layer_names:
                raise EngineError(
                    f"validation requested but {VALIDATION_LAYER} is not installed "
                    "(Debian/Ubuntu: apt-get install vulkan-validationlayers)"
                )
            layers.append(VALIDATION_LAYER)
            extensions.append(DEBUG_UTILS_EXTENSION)
        flags = vk.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR if PORTABILITY_EXTENSION in extensions else 0
        app_info = vk.VkApplicationInfo(
            pApplicationName=app_name,
            applicationVersion=1,
            pEngineName="vkocr",
            engineVersion=1,
            apiVersion=self.api_version,
        )
        # Synchronization validation also reports missing or wrong barriers, not just API misuse.
        enabled_features = [vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT]
        features = (
            vk.VkValidationFeaturesEXT(
                enabledValidationFeatureCount=1, pEnabledValidationFeatures=enabled_features
            )
            if self.validation
            else None
        )
        create_info = vk.VkInstanceCreateInfo(
            pNext=features,
            flags=flags,
            pApplicationInfo=app_info,
            enabledLayerCount=len(layers),
            ppEnabledLayerNames=layers,
            enabledExtensionCount=len(extensions),
            ppEnabledExtensionNames=extensions,
        )
        try:
            self.handle = call(vk.vkCreateInstance, create_info, None)
        except VulkanError as exc:
            if exc.result in ("VK_ERROR_INCOMPATIBLE_DRIVER", "VK_ERROR_INITIALIZATION_FAILED"):
                raise VulkanUnavailable(f"no usable Vulkan driver ({exc.result}): {INSTALL_HINT}") from exc
            raise
        self._messenger = None
        if self.validation:
            self._messenger = self._create_messenger()
        log.debug("instance_created", validation=self.validation, extensions=extensions)

    def _create_messenger(self) -> Any:
        vk = binding()
        severity = (
            vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT
        )
        types = (
            vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT
        )
        info = vk.VkDebugUtilsMessengerCreateInfoEXT(
            messageSeverity=severity, messageType=types, pfnUserCallback=_on_validation_message
        )
        create = vk.vkGetInstanceProcAddr(self.handle, "vkCreateDebugUtilsMessengerEXT")
        return call(create, self.handle, info, None)

    def physical_devices(self) -> list[Any]:
        vk = binding()
        return list(call(vk.vkEnumeratePhysicalDevices, self.handle))

    def close(self) -> None:
        vk = binding()
        if self.handle is None:
            return
        if self._messenger is not None:
            destroy = vk.vkGetInstanceProcAddr(self.handle, "vkDestroyDebugUtilsMessengerEXT")
            destroy(self.handle, self._messenger, None)
            self._messenger = None
        vk.vkDestroyInstance(self.handle, None)
        self.handle = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
