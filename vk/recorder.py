"""A Recorder is one command buffer: many dispatches and copies, recorded once, submitted again and again.

`dispatch()`/`copy()` only collect commands (they never block); `end()` writes every descriptor set of the
recording in one allocation and one update, then records the command buffer with raw calls into the binding
(vk/commands.py: the command records and their encoding). `submit()` starts it, `wait()` blocks on its fence.
Barriers are inserted where a command touches a range that an earlier, unbarriered command wrote (RAW, WAW)
or that it read (WAR), so independent dispatches run back to back. With `profile=True` a timestamp is written
after every command, and `timings()` gives each command's GPU time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from vkocr.engine.commands import Barrier, Commands, Copy, Dispatch, Timestamp, encode_commands, write_descriptor_sets
from vkocr.engine.errors import BindingTooLarge, RecorderStateError, vulkan_error
from vkocr.engine.loader import binding, call, check
from vkocr.engine.memory import BufferView
from vkocr.engine.pipeline import Pipeline

if TYPE_CHECKING:
    from vkocr.engine.device import Device
    from vkocr.engine.streams import Stream

_COMPUTE_STAGE = 0x800  # VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, without importing the binding here
DESCRIPTOR_BYTES_ESTIMATE = 64  # driver memory per storage-buffer descriptor, for plan-cache accounting
COMMAND_BYTES_ESTIMATE = 96  # command-buffer memory per recorded command (bind, push, dispatch, barrier)


# An unbarriered access: (buffer, lo, hi, stage, write). A plain tuple: a plan records one per binding, on the
# request path, and a NamedTuple's construction and attribute reads cost several times more.
_Access = tuple[Any, int, int, int, bool]


def _conflicts(views: Sequence[BufferView], pending: Sequence[_Access], *, writes_only: bool) -> bool:
    """True when a view overlaps a pending access (only pending writes count when `writes_only`: a read after a
    read needs no barrier)."""
    for v in views:
        lo = v.offset
        hi = v.end  # over a tensor's slot: the same barriers for every shape of a class
        buffer = v.buffer
        for p_buffer, p_lo, p_hi, _stage, p_write in pending:
            if p_lo < hi and lo < p_hi and (p_write or not writes_only) and p_buffer == buffer:
                return True
    return False


@dataclass(frozen=True)
class Timing:
    label: str
    ms: float


class Recorder:
    """Record into one reusable command buffer of `stream` (the device's default stream when None), submitted
    on its queue. Use as a context manager, or call `close()`."""

    def __init__(self, device: Device, *, profile: bool = False, stream: Stream | None = None) -> None:
        vk = binding()
        self.device = device
        self.stream = stream if stream is not None else device.default_stream
        self._descriptor_pool: Any = None
        self._query_pool: Any = None
        self._labels: list[str] = []
        self._ops: list[Dispatch | Barrier | Copy | Timestamp] = []  # in recording order
        self._pending: list[_Access] = []
        self._in_flight = False
        self.ended = False
        self._kernel_names: frozenset[str] = frozenset()  # set by end(), which drops _ops
        self._op_count = 0
        self.profile = profile and device.info.timestamps_supported
        self.dispatch_count = 0
        self.command_count = 0  # dispatches and copies: with profile=True, one timestamp each
        self.descriptor_count = 0
        info = device.info  # read once: dispatch() checks every command against them
        self._group_limit = tuple(info.max_workgroup_count)
        self._alignment, self._max_range = device.alignment, info.max_storage_buffer_range
        self._submit_cmds = self.stream.take_commands()  # a closed Recorder's command buffer, when one is kept
        self.cmd = self._submit_cmds[0]
        self._fences: Any = None  # VkFence[1], the device's, held from submit() until wait() sees it signalled
        # two timestamps around the whole recording, for the device's GPU busy time (a profiling Recorder has
        # its own per command)
        self._busy = None if self.profile else device.slots.take_busy_queries()
        self._stamps = vk.ffi.new("uint64_t[2]") if self._busy is not None else None
        device.live["recorder"] += 1
        # Replays re-read and re-write the same ranges: order this submission after everything before it.
        self._ops.append(Barrier(vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                 vk.VK_ACCESS_MEMORY_WRITE_BIT,
                                 vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT))
        if self.profile:
            self._timestamp("start", vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT)
        self._submit_ptr = vk.ffi.new("VkSubmitInfo*", {  # for the raw vkQueueSubmit; holds _submit_cmds
            "sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 1, "pCommandBuffers": self._submit_cmds})

    @property
    def host_bytes_estimate(self) -> int:
        """Driver memory this recording holds (command buffer and descriptors), estimated."""
        commands = self._op_count if self.ended else len(self._ops)
        return COMMAND_BYTES_ESTIMATE * commands + DESCRIPTOR_BYTES_ESTIMATE * self.descriptor_count

    # -- collecting -------------------------------------------------------------------------------------------

    def _require_recording(self) -> None:
        if self.ended:
            raise RecorderStateError("recording after end(): create a new Recorder")

    def _sync(self, stage: int, reads: Sequence[BufferView], writes: Sequence[BufferView]) -> None:
        """Insert one global memory barrier if this command conflicts with an unbarriered earlier one."""
        pending = self._pending
        if pending and (_conflicts(writes, pending, writes_only=False) or _conflicts(reads, pending, writes_only=True)):
            vk = binding()
            transfer = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
            src_stage = src_access = 0
            for p in pending:
                src_stage |= p[3]
                if p[4]:
                    src_access |= vk.VK_ACCESS_TRANSFER_WRITE_BIT if p[3] == transfer else vk.VK_ACCESS_SHADER_WRITE_BIT
            # to both stages, whichever this command is: the barrier retires every pending access, and a later
            # command of the other stage may touch what this one does not (a shader reading a buffer, then a
            # copy of it)
            dst_access = (vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
                          | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
            self._ops.append(Barrier(src_stage, _COMPUTE_STAGE | transfer, src_access, dst_access))
            pending.clear()
        for v in reads:
            pending.append((v.buffer, v.offset, v.end, stage, False))
        for v in writes:
            pending.append((v.buffer, v.offset, v.end, stage, True))

    def _timestamp(self, label: str, stage: int) -> None:
        self._ops.append(Timestamp(stage))
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
        if self.ended:
            raise RecorderStateError("recording after end(): create a new Recorder")
        kernel = pipeline.kernel
        if len(views) != len(kernel.access):
            raise ValueError(f"{kernel.shader}: {len(kernel.access)} bindings, {len(views)} buffers given")
        if len(push) != kernel.push_bytes:
            if len(push) > kernel.push_bytes:
                raise ValueError(f"{kernel.shader}: push constants {len(push)} B > {kernel.push_bytes} B")
            push = push.ljust(kernel.push_bytes, b"\0")
        limit = self._group_limit
        if not (0 < groups[0] <= limit[0] and 0 < groups[1] <= limit[1] and 0 < groups[2] <= limit[2]):
            raise ValueError(f"{kernel.shader}: workgroup count {groups} outside 1..{limit}")
        alignment, max_range = self._alignment, self._max_range
        for v in views:
            if v.offset % alignment != 0 or v.size > max_range:  # (comparisons: a symbolic offset stays one)
                error = BindingTooLarge if v.size > max_range else ValueError
                raise error(f"{kernel.shader}: binding at offset {v.offset} of {v.size} B: offsets must be "
                                 f"aligned to {alignment} and sizes at most this device's maxStorageBufferRange "
                                 f"({max_range} B)")
        self._sync(_COMPUTE_STAGE, [views[i] for i in kernel.reads], [views[i] for i in kernel.writes])
        self._ops.append(Dispatch(pipeline, tuple(views), push, groups))
        self.dispatch_count += 1
        self.command_count += 1
        self.descriptor_count += len(views)
        if self.profile:
            self._timestamp(label or kernel.shader, _COMPUTE_STAGE)

    @property
    def kernels(self) -> set[str]:
        """The shaders this recording dispatches."""
        if self.ended:
            return set(self._kernel_names)
        return {op.pipeline.kernel.shader for op in self._ops if isinstance(op, Dispatch)}

    def copy(self, src: BufferView, dst: BufferView, label: str = "copy") -> None:
        """Record a buffer-to-buffer copy of src.size bytes (dst must be at least as large)."""
        vk = binding()
        self._require_recording()
        if dst.size < src.size:
            raise ValueError(f"copy of {src.size} B into {dst.size} B")
        dst = BufferView(dst.buffer, dst.offset, src.size)
        self._sync(vk.VK_PIPELINE_STAGE_TRANSFER_BIT, [src], [dst])
        self._ops.append(Copy(src, dst))
        self.command_count += 1
        if self.profile:
            self._timestamp(label, vk.VK_PIPELINE_STAGE_TRANSFER_BIT)

    def end(self) -> None:
        """Finish recording: make every write visible to the host and to the next replay."""
        self._encode_commands(self.take_commands())

    def take_commands(self) -> Commands:
        """Finish collecting and hand the commands over instead of encoding them (a plan's recipe, which
        another Recorder encodes with `end_with`); this Recorder records nothing more."""
        vk = binding()
        self._require_recording()
        self._ops.append(Barrier(vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                 vk.VK_PIPELINE_STAGE_HOST_BIT | vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                 vk.VK_ACCESS_MEMORY_WRITE_BIT,
                                 vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_MEMORY_READ_BIT))
        self.ended = True
        self._pending.clear()
        commands = Commands(self._ops, tuple(self._labels), self.dispatch_count, self.command_count,
                            self.descriptor_count)
        self._ops = []
        return commands

    def end_with(self, commands: Commands) -> None:
        """Encode commands collected by another Recorder of this device (`take_commands`), in place of any of
        this one's own: their checks and barriers were worked out when they were collected."""
        self._require_recording()
        if bool(commands.labels) != self.profile:
            raise RecorderStateError("timestamped commands need a profiling Recorder, and only those")
        self.ended = True
        self._pending.clear()
        self._encode_commands(commands)

    def _encode_commands(self, commands: Commands) -> None:
        self._ops, self._labels = commands.ops, list(commands.labels)
        self.dispatch_count, self.command_count = commands.dispatch_count, commands.command_count
        self.descriptor_count = commands.descriptor_count
        self._encode()
        # The command buffer holds the commands now. Dropping their Python records leaves a cached plan a
        # handful of objects for the cycle collector to walk, not one per command and binding.
        self._kernel_names = frozenset(op.pipeline.kernel.shader for op in self._ops if isinstance(op, Dispatch))
        self._op_count = len(self._ops)
        self._ops = []

    # -- encoding ---------------------------------------------------------------------------------------------

    def _encode(self) -> None:
        """Write the descriptor sets, then record the command buffer (vk/commands.py)."""
        dispatches = [op for op in self._ops if isinstance(op, Dispatch)]
        pool, sets = write_descriptor_sets(self.device, dispatches, self.descriptor_count)
        if pool is not None:
            self._descriptor_pool = pool
        with self.stream.pool_lock:  # recording into a buffer of the pool: the pool is externally synchronised
            if self._labels:
                vk = binding()
                info = vk.VkQueryPoolCreateInfo(queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=len(self._labels))
                self._query_pool = call(vk.vkCreateQueryPool, self.device.handle, info, None)
            encode_commands(self.cmd, self._ops, sets, self._busy, self._query_pool, len(self._labels))


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
        # several times; the submit info was built once, in __init__. The fence is lent for this submission only:
        # creating one costs NVIDIA's driver ~0.3 ms (a kernel object), and a recording is made per new shape.
        fences = self.device.slots.take_fence()
        try:
            check(vk.lib.vkResetFences(self.device.handle, 1, fences), "vkResetFences")
            check(self.stream.submit(self._submit_ptr, fences[0]), "vkQueueSubmit")
        except BaseException:
            self.device.slots.give_fence(fences)  # not submitted: nothing will signal it, and reset clears it
            raise
        self._fences = fences
        self._in_flight = True

    def wait(self, timeout_s: float = 60.0) -> None:
        """Block until the submission finished; VulkanError VK_TIMEOUT after `timeout_s`."""
        vk = binding()
        if not self._in_flight:
            return
        started = time.perf_counter()
        result = vk.lib.vkWaitForFences(self.device.handle, 1, self._fences, vk.VK_TRUE, int(timeout_s * 1e9))
        check(result, "vkWaitForFences")  # a timeout raises here: the fence stays with the running submission
        self.stream.wait_seconds += time.perf_counter() - started
        self._in_flight = False
        self.device.slots.give_fence(self._fences)
        self._fences = None
        if self._busy is not None:
            self._count_busy_time()

    def _count_busy_time(self) -> None:
        """Add the finished submission's span, start to end timestamp, to its stream's and the device's GPU busy
        time."""
        vk = binding()
        assert self._busy is not None and self._stamps is not None
        busy_pool, first = self._busy
        stamps = self._stamps
        if vk.lib.vkGetQueryPoolResults(self.device.handle, busy_pool, first, 2, 16, stamps, 8,
                                        vk.VK_QUERY_RESULT_64_BIT) != vk.VK_SUCCESS:
            return  # not available (a driver that reports late): this submission goes uncounted
        ticks = (stamps[1] - stamps[0]) & ((1 << self.device.timestamp_bits) - 1)  # the counter wraps there
        period = self.device.info.timestamp_period_ns
        self.stream.gpu_busy_seconds += ticks * period * 1e-9
        start = int(stamps[0] * period)
        self.device.note_busy(start, start + int(ticks * period))

    def run(self) -> None:
        self.submit()
        self.wait()

    def timings(self) -> list[Timing]:
        """GPU time of every recorded command in the last completed submission (profile=True only)."""
        vk = binding()
        if not self.profile or self._in_flight or not self.ended or self._query_pool is None:
            return []
        count = len(self._labels)
        data = vk.ffi.new("uint64_t[]", count)
        flags = vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT
        result = vk.lib.vkGetQueryPoolResults(self.device.handle, self._query_pool, 0, count, 8 * count, data, 8,
                                              flags)
        check(result, "vkGetQueryPoolResults")
        stamps = list(data)
        period = self.device.info.timestamp_period_ns
        return [Timing(self._labels[i], (stamps[i] - stamps[i - 1]) * period / 1e6) for i in range(1, len(stamps))]

    def close(self) -> None:
        """Wait for any submission, then hand the command buffer and descriptor pool back to the device
        (vk/recording_slots.py) and free the query pool."""
        vk = binding()
        if self.cmd is None:
            return
        dev = self.device.handle
        if self._in_flight:
            self.wait()
        self.stream.give_commands(self._submit_cmds)
        if self._busy is not None:
            self.device.slots.give_busy_queries(self._busy[1])
            self._busy = None
        if self._descriptor_pool is not None:
            self.device.slots.give_pool(self._descriptor_pool)
        if self._query_pool is not None:
            vk.vkDestroyQueryPool(dev, self._query_pool, None)
        self._ops.clear()
        self.cmd = None
        self.device.live["recorder"] -= 1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
