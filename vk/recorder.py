"""A Recorder is one command buffer: many dispatches and copies, recorded once, submitted again and again.

`dispatch()`/`copy()` only record (they never block); `submit()` starts it, `wait()` blocks on its fence.
Barriers are inserted where a command touches a range that an earlier, unbarriered command wrote (RAW, WAW)
or that it read (WAR), so independent dispatches run back to back. With `profile=True` a timestamp is written
after every command, and `timings()` gives each command's GPU time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from vkocr.engine.errors import RecorderStateError, vulkan_error
from vkocr.engine.loader import binding, call, check
from vkocr.engine.memory import BufferView
from vkocr.engine.pipeline import Pipeline

if TYPE_CHECKING:
    from vkocr.engine.device import Device

SETS_PER_POOL = 64
DESCRIPTORS_PER_POOL = 512
QUERIES_PER_POOL = 512


@dataclass(frozen=True)
class _Access:
    key: int
    lo: int
    hi: int
    stage: int
    write: bool


def _overlaps(a: _Access, b: _Access) -> bool:
    return a.key == b.key and a.lo < b.hi and b.lo < a.hi


@dataclass(frozen=True)
class Timing:
    label: str
    ms: float


class Recorder:
    """Record into one reusable command buffer. Use as a context manager, or call `close()`."""

    def __init__(self, device: Device, *, profile: bool = False) -> None:
        vk = binding()
        self.device = device
        dev = device.handle
        self._descriptor_pools: list[Any] = []
        self._sets_left = 0
        self._query_pools: list[Any] = []
        self._labels: list[str] = []
        self._pending: list[_Access] = []
        self._in_flight = False
        self.ended = False
        self.profile = profile and device.info.timestamps_supported
        self.dispatch_count = 0
        self.command_count = 0  # dispatches and copies: with profile=True, one timestamp each
        alloc_info = vk.VkCommandBufferAllocateInfo(
            commandPool=device.command_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1
        )
        self.cmd = call(vk.vkAllocateCommandBuffers, dev, alloc_info)[0]
        self.fence = call(vk.vkCreateFence, dev, vk.VkFenceCreateInfo(), None)
        device.live["recorder"] += 1
        begin = vk.VkCommandBufferBeginInfo(flags=0)  # never ONE_TIME_SUBMIT: this buffer is replayed
        call(vk.vkBeginCommandBuffer, self.cmd, begin)
        # Replays re-read and re-write the same ranges: order this submission after everything before it.
        self._barrier(vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                      vk.VK_ACCESS_MEMORY_WRITE_BIT, vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)
        if self.profile:
            self._timestamp("start", vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT)
        cmds = [self.cmd]
        self._submit_cmds = vk.ffi.new("VkCommandBuffer[]", cmds)
        self._submit_info = vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=self._submit_cmds)
        self._submit_ptr = vk.ffi.addressof(self._submit_info)  # for the raw vkQueueSubmit
        self._fences = vk.ffi.new("VkFence[]", [self.fence])

    # -- recording ------------------------------------------------------------------------------------------

    def _require_recording(self) -> None:
        if self.ended:
            raise RecorderStateError("recording after end(): create a new Recorder")

    def _barrier(self, src_stage: int, dst_stage: int, src_access: int, dst_access: int) -> None:
        vk = binding()
        barrier = vk.VkMemoryBarrier(srcAccessMask=src_access, dstAccessMask=dst_access)
        vk.vkCmdPipelineBarrier(self.cmd, src_stage, dst_stage, 0, 1, [barrier], 0, None, 0, None)

    def _sync(self, stage: int, reads: Sequence[BufferView], writes: Sequence[BufferView]) -> None:
        """Insert one global memory barrier if this command conflicts with an unbarriered earlier one."""
        vk = binding()
        new = [_Access(v.key, v.offset, v.offset + v.size, stage, False) for v in reads]
        new += [_Access(v.key, v.offset, v.offset + v.size, stage, True) for v in writes]
        hazard = any((a.write or b.write) and _overlaps(a, b) for a in new for b in self._pending)
        if hazard:
            src_stage = 0
            src_access = 0
            for p in self._pending:
                src_stage |= p.stage
                if p.write:
                    src_access |= (
                        vk.VK_ACCESS_TRANSFER_WRITE_BIT
                        if p.stage == vk.VK_PIPELINE_STAGE_TRANSFER_BIT
                        else vk.VK_ACCESS_SHADER_WRITE_BIT
                    )
            if stage == vk.VK_PIPELINE_STAGE_TRANSFER_BIT:
                dst_access = vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
            else:
                dst_access = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
            self._barrier(src_stage, stage, src_access, dst_access)
            self._pending.clear()
        self._pending.extend(new)

    def _descriptor_set(self, pipeline: Pipeline) -> Any:
        vk = binding()
        if self._sets_left == 0:
            sizes = [vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                             descriptorCount=DESCRIPTORS_PER_POOL)]
            info = vk.VkDescriptorPoolCreateInfo(maxSets=SETS_PER_POOL, poolSizeCount=1, pPoolSizes=sizes)
            self._descriptor_pools.append(call(vk.vkCreateDescriptorPool, self.device.handle, info, None))
            self._sets_left = SETS_PER_POOL
        layouts = [pipeline.set_layout]
        info = vk.VkDescriptorSetAllocateInfo(
            descriptorPool=self._descriptor_pools[-1], descriptorSetCount=1, pSetLayouts=layouts
        )
        self._sets_left -= 1
        return call(vk.vkAllocateDescriptorSets, self.device.handle, info)[0]

    def _timestamp(self, label: str, stage: int) -> None:
        vk = binding()
        index = len(self._labels) % QUERIES_PER_POOL
        if index == 0:
            info = vk.VkQueryPoolCreateInfo(queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=QUERIES_PER_POOL)
            self._query_pools.append(call(vk.vkCreateQueryPool, self.device.handle, info, None))
            vk.vkCmdResetQueryPool(self.cmd, self._query_pools[-1], 0, QUERIES_PER_POOL)
        vk.vkCmdWriteTimestamp(self.cmd, stage, self._query_pools[-1], index)
        self._labels.append(label)

    def dispatch(
        self,
        pipeline: Pipeline,
        views: Sequence[BufferView],
        push: bytes,
        groups: tuple[int, int, int],
        label: str = "",
    ) -> None:
        """Record one dispatch; `views` bind to bindings 0..n-1 in order, `push` fills the push constants."""
        vk = binding()
        self._require_recording()
        kernel = pipeline.kernel
        if len(views) != len(kernel.access):
            raise ValueError(f"{kernel.shader}: {len(kernel.access)} bindings, {len(views)} buffers given")
        if len(push) > kernel.push_bytes:
            raise ValueError(f"{kernel.shader}: push constants {len(push)} B > {kernel.push_bytes} B")
        limit = self.device.info.max_workgroup_count
        if any(g < 1 or g > m for g, m in zip(groups, limit)):
            raise ValueError(f"{kernel.shader}: workgroup count {groups} outside 1..{limit}")
        max_range = self.device.info.max_storage_buffer_range
        for v in views:
            if v.offset % self.device.alignment:
                raise ValueError(f"{kernel.shader}: buffer offset {v.offset} not aligned to {self.device.alignment}")
            if v.size > max_range:
                raise ValueError(f"{kernel.shader}: binding of {v.size} B exceeds this device's "
                                 f"maxStorageBufferRange ({max_range} B)")
        stage = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
        reads = [v for v, a in zip(views, kernel.access) if "r" in a]
        writes = [v for v, a in zip(views, kernel.access) if "w" in a]
        self._sync(stage, reads, writes)

        dset = self._descriptor_set(pipeline)
        infos = [vk.VkDescriptorBufferInfo(buffer=v.buffer, offset=v.offset, range=v.size) for v in views]
        write_list = [
            vk.VkWriteDescriptorSet(
                dstSet=dset, dstBinding=i, descriptorCount=1,
                descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pBufferInfo=[infos[i]],
            )
            for i in range(len(views))
        ]
        vk.vkUpdateDescriptorSets(self.device.handle, len(write_list), write_list, 0, None)
        del write_list, infos

        vk.vkCmdBindPipeline(self.cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle)
        sets = [dset]
        vk.vkCmdBindDescriptorSets(self.cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1, sets, 0, None)
        if kernel.push_bytes:
            data = vk.ffi.new("char[]", push.ljust(kernel.push_bytes, b"\0"))
            vk.vkCmdPushConstants(self.cmd, pipeline.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                  kernel.push_bytes, data)
        vk.vkCmdDispatch(self.cmd, *groups)
        self.dispatch_count += 1
        self.command_count += 1
        if self.profile:
            self._timestamp(label or kernel.shader, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT)

    def copy(self, src: BufferView, dst: BufferView, label: str = "copy") -> None:
        """Record a buffer-to-buffer copy of src.size bytes (dst must be at least as large)."""
        vk = binding()
        self._require_recording()
        if dst.size < src.size:
            raise ValueError(f"copy of {src.size} B into {dst.size} B")
        self._sync(vk.VK_PIPELINE_STAGE_TRANSFER_BIT, [src], [BufferView(dst.buffer, dst.offset, src.size)])
        region = [vk.VkBufferCopy(srcOffset=src.offset, dstOffset=dst.offset, size=src.size)]
        vk.vkCmdCopyBuffer(self.cmd, src.buffer, dst.buffer, 1, region)
        self.command_count += 1
        if self.profile:
            self._timestamp(label, vk.VK_PIPELINE_STAGE_TRANSFER_BIT)

    def end(self) -> None:
        """Finish recording: make every write visible to the host and to the next replay."""
        vk = binding()
        self._require_recording()
        self._barrier(vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                      vk.VK_PIPELINE_STAGE_HOST_BIT | vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                      vk.VK_ACCESS_MEMORY_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_MEMORY_READ_BIT)
        call(vk.vkEndCommandBuffer, self.cmd)
        self.ended = True
        self._pending.clear()

    # -- running ----------------------------------------------------------------------------------------------

    def submit(self) -> None:
        """Start the recorded work (ends recording first if needed). Never blocks."""
        vk = binding()
        if not self.ended:
            self.end()
        if self._in_flight:
            raise RecorderStateError("submit() while the previous submission is still running: wait() first")
        if self.device.fail_next_submit is not None:
            result, self.device.fail_next_submit = self.device.fail_next_submit, None
            raise vulkan_error("vkQueueSubmit", f"{result} (injected)")
        # Raw calls: the binding's wrappers convert their arguments anew on every call, and a request submits
        # several times; the fence array and submit info were built once, in __init__.
        check(vk.lib.vkResetFences(self.device.handle, 1, self._fences), "vkResetFences")
        check(vk.lib.vkQueueSubmit(self.device.queue, 1, self._submit_ptr, self.fence), "vkQueueSubmit")
        self._in_flight = True

    def wait(self, timeout_s: float = 60.0) -> None:
        """Block until the submission finished; VulkanError VK_TIMEOUT after `timeout_s`."""
        vk = binding()
        if not self._in_flight:
            return
        started = time.perf_counter()
        result = vk.lib.vkWaitForFences(self.device.handle, 1, self._fences, vk.VK_TRUE, int(timeout_s * 1e9))
        check(result, "vkWaitForFences")
        self.device.wait_seconds += time.perf_counter() - started
        self._in_flight = False

    def run(self) -> None:
        self.submit()
        self.wait()

    def timings(self) -> list[Timing]:
        """GPU time of every recorded command in the last completed submission (profile=True only)."""
        vk = binding()
        if not self.profile or self._in_flight or not self.ended:
            return []
        stamps: list[int] = []
        for i, pool in enumerate(self._query_pools):
            count = min(QUERIES_PER_POOL, len(self._labels) - i * QUERIES_PER_POOL)
            data = vk.ffi.new("uint64_t[]", count)
            flags = vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT
            result = vk.lib.vkGetQueryPoolResults(self.device.handle, pool, 0, count, 8 * count, data, 8, flags)
            check(result, "vkGetQueryPoolResults")
            stamps.extend(data)
        period = self.device.info.timestamp_period_ns
        return [Timing(self._labels[i], (stamps[i] - stamps[i - 1]) * period / 1e6) for i in range(1, len(stamps))]

    def close(self) -> None:
        """Wait for any submission, then free the command buffer, fence, descriptor and query pools."""
        vk = binding()
        if self.cmd is None:
            return
        dev = self.device.handle
        if self._in_flight:
            self.wait()
        vk.vkFreeCommandBuffers(dev, self.device.command_pool, 1, [self.cmd])
        vk.vkDestroyFence(dev, self.fence, None)
        for pool in self._descriptor_pools:
            vk.vkDestroyDescriptorPool(dev, pool, None)
        for pool in self._query_pools:
            vk.vkDestroyQueryPool(dev, pool, None)
        self.cmd = None
        self.device.live["recorder"] -= 1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
