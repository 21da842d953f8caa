"""The commands a Recorder collects (dispatches, barriers, copies, timestamps) and their encoding into a Vulkan
command buffer: every descriptor set of a recording written in one allocation and one update, then the
commands recorded with raw calls into the binding (its Python wrappers build every struct anew and cost more
than the driver; a plan is recorded per input shape, so this is on the request path).

Kept apart from vk/recorder.py, which decides what to record (checks, barriers) and runs it (submit, wait,
timings).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from functools import cache, reduce
from operator import or_
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from vkocr.engine.loader import binding, check
from vkocr.engine.memory import BufferView
from vkocr.engine.pipeline import Pipeline

if TYPE_CHECKING:
    from vkocr.engine.device import Device


class Dispatch(NamedTuple):
    """One compute dispatch: `views` bind to bindings 0..n-1 in order."""

    pipeline: Pipeline
    views: tuple[BufferView, ...]
    push: bytes  # padded to the kernel's push-constant size (a symbolic.Packed while a shape class is traced)
    groups: tuple[int, int, int]


class Barrier(NamedTuple):
    """One global memory barrier."""

    src_stage: int
    dst_stage: int
    src_access: int
    dst_access: int


class Copy(NamedTuple):
    """One buffer-to-buffer copy of src.size bytes."""

    src: BufferView
    dst: BufferView


class Timestamp(NamedTuple):
    """One timestamp of a profiling recording, written after the command before it."""

    stage: int


class Commands(NamedTuple):
    """What a Recorder collected, ready to encode: its commands in order, the timestamp labels (profiling
    only) and the counts."""

    ops: list[Dispatch | Barrier | Copy | Timestamp]
    labels: tuple[str, ...]
    dispatch_count: int
    command_count: int
    descriptor_count: int


def interleave(recordings: Sequence[Commands]) -> Commands:
    """Several recordings as one, for one submission: the commands of every recording between its i-th and
    (i+1)-th barrier run side by side, behind one barrier that orders what each of theirs did (the union of
    their stages and accesses). The recordings must touch disjoint memory: nothing orders one's commands
    against another's. A GPU that runs one small dispatch at a time half idle fills with the others' (a
    recording's barriers, not its dispatches, set the pace of a small batch)."""
    if any(r.labels for r in recordings):
        raise ValueError("timestamped (profiling) recordings cannot be interleaved")
    split = [_between_barriers(r.ops) for r in recordings]
    ops: list[Dispatch | Barrier | Copy | Timestamp] = []
    for i in range(max((len(segments) for segments, _ in split), default=0)):
        for segments, _ in split:
            if i < len(segments):
                ops.extend(segments[i])
        ending = [barriers[i] for _, barriers in split if i < len(barriers)]
        if ending:
            ops.append(Barrier(*(reduce(or_, masks) for masks in zip(*ending))))
    return Commands(ops, (), sum(r.dispatch_count for r in recordings), sum(r.command_count for r in recordings),
                    sum(r.descriptor_count for r in recordings))


def _between_barriers(ops: Sequence[Dispatch | Barrier | Copy | Timestamp]
                      ) -> tuple[list[list[Dispatch | Barrier | Copy | Timestamp]], list[Barrier]]:
    """The commands between one barrier and the next (one list more than there are barriers), and the barriers."""
    segments: list[list[Dispatch | Barrier | Copy | Timestamp]] = [[]]
    barriers: list[Barrier] = []
    for op in ops:
        if isinstance(op, Barrier):
            barriers.append(op)
            segments.append([])
        else:
            segments[-1].append(op)
    return segments, barriers


def packing(commands: Commands, region: BufferView, alignment: int) -> tuple[list[tuple[BufferView, int]], int]:
    """Where the views these commands bind inside `region` go when packed: each cluster of overlapping views (one
    value's, or the values that take turns in one slot) as a range of `region` and its new offset, aligned, and
    the bytes they need. Views overlap after the move exactly where they did before, so the recording stays
    right; a plan whose placement was made for a larger shape needs only what its own tensors hold."""
    lo_region, hi_region = region.offset, region.offset + (region.extent or region.size)
    spans = sorted({(v.offset, v.offset + v.size) for op in commands.ops for v in _views_of(op)
                    if v.buffer == region.buffer and lo_region <= v.offset < hi_region and v.size})
    clusters: list[tuple[BufferView, int]] = []
    cursor = 0
    start = end = -1
    for lo, hi in [*spans, (hi_region + 1, hi_region + 1)]:  # a sentinel closes the last cluster
        if lo < end:
            end = max(end, hi)
            continue
        if end > start >= 0:
            clusters.append((BufferView(region.buffer, start, end - start), cursor))
            cursor = -(-(cursor + end - start) // alignment) * alignment
        start, end = lo, hi
    return clusters, cursor


def relocate(commands: Commands, moves: Sequence[tuple[BufferView, BufferView]]) -> Commands:
    """These commands with every view inside a move's first range moved to the same place in its second: a
    recording of one memory layout run in a copy of that memory (the same offsets within each range). The moves'
    first ranges must not overlap; the views keep their bound size and drop their slot's (the barriers were
    worked out when the commands were collected)."""
    by_buffer: dict[Any, list[tuple[int, int, BufferView]]] = {}
    for old, new in moves:
        by_buffer.setdefault(old.buffer, []).append((old.offset, old.offset + (old.extent or old.size), new))
    for ranges in by_buffer.values():
        ranges.sort(key=lambda r: r[0])
    starts = {buffer: [lo for lo, _, _ in ranges] for buffer, ranges in by_buffer.items()}
    moved_views: dict[BufferView, BufferView] = {}  # a tensor's view recurs in every dispatch that binds it

    def moved(v: BufferView) -> BufferView:
        found = moved_views.get(v)
        if found is not None:
            return found
        found = v
        ranges = by_buffer.get(v.buffer)
        if ranges:
            k = bisect_right(starts[v.buffer], v.offset) - 1
            if k >= 0 and v.offset < ranges[k][1]:
                lo, _, new = ranges[k]
                shift = v.offset - lo
                if shift + v.size > (new.extent or new.size):
                    raise ValueError(f"a view of {v.size} B at {shift} does not fit the {new.extent or new.size} "
                                     "B it moves to")
                found = BufferView(new.buffer, new.offset + shift, v.size)
        moved_views[v] = found
        return found

    ops: list[Dispatch | Barrier | Copy | Timestamp] = []
    for op in commands.ops:
        if isinstance(op, Dispatch):
            ops.append(op._replace(views=tuple(moved(v) for v in op.views)))
        elif isinstance(op, Copy):
            ops.append(Copy(moved(op.src), moved(op.dst)))
        else:
            ops.append(op)
    return commands._replace(ops=ops)


def _views_of(op: Dispatch | Barrier | Copy | Timestamp) -> tuple[BufferView, ...]:
    return op.views if isinstance(op, Dispatch) else (op.src, op.dst) if isinstance(op, Copy) else ()


@cache
def _write_dtype(ffi: Any) -> np.dtype:
    """VkWriteDescriptorSet as a NumPy record (offsets from the binding's own struct layout)."""
    fields = {"sType": np.uint32, "dstSet": np.uint64, "descriptorCount": np.uint32, "descriptorType": np.uint32,
              "pBufferInfo": np.uint64}
    return np.dtype({"names": list(fields), "formats": list(fields.values()),
                     "offsets": [ffi.offsetof("VkWriteDescriptorSet", name) for name in fields],
                     "itemsize": ffi.sizeof("VkWriteDescriptorSet")})


def write_descriptor_sets(device: Device, dispatches: Sequence[Dispatch], descriptor_count: int) -> tuple[Any, Any]:
    """One set per dispatch, from one pool (the device's spare, or a new one), written in one update: the pool
    (for the Recorder to give back) and the sets, or (None, None) for a recording without dispatches."""
    vk = binding()
    ffi, lib, dev = vk.ffi, vk.lib, device.handle
    if not dispatches:
        return None, None
    pool = device.slots.take_pool(len(dispatches), max(1, descriptor_count))
    layouts = ffi.new("VkDescriptorSetLayout[]", [d.pipeline.set_layout for d in dispatches])
    alloc_info = ffi.new("VkDescriptorSetAllocateInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": pool[0],
        "descriptorSetCount": len(dispatches), "pSetLayouts": layouts})
    sets = ffi.new("VkDescriptorSet[]", len(dispatches))
    check(lib.vkAllocateDescriptorSets(dev, alloc_info, sets), "vkAllocateDescriptorSets")
    # The structs are filled as arrays of integers: field by field through cffi costs more than the driver.
    count = max(1, descriptor_count)
    infos = ffi.new("VkDescriptorBufferInfo[]", count)
    handles: dict[Any, int] = {}
    words: list[int] = []
    for d in dispatches:
        for v in d.views:
            handle = handles.get(v.buffer)
            if handle is None:
                handle = handles[v.buffer] = int(ffi.cast("uint64_t", v.buffer))
            words += (handle, v.offset, v.size)
    np.frombuffer(ffi.buffer(infos), np.uint64)[:len(words)] = words
    writes = ffi.new("VkWriteDescriptorSet[]", len(dispatches))
    table = np.frombuffer(ffi.buffer(writes), _write_dtype(ffi))
    table["sType"] = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
    table["descriptorType"] = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
    table["dstSet"] = np.frombuffer(ffi.buffer(sets), np.uint64)
    # One write fills bindings 0..n-1: an update rolls over into consecutive bindings of one type.
    bindings = np.array([len(d.views) for d in dispatches], np.uint64)
    table["descriptorCount"] = bindings
    first = np.concatenate(([0], np.cumsum(bindings)[:-1])).astype(np.uint64)
    table["pBufferInfo"] = int(ffi.cast("uint64_t", infos)) + first * ffi.sizeof("VkDescriptorBufferInfo")
    lib.vkUpdateDescriptorSets(dev, len(dispatches), writes, 0, ffi.NULL)
    return pool, sets


def encode_commands(cmd: Any, ops: Sequence[Dispatch | Barrier | Copy | Timestamp], sets: Any,
                    busy: tuple[Any, int] | None, query_pool: Any, timestamps: int) -> None:
    """Record `ops` into the command buffer `cmd` (its pool locked by the caller): dispatch i binds `sets[i]`;
    `busy` (query pool, first query) brackets the whole recording with two timestamps, and `query_pool` takes
    the `timestamps` per-command ones of a profiling recording."""
    vk = binding()
    ffi, lib = vk.ffi, vk.lib
    begin = ffi.new("VkCommandBufferBeginInfo*", {"sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO})
    check(lib.vkBeginCommandBuffer(cmd, begin), "vkBeginCommandBuffer")  # never ONE_TIME_SUBMIT: replayed
    if busy is not None:
        busy_pool, first = busy
        lib.vkCmdResetQueryPool(cmd, busy_pool, first, 2)
        lib.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, busy_pool, first)
    if timestamps:
        lib.vkCmdResetQueryPool(cmd, query_pool, 0, timestamps)
    compute, stage_bit = vk.VK_PIPELINE_BIND_POINT_COMPUTE, vk.VK_SHADER_STAGE_COMPUTE_BIT
    barriers: dict[tuple[int, int], Any] = {}
    keep = []  # copy regions stay alive until the buffer ends
    # every push-constant block in one buffer: one conversion instead of one per dispatch
    pushes = ffi.from_buffer(b"".join(op.push for op in ops if isinstance(op, Dispatch)) or b"\0")
    bound = None
    n_set = n_query = n_push = 0
    null = ffi.NULL
    for op in ops:
        if isinstance(op, Dispatch):
            pipeline, _views, push, groups = op
            if pipeline is not bound:
                lib.vkCmdBindPipeline(cmd, compute, pipeline.handle)
                bound = pipeline
            lib.vkCmdBindDescriptorSets(cmd, compute, pipeline.layout, 0, 1, sets + n_set, 0, null)
            n_set += 1
            if push:
                lib.vkCmdPushConstants(cmd, pipeline.layout, stage_bit, 0, len(push), pushes + n_push)
                n_push += len(push)
            lib.vkCmdDispatch(cmd, groups[0], groups[1], groups[2])
        elif isinstance(op, Barrier):
            key = (op.src_access, op.dst_access)
            if key not in barriers:
                barriers[key] = ffi.new("VkMemoryBarrier*", {
                    "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER, "srcAccessMask": op.src_access,
                    "dstAccessMask": op.dst_access})
            lib.vkCmdPipelineBarrier(cmd, op.src_stage, op.dst_stage, 0, 1, barriers[key], 0, null, 0, null)
        elif isinstance(op, Copy):
            region = ffi.new("VkBufferCopy*", {"srcOffset": op.src.offset, "dstOffset": op.dst.offset,
                                               "size": op.src.size})
            keep.append(region)
            lib.vkCmdCopyBuffer(cmd, op.src.buffer, op.dst.buffer, 1, region)
        else:
            lib.vkCmdWriteTimestamp(cmd, op.stage, query_pool, n_query)
            n_query += 1
    if busy is not None:
        lib.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, busy_pool, first + 1)
    check(lib.vkEndCommandBuffer(cmd), "vkEndCommandBuffer")
    del keep, pushes
