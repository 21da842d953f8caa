"""What a closed Recorder hands back for the next one to take: its descriptor pool (its command buffer goes back
to its stream: vk/streams.py); the fences every submission borrows until it is seen done; and the pairs of
timestamps that time each recording's execution (the device's GPU busy time). Creating them costs the driver
more than filling them (on the H200 host a fence 0.29 ms, a kernel object; a descriptor pool about as much to
create and destroy),
and a plan is recorded per new input shape while an evicted plan is closed, on the request path. A device keeps
a few of each; a fence is only held while a submission runs, so a cache of hundreds of plans needs no more
fences than submissions in flight.

Taken objects are reused as they are: a fence is reset before every submission, and a descriptor pool is reset
(freeing the sets of its last recording, whose command buffer was closed first) before it is handed out.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from vkocr.engine.loader import binding, check

if TYPE_CHECKING:
    from vkocr.engine.device import Device

KEEP = 16  # of each kind: more than a worker's plans in flight between two evictions
BUSY_QUERIES = 8192  # two timestamps per live recording (its start and end): 4,096 recordings, 64 KiB
SET_STEP, DESCRIPTOR_STEP = 64, 256  # pools are made in these steps, so that one fits many recordings


def rounded_up(n: int, step: int) -> int:
    return max(step, -(-n // step) * step)


class RecordingSlots:
    """Spare fences and descriptor pools of one device, and its timestamp pairs. Thread-safe."""

    def __init__(self, device: Device, keep: int = KEEP) -> None:
        self.device, self.keep = device, keep
        self._lock = threading.Lock()
        self._fences: list[Any] = []  # VkFence[1] cdata arrays, not in flight
        self._pools: list[tuple[Any, int, int]] = []  # (VkDescriptorPool, max sets, descriptors)
        self._busy_pool: Any = None  # VkQueryPool of BUSY_QUERIES timestamps, made on first use
        self._busy_free: list[int] = []  # first query of each free pair

    def take_fence(self) -> Any:
        """A fence (VkFence[1]) for one submission, not in flight and in any state (the caller resets it): a
        kept one, else a new one."""
        with self._lock:
            if self._fences:
                return self._fences.pop()
        vk = binding()
        info = vk.ffi.new("VkFenceCreateInfo*", {"sType": vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO})
        fences = vk.ffi.new("VkFence[1]")
        check(vk.lib.vkCreateFence(self.device.handle, info, vk.ffi.NULL, fences), "vkCreateFence")
        return fences

    def give_fence(self, fences: Any) -> None:
        """Back from a submission that is done (or never started); kept, or destroyed when enough are kept."""
        with self._lock:
            if len(self._fences) < self.keep:
                self._fences.append(fences)
                return
        binding().lib.vkDestroyFence(self.device.handle, fences[0], binding().ffi.NULL)

    def take_busy_queries(self) -> tuple[Any, int] | None:
        """A pair of timestamp queries for one recording's start and end: (VkQueryPool, first index), from one
        pool of the device (a pool per recording would cost the driver a kernel object per new shape); None
        on a queue without timestamps, or when every pair is taken (that recording is then not timed)."""
        if self.device.timestamp_bits == 0:
            return None
        with self._lock:
            if self._busy_pool is None:
                vk = binding()
                info = vk.ffi.new("VkQueryPoolCreateInfo*", {
                    "sType": vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, "queryType": vk.VK_QUERY_TYPE_TIMESTAMP,
                    "queryCount": BUSY_QUERIES})
                pools = vk.ffi.new("VkQueryPool[1]")
                check(vk.lib.vkCreateQueryPool(self.device.handle, info, vk.ffi.NULL, pools), "vkCreateQueryPool")
                self._busy_pool = pools[0]
                self._busy_free = list(range(BUSY_QUERIES - 2, -1, -2))  # the lowest pair is taken first
            if not self._busy_free:
                return None
            return self._busy_pool, self._busy_free.pop()

    def give_busy_queries(self, first: int) -> None:
        """The pair of a closed recording (its command buffer no longer runs)."""
        with self._lock:
            self._busy_free.append(first)

    def take_pool(self, sets: int, descriptors: int) -> Any:
        """A reset descriptor pool for `sets` sets of `descriptors` storage buffers in all: the smallest kept one
        that fits (the newest of equals), else a new one (rounded up, so that it fits the next recordings too)."""
        vk = binding()
        with self._lock:
            # newest first among equals, as with command buffers: the one just given back is warm in caches
            fits = [p for p in reversed(self._pools) if p[1] >= sets and p[2] >= descriptors]
            if fits:
                chosen = min(fits, key=lambda p: (p[1], p[2]))
                self._pools.remove(chosen)
        if fits:
            check(vk.lib.vkResetDescriptorPool(self.device.handle, chosen[0], 0), "vkResetDescriptorPool")
            return chosen
        ffi = vk.ffi
        max_sets, count = rounded_up(sets, SET_STEP), rounded_up(descriptors, DESCRIPTOR_STEP)
        sizes = ffi.new("VkDescriptorPoolSize*", {"type": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                  "descriptorCount": count})
        info = ffi.new("VkDescriptorPoolCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, "maxSets": max_sets, "poolSizeCount": 1,
            "pPoolSizes": sizes})
        pools = ffi.new("VkDescriptorPool[1]")
        check(vk.lib.vkCreateDescriptorPool(self.device.handle, info, ffi.NULL, pools), "vkCreateDescriptorPool")
        return pools[0], max_sets, count

    def give_pool(self, pool: tuple[Any, int, int]) -> None:
        """Keep a pool whose sets no live command buffer uses any more, or destroy it when enough are kept."""
        with self._lock:
            if len(self._pools) < self.keep:
                self._pools.append(pool)
                return
        binding().lib.vkDestroyDescriptorPool(self.device.handle, pool[0], binding().ffi.NULL)

    def close(self) -> None:
        """Free everything kept."""
        vk = binding()
        with self._lock:
            fences, pools = self._fences, self._pools
            self._fences, self._pools = [], []
            busy, self._busy_pool, self._busy_free = self._busy_pool, None, []
        for fence in fences:
            vk.lib.vkDestroyFence(self.device.handle, fence[0], vk.ffi.NULL)
        for pool, _, _ in pools:
            vk.lib.vkDestroyDescriptorPool(self.device.handle, pool, vk.ffi.NULL)
        if busy is not None:
            vk.lib.vkDestroyQueryPool(self.device.handle, busy, vk.ffi.NULL)

