"""Pooled GPU memory: a few big VkDeviceMemory blocks, each bound to one VkBuffer and sub-allocated by offset.

Three kinds of arena: `device` (device-local, where tensors and weights live), `upload` and `readback`
(host-visible, persistently mapped staging). Offsets are aligned to lcm(minStorageBufferOffsetAlignment,
nonCoherentAtomSize) so every allocation can be bound as a descriptor and flushed on its own.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from vkocr.engine.errors import EngineError, OutOfMemory
from vkocr.engine.loader import binding, call
from vkocr.log import get_logger

if TYPE_CHECKING:
    from vkocr.engine.device import Device

log = get_logger(__name__)

KINDS = ("device", "upload", "readback")
DEFAULT_ARENA_BYTES = 64 << 20


class BufferView(NamedTuple):
    """A byte range of one VkBuffer: what a descriptor binds and what a copy reads or writes. A NamedTuple: a
    plan makes several per value on the request path, and a frozen dataclass costs twice as much to build."""

    buffer: Any
    offset: int
    size: int
    extent: int | None = None  # bytes barriers are worked out over (a tensor's whole slot): `size` when None

    @property
    def end(self) -> int:
        """Where the bytes barriers are worked out over end."""
        return self.offset + (self.size if self.extent is None else self.extent)


@dataclass(frozen=True)
class MemoryStats:
    reserved: int
    in_use: int
    peak: int


class Allocation:
    """One sub-range of an arena. Host-visible allocations expose `array()` over the mapped bytes."""

    __slots__ = ("arena", "offset", "size", "nbytes", "view")

    def __init__(self, arena: Arena, offset: int, size: int, nbytes: int) -> None:
        self.arena = arena
        self.offset = offset
        self.size = size  # aligned size actually reserved
        self.nbytes = nbytes  # size asked for
        self.view = BufferView(arena.buffer, offset, nbytes, size)

    def array(self, dtype: Any = np.float32, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """A NumPy view of the mapped bytes (host-visible arenas only); writes go straight to the GPU's memory."""
        if self.arena.mapped is None:
            raise EngineError("array() needs a host-visible (upload/readback) allocation")
        dt = np.dtype(dtype)
        count = self.nbytes // dt.itemsize
        arr = np.frombuffer(self.arena.mapped, dtype=dt, count=count, offset=self.offset)
        return arr.reshape(shape) if shape is not None else arr

    def sub(self, offset: int, nbytes: int, reserved: int | None = None) -> Allocation:
        """Bytes [offset, offset + nbytes) of this allocation, e.g. one tensor of a planned arena, owning
        `reserved` bytes there when given (its slot in the placement: barriers are worked out over them). Free the
        parent allocation, never a sub-range (the arena does not know it)."""
        if offset < 0 or nbytes < 0 or offset + nbytes > self.size or offset % self.arena.alignment != 0:
            raise ValueError(f"sub-range [{offset}, {offset + nbytes}) outside this {self.size} B allocation "
                             f"or not aligned to {self.arena.alignment}")
        if reserved is not None:
            if reserved < nbytes or offset + reserved > self.size:
                raise ValueError(f"slot of {reserved} B at {offset} for {nbytes} B in a {self.size} B allocation")
            return Allocation(self.arena, self.offset + offset, reserved, nbytes)
        alignment = self.arena.alignment
        rounded = math.ceil(max(nbytes, 1) / alignment) * alignment  # at least one block, as Arena.alloc reserves
        room = self.size - offset
        # A room of whole aligned blocks holds the rounded size whenever it holds nbytes (checked above): only a
        # short last block clamps it. (So a symbolic size is not compared with the allocation's end.)
        size = rounded if room >= alignment and room % alignment == 0 else min(room, rounded)
        return Allocation(self.arena, self.offset + offset, size, nbytes)

    def flush(self) -> None:
        """Make host writes visible to the device (a no-op on coherent memory)."""
        self.arena.flush_range(self.offset, self.size, invalidate=False)

    def invalidate(self) -> None:
        """Make device writes visible to the host (a no-op on coherent memory)."""
        self.arena.flush_range(self.offset, self.size, invalidate=True)


def find_memory_type(device: Device, type_bits: int, required: int, preferred: int = 0, avoid: int = 0) -> int:
    """The memory type index with every `required` flag, most `preferred` flags and fewest `avoid` flags."""
    props = device.memory_properties
    best, best_score = -1, None
    for i in range(props.memoryTypeCount):
        flags = props.memoryTypes[i].propertyFlags
        if not (type_bits >> i) & 1 or flags & required != required:
            continue
        score = ((flags & preferred).bit_count(), -(flags & avoid).bit_count())
        if best_score is None or score > best_score:
            best, best_score = i, score
    if best < 0:
        raise OutOfMemory("find_memory_type", f"no memory type with flags 0x{required:x} (bits 0x{type_bits:x})")
    return best


class Arena:
    """One VkDeviceMemory + one VkBuffer over all of it, handed out first-fit with coalescing frees."""

    def __init__(self, device: Device, size: int, kind: str) -> None:
        vk = binding()
        self.device, self.kind, self.alignment = device, kind, device.alignment
        self.size = size
        usage = (
            vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        )
        info = vk.VkBufferCreateInfo(size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        self.buffer: Any = call(vk.vkCreateBuffer, device.handle, info, None)
        self.memory = None
        try:
            req = vk.vkGetBufferMemoryRequirements(device.handle, self.buffer)
            host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
            coherent = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
            local = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
            if kind == "device":  # avoid the small host-visible BAR heap when plain VRAM exists
                type_index = find_memory_type(device, req.memoryTypeBits, local, avoid=host)
            elif kind == "upload":
                type_index = find_memory_type(device, req.memoryTypeBits, host, preferred=coherent)
            else:
                cached = vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
                type_index = find_memory_type(device, req.memoryTypeBits, host, preferred=cached | coherent)
            self.coherent = bool(device.memory_properties.memoryTypes[type_index].propertyFlags & coherent)
            alloc_info = vk.VkMemoryAllocateInfo(allocationSize=req.size, memoryTypeIndex=type_index)
            self.memory = call(vk.vkAllocateMemory, device.handle, alloc_info, None)
            call(vk.vkBindBufferMemory, device.handle, self.buffer, self.memory, 0)
            self.mapped = call(vk.vkMapMemory, device.handle, self.memory, 0, size, 0) if kind != "device" else None
        except BaseException:
            self._destroy()
            raise
        self._free: list[tuple[int, int]] = [(0, size)]  # (offset, size), sorted by offset
        self.in_use = 0
        device.live["arena"] += 1

    def alloc(self, nbytes: int) -> Allocation | None:
        size = max(self.alignment, math.ceil(nbytes / self.alignment) * self.alignment)
        for i, (off, free) in enumerate(self._free):
            if free >= size:
                if free == size:
                    del self._free[i]
                else:
                    self._free[i] = (off + size, free - size)
                self.in_use += size
                return Allocation(self, off, size, nbytes)
        return None

    def release(self, a: Allocation) -> None:
        blocks = self._free
        i = 0
        while i < len(blocks) and blocks[i][0] < a.offset:
            i += 1
        blocks.insert(i, (a.offset, a.size))
        # merge with the next block, then with the previous one
        if i + 1 < len(blocks) and blocks[i][0] + blocks[i][1] == blocks[i + 1][0]:
            blocks[i] = (blocks[i][0], blocks[i][1] + blocks[i + 1][1])
            del blocks[i + 1]
        if i > 0 and blocks[i - 1][0] + blocks[i - 1][1] == blocks[i][0]:
            blocks[i - 1] = (blocks[i - 1][0], blocks[i - 1][1] + blocks[i][1])
            del blocks[i]
        self.in_use -= a.size

    def flush_range(self, offset: int, size: int, *, invalidate: bool) -> None:
        if self.coherent or self.mapped is None:
            return
        vk = binding()
        atom = self.device.info.non_coherent_atom_size
        start = offset // atom * atom
        end = min(self.size, math.ceil((offset + size) / atom) * atom)
        rng = vk.VkMappedMemoryRange(memory=self.memory, offset=start, size=end - start)
        fn = vk.vkInvalidateMappedMemoryRanges if invalidate else vk.vkFlushMappedMemoryRanges
        call(fn, self.device.handle, 1, [rng])

    def _destroy(self) -> None:
        vk = binding()
        if getattr(self, "mapped", None) is not None:
            vk.vkUnmapMemory(self.device.handle, self.memory)
            self.mapped = None
        if self.buffer is not None:
            vk.vkDestroyBuffer(self.device.handle, self.buffer, None)
            self.buffer = None
        if self.memory is not None:
            vk.vkFreeMemory(self.device.handle, self.memory, None)
            self.memory = None

    def close(self) -> None:
        self._destroy()
        self.device.live["arena"] -= 1


class MemoryPool:
    """Arenas per kind, grown on demand; statistics of bytes reserved, in use and at peak. Thread-safe: the
    device's streams are driven from threads of their own (vk/streams.py)."""

    def __init__(self, device: Device, arena_bytes: int = DEFAULT_ARENA_BYTES) -> None:
        self.device = device
        self.arena_bytes = arena_bytes
        self.arenas: dict[str, list[Arena]] = {k: [] for k in KINDS}
        self._peak = dict.fromkeys(KINDS, 0)
        self._lock = threading.RLock()

    def alloc(self, nbytes: int, kind: str = "device") -> Allocation:
        if kind not in KINDS:
            raise ValueError(f"memory kind must be one of {KINDS}, not {kind!r}")
        if nbytes <= 0:
            raise ValueError(f"allocation size must be positive, got {nbytes}")
        with self._lock:
            return self._alloc(nbytes, kind)

    def _alloc(self, nbytes: int, kind: str) -> Allocation:
        for arena in self.arenas[kind]:
            a = arena.alloc(nbytes)
            if a is not None:
                break
        else:
            size = max(self.arena_bytes, math.ceil(nbytes / self.device.alignment) * self.device.alignment)
            arena = Arena(self.device, size, kind)
            self.arenas[kind].append(arena)
            log.debug("arena_created", kind=kind, mib=round(size / (1 << 20), 1))
            a = arena.alloc(nbytes)
            assert a is not None
        self._peak[kind] = max(self._peak[kind], self.stats(kind).in_use)
        return a

    def free(self, a: Allocation) -> None:
        with self._lock:
            a.arena.release(a)

    def stats(self, kind: str | None = None) -> MemoryStats:
        """Bytes reserved from the driver, handed out now, and the most ever handed out (one kind or all)."""
        kinds = KINDS if kind is None else (kind,)
        with self._lock:
            reserved = sum(a.size for k in kinds for a in self.arenas[k])
            in_use = sum(a.in_use for k in kinds for a in self.arenas[k])
            peak = sum(self._peak[k] for k in kinds) if kind is None else self._peak[kind]
        return MemoryStats(reserved=reserved, in_use=in_use, peak=peak)

    def trim(self) -> None:
        """Give empty arenas back to the driver."""
        with self._lock:
            for arenas in self.arenas.values():
                for arena in [a for a in arenas if a.in_use == 0]:
                    arena.close()
                    arenas.remove(arena)

    def close(self) -> None:
        with self._lock:
            for arenas in self.arenas.values():
                for arena in arenas:
                    arena.close()
                arenas.clear()
