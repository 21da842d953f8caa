"""Compute pipelines: shader module + descriptor layout + push constants + specialization constants.

Shapes travel in push constants and small enums (activation, workgroup size, tile) in specialization
constants, so one pipeline serves every shape. Constant IDs 0, 1, 2 are the workgroup size by convention.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.loader import binding, call, check
from vkocr.engine.shaders import precisions, spirv, variant

if TYPE_CHECKING:
    from vkocr.engine.device import Device

Constant = int | float


@dataclass(frozen=True, eq=False)
class KernelDef:
    """What the host must know about a shader: its file, each binding's access ("r", "w", "rw"), push size.
    Each is a module constant, compared and hashed by identity: a pipeline lookup per dispatch on the request
    path would otherwise hash its fields every time."""

    shader: str
    access: tuple[str, ...]
    push_bytes: int

    precision: str = "fp32"  # the storage precision of its tensors: which SPIR-V variant runs (vk/shaders.py)
    reads: tuple[int, ...] = field(init=False, repr=False)  # bindings read ("r", "rw"), for hazard tracking
    writes: tuple[int, ...] = field(init=False, repr=False)  # bindings written ("w", "rw")
    _variants: dict[str, KernelDef] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        assert all(a in ("r", "w", "rw") for a in self.access), self.access
        assert self.push_bytes % 4 == 0 and self.push_bytes <= 128, "push constants: multiple of 4, at most 128"
        object.__setattr__(self, "reads", tuple(i for i, a in enumerate(self.access) if a != "w"))
        object.__setattr__(self, "writes", tuple(i for i, a in enumerate(self.access) if a != "r"))
        object.__setattr__(self, "_variants", {self.precision: self})

    @property
    def spirv_name(self) -> str:
        return variant(self.shader, self.precision)

    def at(self, precision: str) -> KernelDef:
        """This kernel compiled for another storage precision (one object per precision, made once)."""
        found = self._variants.get(precision)
        if found is None:
            if precision not in precisions(self.shader):
                raise KernelArgumentError(f"kernel {self.shader} has no {precision} variant "
                                          f"(it is built for {', '.join(precisions(self.shader))})")
            found = KernelDef(self.shader, self.access, self.push_bytes, precision)
            object.__setattr__(found, "_variants", self._variants)
            self._variants[precision] = found
        return found


def pack_constants(constants: tuple[Constant, ...]) -> bytes:
    """int → int32 (uint when ≥ 2^31), float → float32; bools are ints."""
    out = b""
    for c in constants:
        if isinstance(c, float):
            out += struct.pack("<f", c)
        elif c >= 1 << 31:
            out += struct.pack("<I", c)
        else:
            out += struct.pack("<i", c)
    return out


class Pipeline:
    """One kernel specialised by `constants`. Created through `Device.pipeline()`, which caches it."""

    def __init__(self, device: Device, kernel: KernelDef, constants: tuple[Constant, ...]) -> None:
        vk = binding()
        self.device, self.kernel, self.constants = device, kernel, constants
        self.local_size = tuple(int(c) for c in constants[:3])
        dev = device.handle
        self.set_layout = self.layout = self.handle = None
        try:
            bindings = [
                vk.VkDescriptorSetLayoutBinding(
                    binding=i,
                    descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                    descriptorCount=1,
                    stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                )
                for i in range(len(kernel.access))
            ]
            layout_info = vk.VkDescriptorSetLayoutCreateInfo(bindingCount=len(bindings), pBindings=bindings)
            self.set_layout = call(vk.vkCreateDescriptorSetLayout, dev, layout_info, None)
            set_layouts = [self.set_layout]
            push_ranges = [
                vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=kernel.push_bytes)
            ]
            pl_info = vk.VkPipelineLayoutCreateInfo(
                setLayoutCount=1,
                pSetLayouts=set_layouts,
                pushConstantRangeCount=1 if kernel.push_bytes else 0,
                pPushConstantRanges=push_ranges if kernel.push_bytes else None,
            )
            self.layout = call(vk.vkCreatePipelineLayout, dev, pl_info, None)

            # Every nested struct and array stays in a local until vkCreateComputePipelines returns.
            data = pack_constants(constants)
            data_buf = vk.ffi.new("char[]", data) if data else None
            entries = [vk.VkSpecializationMapEntry(constantID=i, offset=4 * i, size=4) for i in range(len(constants))]
            spec_info = vk.VkSpecializationInfo(
                mapEntryCount=len(entries), pMapEntries=entries, dataSize=len(data), pData=data_buf
            ) if constants else None
            stage = vk.VkPipelineShaderStageCreateInfo(
                stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                module=device.shader_module(kernel.spirv_name),
                pName="main",
                pSpecializationInfo=spec_info,
            )
            flags = vk.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR if getattr(device, "pipeline_stats", False) else 0
            create_info = vk.VkComputePipelineCreateInfo(flags=flags, stage=stage, layout=self.layout,
                                                         basePipelineIndex=-1)
            self.handle = call(vk.vkCreateComputePipelines, dev, device.pipeline_cache.handle, 1, [create_info],
                               None)[0]
            del data_buf, entries, spec_info, stage, create_info
        except BaseException:
            self.close()
            raise
        device.live["pipeline"] += 1

    def statistics(self) -> dict[str, Any]:
        """The driver's statistics of this pipeline's executables ("Register Count", "Local Memory Size", …: named
        by the driver), where the device was opened with VKOCR_PIPELINE_STATS=1 and offers them; else empty."""
        if not getattr(self.device, "pipeline_stats", False) or self.handle is None:
            return {}
        vk = binding()
        ffi, dev = vk.ffi, self.device.handle

        def function(name: str) -> Any:
            return ffi.cast(f"PFN_{name}", vk.lib.vkGetDeviceProcAddr(dev, name.encode()))

        def listed(fn: Any, info: Any, ctype: str, stype: int) -> Any:
            """The two-call enumeration, each element's sType set (the package's wrappers leave it zero)."""
            count = ffi.new("uint32_t*")
            check(fn(dev, info, count, ffi.NULL), "vkGetPipelineExecutable*KHR")
            items = ffi.new(f"{ctype}[]", count[0])
            for item in items:
                item.sType = stype
            check(fn(dev, info, count, items), "vkGetPipelineExecutable*KHR")
            return items

        pipeline_info = ffi.new("VkPipelineInfoKHR*", {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR,
                                                       "pipeline": self.handle})
        executables = listed(function("vkGetPipelineExecutablePropertiesKHR"), pipeline_info,
                             "VkPipelineExecutablePropertiesKHR",
                             vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR)
        get_stats = function("vkGetPipelineExecutableStatisticsKHR")
        stats: dict[str, Any] = {}
        for index, executable in enumerate(executables):
            exec_info = ffi.new("VkPipelineExecutableInfoKHR*", {
                "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, "pipeline": self.handle,
                "executableIndex": index})
            prefix = "" if index == 0 else f"{ffi.string(executable.name).decode()}: "
            for stat in listed(get_stats, exec_info, "VkPipelineExecutableStatisticKHR",
                               vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR):
                fmt, value = stat.format, stat.value
                stats[prefix + ffi.string(stat.name).decode()] = (
                    bool(value.b32) if fmt == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR
                    else int(value.i64) if fmt == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR
                    else int(value.u64) if fmt == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR
                    else float(value.f64))
        return stats

    def close(self) -> None:
        vk = binding()
        dev = self.device.handle
        if self.handle is not None:
            vk.vkDestroyPipeline(dev, self.handle, None)
            self.device.live["pipeline"] -= 1
            self.handle = None
        if self.layout is not None:
            vk.vkDestroyPipelineLayout(dev, self.layout, None)
            self.layout = None
        if self.set_layout is not None:
            vk.vkDestroyDescriptorSetLayout(dev, self.set_layout, None)
            self.set_layout = None


def dispatch_groups(total: tuple[int, ...], local: tuple[int, ...]) -> tuple[int, int, int]:
    """Workgroups needed to cover `total` invocations per axis with `local`-sized groups."""
    t = (*total, 1, 1)[:3]
    x, y, z = (-(-t[i] // local[i]) if t[i] > 0 else 1 for i in range(3))  # (max(1, ...) guards against 1)
    return x, y, z


def load_module(device: Device, name: str) -> Any:
    vk = binding()
    code = spirv(name)  # the create info points into these bytes: keep them alive until the call returns
    info = vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code)
    return call(vk.vkCreateShaderModule, device.handle, info, None)
