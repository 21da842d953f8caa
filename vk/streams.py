"""Streams: a queue of the device and a command pool of its own, so that several threads can record and submit
at once, and the GPU can run their work side by side.

Work submitted on one stream runs in submission order (each recording starts with a full barrier). Work on
two streams is unordered: when they map to two Vulkan queues the GPU may run it at the same time, which is how
one device context keeps several requests' stages on the GPU at once (NVIDIA time-slices separate device
contexts instead: BENCHMARKS.md, session 19). A device has as many streams as it is asked for; when its
compute family has fewer queues than that, streams share queues (each submission holds its queue's lock), and
still record on their own pools.

A stream is driven by one thread at a time, as a rule, but every call here is safe from any thread: the pool's
lock guards recording, allocating and freeing its command buffers (Vulkan wants the pool externally
synchronised), the queue's lock guards submissions.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from vkocr.engine.loader import binding, call, check

if TYPE_CHECKING:
    from vkocr.engine.device import Device

KEEP_COMMANDS = 16  # spare command buffers kept per stream: more than its plans in flight between two evictions


class Stream:
    """One queue (shared with other streams when the device has fewer) and one command pool."""

    def __init__(self, device: Device, index: int, queue: Any, queue_lock: threading.Lock) -> None:
        vk = binding()
        self.device, self.index = device, index
        self.queue = queue  # VkQueue
        self.queue_lock = queue_lock  # one per VkQueue: vkQueueSubmit wants the queue externally synchronised
        self.pool_lock = threading.Lock()
        pool_info = vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=device.queue_family)
        self.command_pool = call(vk.vkCreateCommandPool, device.handle, pool_info, None)
        self._spare: list[Any] = []  # VkCommandBuffer[1] cdata arrays of closed recordings
        self.wait_seconds = 0.0  # time hosts spent blocked on this stream's fences
        self.gpu_busy_seconds = 0.0  # the spans of this stream's finished recordings (their timestamps)

    def take_commands(self) -> Any:
        """A command buffer of this stream's pool, in a one-element array: a closed recording's, else a new one."""
        vk = binding()
        with self.pool_lock:
            if self._spare:
                return self._spare.pop()
            ffi = vk.ffi
            alloc_info = ffi.new("VkCommandBufferAllocateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, "commandPool": self.command_pool,
                "level": vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, "commandBufferCount": 1})
            cmds = ffi.new("VkCommandBuffer[1]")
            check(vk.lib.vkAllocateCommandBuffers(self.device.handle, alloc_info, cmds), "vkAllocateCommandBuffers")
            return cmds

    def give_commands(self, cmds: Any) -> None:
        """Keep a command buffer that no longer runs for the next recording, or free it when enough are kept."""
        with self.pool_lock:
            if len(self._spare) < KEEP_COMMANDS:
                self._spare.append(cmds)
                return
            binding().lib.vkFreeCommandBuffers(self.device.handle, self.command_pool, 1, cmds)

    def submit(self, submit_info: Any, fence: Any) -> int:
        """vkQueueSubmit of one prepared VkSubmitInfo*; the VkResult."""
        with self.queue_lock:
            return int(binding().lib.vkQueueSubmit(self.queue, 1, submit_info, fence))

    def close(self) -> None:
        """Destroy the pool (its command buffers with it); the device waits idle first."""
        vk = binding()
        with self.pool_lock:
            self._spare.clear()
            if self.command_pool is not None:
                vk.vkDestroyCommandPool(self.device.handle, self.command_pool, None)
                self.command_pool = None


class BusyClock:
    """The time the GPU was busy with any stream's work: the union of the recordings' spans (start and end
    timestamps, in ns of the device's clock), so that two streams running at once count once. Spans are added
    as their submissions are seen done, nearly in order of their starts; a span that starts before the latest
    end seen counts only past that end, so the union is exact for spans added in start order and an
    underestimate by at most the overlap otherwise."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._end = 0
        self._lock = threading.Lock()

    def add(self, start_ns: int, end_ns: int) -> None:
        with self._lock:
            if end_ns <= self._end:
                return
            self.seconds += (end_ns - max(start_ns, self._end)) * 1e-9
            self._end = end_ns
