"""What each Vulkan device is and can do (the feature probe), and which one we choose and why."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from vkocr.engine.errors import DeviceNotFound, VulkanUnavailable
from vkocr.engine.instance import Instance
from vkocr.engine.loader import binding, call, check
from vkocr.engine.quirks import QUIRKS, Quirk, matching

# Lower rank wins: discrete > integrated > virtual > other; CPU implementations are never ranked (choose()).
TYPE_NAMES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
TYPE_RANK = {"discrete": 0, "integrated": 1, "virtual": 2, "other": 3, "cpu": 4}
VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x13B5: "ARM", 0x5143: "Qualcomm",
           0x1010: "ImgTec", 0x106B: "Apple", 0x10005: "Mesa"}


@dataclass(frozen=True)
class MemoryHeap:
    size_mib: int
    device_local: bool


@dataclass(frozen=True)
class DeviceInfo:
    """Everything `vkocr devices` shows about one physical device."""

    index: int
    name: str
    type: str
    vendor: str
    vendor_id: int
    device_id: int
    driver_name: str
    driver_info: str
    driver_version: str
    driver_version_raw: int
    api_version: str
    uuid: str
    pipeline_cache_uuid: str
    memory_heaps: tuple[MemoryHeap, ...]
    subgroup_size: int
    fp16_storage: bool
    fp16_arithmetic: bool
    int8_storage: bool
    int8_arithmetic: bool
    max_workgroup_size: tuple[int, int, int]
    max_workgroup_invocations: int
    max_workgroup_count: tuple[int, int, int]
    max_shared_memory_bytes: int
    max_push_constants_bytes: int
    max_storage_buffer_range: int
    min_storage_buffer_offset_alignment: int
    non_coherent_atom_size: int
    timestamp_period_ns: float
    timestamps_supported: bool
    # (min, max) subgroup size of compute shaders: the driver picks one in the range unless a pipeline asks
    subgroup_size_range: tuple[int, int] = (0, 0)
    # VK_KHR_cooperative_matrix: the (M, N, K) shapes of subgroup scope with fp16 A and B and fp32 C and result,
    # when the device offers the extension and its feature for compute shaders, and the Vulkan memory model;
    # () otherwise
    coopmat_shapes: tuple[tuple[int, int, int], ...] = ()
    extensions: frozenset[str] = field(repr=False, compare=False, default=frozenset())

    @property
    def device_local_mib(self) -> int:
        return sum(h.size_mib for h in self.memory_heaps if h.device_local)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("extensions")
        data["memory_heaps"] = [asdict(h) for h in self.memory_heaps]
        data["coopmat_shapes"] = [list(s) for s in self.coopmat_shapes]
        return data


def _version(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def _driver_version(vendor_id: int, v: int) -> str:
    if vendor_id == 0x10DE:  # NVIDIA packs 10.8.8.6 bits
        return f"{(v >> 22) & 0x3FF}.{(v >> 14) & 0xFF}.{(v >> 6) & 0xFF}"
    return _version(v)


def _text(value: Any) -> str:
    """Char arrays come back as str through the binding's wrapper, or as raw cdata inside pNext chains."""
    if isinstance(value, str):
        return value
    return str(binding().ffi.string(value).decode("utf-8", "replace"))


def _uuid(raw: Any) -> str:
    h = bytes(raw).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


COOPMAT_EXTENSION = "VK_KHR_cooperative_matrix"


def coopmat_shapes(instance: Any, physical_device: Any) -> tuple[tuple[int, int, int], ...]:
    """The cooperative-matrix shapes (M, N, K) the device lists with subgroup scope, fp16 A and B, fp32 C and
    result, no saturation: the ones conv2d_coopmat.comp can use. vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR
    is an extension function: got through vkGetInstanceProcAddr and called raw (list_coopmat_shapes)."""
    vk = binding()
    address = vk.lib.vkGetInstanceProcAddr(instance, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    if address == vk.ffi.NULL:
        return ()
    return list_coopmat_shapes(vk.ffi.cast("PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", address),
                               physical_device)


def list_coopmat_shapes(fn: Any, physical_device: Any) -> tuple[tuple[int, int, int], ...]:
    """Call the properties function `fn` (a CFFI function pointer) the two-call way, every output struct with its
    sType (the binding's own wrapper leaves them zero), the arrays in locals until the calls return."""
    vk = binding()
    ffi = vk.ffi
    name = "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"
    count = ffi.new("uint32_t*")
    check(fn(physical_device, count, ffi.NULL), name)
    if count[0] == 0:
        return ()
    props = ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
    for i in range(count[0]):
        props[i].sType = vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
        props[i].pNext = ffi.NULL
    result = fn(physical_device, count, props)
    if result != vk.VK_INCOMPLETE:  # INCOMPLETE: the list grew between the calls; what was written is good
        check(result, name)
    f16, f32 = vk.VK_COMPONENT_TYPE_FLOAT16_KHR, vk.VK_COMPONENT_TYPE_FLOAT32_KHR
    shapes = {
        (int(p.MSize), int(p.NSize), int(p.KSize))
        for p in (props[i] for i in range(count[0]))
        if p.scope == vk.VK_SCOPE_SUBGROUP_KHR and p.AType == f16 and p.BType == f16 and p.CType == f32
        and p.ResultType == f32 and not p.saturatingAccumulation
    }
    del props, count
    return tuple(sorted(shapes))


def probe(physical_device: Any, index: int, instance: Any = None) -> DeviceInfo:
    """Query properties, limits and features of one physical device (`instance`, the VkInstance handle, for the
    cooperative-matrix query; None: no cooperative matrix recorded)."""
    vk = binding()
    props = call(vk.vkGetPhysicalDeviceProperties, physical_device)
    api = props.apiVersion
    extensions = frozenset(
        e.extensionName for e in call(vk.vkEnumerateDeviceExtensionProperties, physical_device, None)
    )
    is_12 = api >= vk.VK_MAKE_VERSION(1, 2, 0)

    # Properties2 chain: subgroup size, UUID, driver name. Every struct stays in a local until the call returns.
    # the range of subgroup sizes a compute shader may get (core 1.3, VK_EXT_subgroup_size_control before)
    has_size_control = api >= vk.VK_MAKE_VERSION(1, 3, 0) or "VK_EXT_subgroup_size_control" in extensions
    size_control = vk.VkPhysicalDeviceSubgroupSizeControlProperties() if has_size_control else None
    subgroup = vk.VkPhysicalDeviceSubgroupProperties(pNext=size_control)
    ids = vk.VkPhysicalDeviceIDProperties(pNext=subgroup)
    has_driver_props = is_12 or "VK_KHR_driver_properties" in extensions
    driver = vk.VkPhysicalDeviceDriverProperties(pNext=ids) if has_driver_props else None
    has_coopmat = COOPMAT_EXTENSION in extensions and instance is not None
    coopmat_props = vk.VkPhysicalDeviceCooperativeMatrixPropertiesKHR(
        pNext=driver if driver is not None else ids) if has_coopmat else None
    props2 = vk.VkPhysicalDeviceProperties2(
        pNext=coopmat_props if coopmat_props is not None else driver if driver is not None else ids)
    call(vk.vkGetPhysicalDeviceProperties2, physical_device, props2)

    # Features2 chain: 16-bit storage is core 1.1; 8-bit storage and float16/int8 arithmetic are core 1.2.
    f16_storage = vk.VkPhysicalDevice16BitStorageFeatures()
    chain: Any = f16_storage
    i8_storage = arith = None
    if is_12 or "VK_KHR_8bit_storage" in extensions:
        i8_storage = vk.VkPhysicalDevice8BitStorageFeatures(pNext=chain)
        chain = i8_storage
    if is_12 or "VK_KHR_shader_float16_int8" in extensions:
        arith = vk.VkPhysicalDeviceShaderFloat16Int8Features(pNext=chain)
        chain = arith
    # cooperative matrices: the extension's feature, and the Vulkan memory model (core 1.2) their SPIR-V uses
    coopmat_features = memory_model = None
    if has_coopmat:
        coopmat_features = vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(pNext=chain)
        chain = coopmat_features
        if is_12 or "VK_KHR_vulkan_memory_model" in extensions:
            memory_model = vk.VkPhysicalDeviceVulkanMemoryModelFeatures(pNext=chain)
            chain = memory_model
    features2 = vk.VkPhysicalDeviceFeatures2(pNext=chain)
    call(vk.vkGetPhysicalDeviceFeatures2, physical_device, features2)
    shapes: tuple[tuple[int, int, int], ...] = ()
    if (coopmat_features is not None and coopmat_props is not None and coopmat_features.cooperativeMatrix
            and memory_model is not None and memory_model.vulkanMemoryModel
            and coopmat_props.cooperativeMatrixSupportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT):
        shapes = coopmat_shapes(instance, physical_device)

    memory = call(vk.vkGetPhysicalDeviceMemoryProperties, physical_device)
    heaps = tuple(
        MemoryHeap(
            size_mib=memory.memoryHeaps[i].size // (1 << 20),
            device_local=bool(memory.memoryHeaps[i].flags & vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT),
        )
        for i in range(memory.memoryHeapCount)
    )
    queues = call(vk.vkGetPhysicalDeviceQueueFamilyProperties, physical_device)
    compute_timestamps = any(q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT and q.timestampValidBits > 0 for q in queues)
    limits = props.limits
    vendor_id = props.vendorID
    return DeviceInfo(
        index=index,
        name=_text(props.deviceName),
        type=TYPE_NAMES.get(props.deviceType, "other"),
        vendor=VENDORS.get(vendor_id, f"0x{vendor_id:04x}"),
        vendor_id=vendor_id,
        device_id=props.deviceID,
        driver_name=_text(driver.driverName) if driver is not None else "",
        driver_info=_text(driver.driverInfo) if driver is not None else "",
        driver_version=_driver_version(vendor_id, props.driverVersion),
        driver_version_raw=props.driverVersion,
        api_version=_version(api),
        uuid=_uuid(ids.deviceUUID),
        pipeline_cache_uuid=_uuid(props.pipelineCacheUUID),
        memory_heaps=heaps,
        subgroup_size=subgroup.subgroupSize,
        subgroup_size_range=(int(size_control.minSubgroupSize), int(size_control.maxSubgroupSize))
        if size_control is not None else (subgroup.subgroupSize, subgroup.subgroupSize),
        fp16_storage=bool(f16_storage.storageBuffer16BitAccess),
        fp16_arithmetic=bool(arith.shaderFloat16) if arith is not None else False,
        int8_storage=bool(i8_storage.storageBuffer8BitAccess) if i8_storage is not None else False,
        int8_arithmetic=bool(arith.shaderInt8) if arith is not None else False,
        max_workgroup_size=tuple(limits.maxComputeWorkGroupSize),
        max_workgroup_invocations=limits.maxComputeWorkGroupInvocations,
        max_workgroup_count=tuple(limits.maxComputeWorkGroupCount),
        max_shared_memory_bytes=limits.maxComputeSharedMemorySize,
        max_push_constants_bytes=limits.maxPushConstantsSize,
        max_storage_buffer_range=limits.maxStorageBufferRange,
        min_storage_buffer_offset_alignment=limits.minStorageBufferOffsetAlignment,
        non_coherent_atom_size=limits.nonCoherentAtomSize,
        timestamp_period_ns=float(limits.timestampPeriod),
        timestamps_supported=bool(limits.timestampComputeAndGraphics) or compute_timestamps,
        coopmat_shapes=shapes,
        extensions=extensions,
    )


def list_devices(instance: Any) -> list[DeviceInfo]:
    """Probe every physical device the instance sees, in enumeration order."""
    return [probe(pd, i, instance.handle) for i, pd in enumerate(instance.physical_devices())]


_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
# Vulkan on the CPU: correct, and far slower than a CPU backend made for it (onnxruntime); some report type "cpu",
# some (older lavapipe, SwiftShader) "other" or "virtual", so the name decides too.
CPU_IMPLEMENTATION_NAMES = re.compile(r"llvmpipe|lavapipe|swiftshader", re.IGNORECASE)


def cpu_implementation(device: DeviceInfo) -> bool:
    """A CPU implementation of Vulkan: never chosen automatically, only by name."""
    return device.type == "cpu" or bool(CPU_IMPLEMENTATION_NAMES.search(device.name))


@dataclass(frozen=True)
class Assessment:
    """Whether the automatic choice may take one device, and the workarounds the quirks table gives it."""

    device: DeviceInfo
    unusable_because: str  # "" when the automatic choice may take it
    workarounds: frozenset[str] = frozenset()

    @property
    def usable(self) -> bool:
        return not self.unusable_because


def assess(device: DeviceInfo, quirks: Sequence[Quirk] = QUIRKS) -> Assessment:
    found = matching(quirks, device.vendor_id, device.device_id, device.name, device.driver_version)
    workarounds = frozenset(q.workaround for q in found if q.workaround)
    denials = [q.deny for q in found if q.deny]
    if cpu_implementation(device):
        why = "a CPU implementation of Vulkan: chosen only by name"
    elif denials:
        why = "denied by a quirk: " + "; ".join(denials)
    else:
        why = ""
    return Assessment(device, why, workarounds)


@dataclass(frozen=True)
class Choice:
    """What `choose()` picked and why. `device` None: no usable Vulkan GPU, so the caller's CPU backend serves
    (`reason` says why: no device, every one denied by quirks, or only CPU implementations of Vulkan)."""

    device: DeviceInfo | None
    reason: str
    assessments: tuple[Assessment, ...]
    workarounds: frozenset[str] = frozenset()

    @property
    def falls_back(self) -> bool:
        return self.device is None


def _named(devices: list[DeviceInfo], override: str, source: str) -> tuple[DeviceInfo, str]:
    wanted = override.strip()
    if wanted.isdigit():
        matches = [d for d in devices if d.index == int(wanted)]
        how = "index"
    elif _UUID.match(wanted):
        matches = [d for d in devices if d.uuid.replace("-", "") == wanted.replace("-", "").lower()]
        how = "UUID"
    else:
        matches = [d for d in devices if wanted.lower() in d.name.lower()]
        how = "name"
    if not matches:
        names = ", ".join(f"{d.index}: {d.name} ({d.uuid})" for d in devices) or "none"
        raise DeviceNotFound(f"{source}={override!r} matches no Vulkan device; devices are: {names}")
    return matches[0], f"{source}={override!r} matched by {how}"


def _no_usable_gpu(assessments: Sequence[Assessment]) -> str:
    if not assessments:
        return "no Vulkan device found"
    why = "; ".join(f"[{a.device.index}] {a.device.name}: {a.unusable_because}" for a in assessments)
    if all(cpu_implementation(a.device) for a in assessments):
        names = ", ".join(f"[{a.device.index}] {a.device.name}" for a in assessments)
        return f"only CPU implementations of Vulkan ({names}), which are chosen only by name"
    if not any(cpu_implementation(a.device) for a in assessments):
        return f"every Vulkan GPU is denied by the quirks table ({why})"
    return f"no usable Vulkan GPU ({why})"


def choose(devices: list[DeviceInfo], override: str | None = None, quirks: Sequence[Quirk] = QUIRKS) -> Choice:
    """Pick a device. `override` (or VKOCR_DEVICE) is an index, a UUID or a name part, and takes any device,
    lavapipe and quirk-denied ones included. Otherwise the usable devices (no CPU implementation, no denying
    quirk) ranked discrete > integrated > virtual > other, then by device memory; none usable: device None."""
    assessments = tuple(assess(d, quirks) for d in devices)
    source = "device override"
    if override is None and os.environ.get("VKOCR_DEVICE"):
        override, source = os.environ["VKOCR_DEVICE"], "VKOCR_DEVICE"
    if override:
        named, reason = _named(devices, override, source)
        verdict = assessments[devices.index(named)]
        if verdict.unusable_because:
            reason += f" (not chosen automatically: {verdict.unusable_because})"
        return Choice(named, reason, assessments, verdict.workarounds)
    usable = [a for a in assessments if a.usable]
    if not usable:
        return Choice(None, _no_usable_gpu(assessments), assessments)
    best = min(usable, key=lambda a: (TYPE_RANK[a.device.type], -a.device.device_local_mib, a.device.index))
    reason = (f"highest ranked usable type ({best.device.type}; discrete > integrated > virtual > other), "
              "then most device memory")
    return Choice(best.device, reason, assessments, best.workarounds)


def survey(override: str | None = None, quirks: Sequence[Quirk] = QUIRKS) -> tuple[list[DeviceInfo], Choice]:
    """Every device of this machine and the choice among them, opening none. Without a Vulkan loader or driver
    the choice is the CPU backend, unless a device is named (then VulkanUnavailable)."""
    try:
        with Instance(validation=False) as instance:
            devices = list_devices(instance)
    except VulkanUnavailable as exc:
        if override or os.environ.get("VKOCR_DEVICE"):
            raise
        return [], Choice(None, f"no Vulkan loader or driver ({exc})", ())
    return devices, choose(devices, override, quirks)
