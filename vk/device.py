"""The chosen Vulkan device: logical device, its streams (compute queues with command pools of their own:
vk/streams.py), memory pool, pipelines.

Kompute's Manager, in short: `Device()` opens everything, `close()` destroys it in reverse order.
"""

from __future__ import annotations

import math
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Self

import numpy as np

from vkocr.engine.coopmat import usable_shape, why_not
from vkocr.engine.devices import COOPMAT_EXTENSION, DeviceInfo, choose, list_devices
from vkocr.engine.errors import NoUsableDevice, VulkanUnavailable
from vkocr.engine.instance import Instance
from vkocr.engine.loader import INSTALL_HINT, binding, call
from vkocr.engine.memory import DEFAULT_ARENA_BYTES, MemoryPool
from vkocr.engine.pipeline import Constant, KernelDef, Pipeline, load_module
from vkocr.engine.pipeline_cache import PipelineCache, default_cache_dir
from vkocr.engine.recording_slots import RecordingSlots
from vkocr.engine.streams import BusyClock, Stream
from vkocr.engine.tensor import Tensor
from vkocr.log import get_logger

log = get_logger(__name__)

_USE_DEFAULT_CACHE = Path("<default>")
PIPELINE_STATS_ENV = "VKOCR_PIPELINE_STATS"
PIPELINE_STATS_EXTENSION = "VK_KHR_pipeline_executable_properties"


class Device:
    """Open the device picked by `choose()` (override: index, UUID or name part; else VKOCR_DEVICE; else the
    best ranked usable GPU). NoUsableDevice when nothing is named and no GPU is usable. `queues`: compute queues
    to ask for (at most what its compute family has); streams beyond them share queues."""

    def __init__(
        self,
        override: str | None = None,
        *,
        validation: bool | None = None,
        cache_dir: Path | None = _USE_DEFAULT_CACHE,
        arena_bytes: int = DEFAULT_ARENA_BYTES,
        queues: int = 1,
    ) -> None:
        vk = binding()
        if queues < 1:
            raise ValueError(f"queues must be ≥ 1, got {queues}")
        self.live: Counter[str] = Counter()
        # time the GPU spent on this device's submissions, from a timestamp at each one's start and end (zero
        # on a queue without timestamps), streams running at once counted once: over wall time, how busy it was
        self._busy = BusyClock()
        self.timestamp_bits = 0  # valid bits of the queue's timestamps (they wrap there)
        self.streams: list[Stream] = []
        self._streams_lock = threading.Lock()
        self.fail_next_submit: str | None = None  # fault injection: the VkResult the next submission fails with
        self.instance = Instance(validation=validation)
        self.handle = None
        try:
            self.choice = choose(list_devices(self.instance), override)
            if self.choice.device is None:
                raise NoUsableDevice(f"{self.choice.reason}; name a device (index, UUID or name part) to use "
                                     "it anyway")
            self.info, self.reason = self.choice.device, self.choice.reason
            self.workarounds = self.choice.workarounds  # flags from the quirks table (vk/quirks.py)
            # cooperative matrices (vk/coopmat.py): the (M, N, K) shape the convolutions use, None when they do
            # not serve here, and why not
            self.coopmat_shape = usable_shape(self.info, self.workarounds)
            self.coopmat_why_not = why_not(self.info, self.workarounds)
            if self.coopmat_shape is not None and self.instance.api_version < vk.VK_MAKE_VERSION(1, 2, 0):
                self.coopmat_shape, self.coopmat_why_not = None, "the Vulkan loader is older than 1.2"
            self.physical = self.instance.physical_devices()[self.info.index]
            self.queue_family = self._compute_queue_family()
            self.queue_count = min(queues, self._family_queues)
            self.handle = self._create_device()
            self._queues = [(vk.vkGetDeviceQueue(self.handle, self.queue_family, i), threading.Lock())
                            for i in range(self.queue_count)]
            self.slots = RecordingSlots(self)
            self.default_stream = self.stream(0)
            self.memory_properties = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
            self.alignment = math.lcm(
                self.info.min_storage_buffer_offset_alignment, self.info.non_coherent_atom_size, 16
            )
            if cache_dir is _USE_DEFAULT_CACHE:
                cache_dir = default_cache_dir()
            cache_path = cache_dir / f"pipelines-{self.info.uuid}.bin" if cache_dir is not None else None
            self.pipeline_cache = PipelineCache(self.handle, self.info, cache_path)
            self.pool = MemoryPool(self, arena_bytes)
            self._modules: dict[str, Any] = {}
            self._pipelines: dict[tuple[KernelDef, tuple[Constant, ...]], Pipeline] = {}
            self._pipeline_lock = threading.RLock()  # a pipeline's creation loads its module
        except BaseException:
            self._destroy_device()
            self.instance.close()
            raise
        log.info("device_opened", device=self.info.name, type=self.info.type, reason=self.reason,
                 workarounds=sorted(self.workarounds), coopmat=self.coopmat_shape or self.coopmat_why_not)

    def _compute_queue_family(self) -> int:
        vk = binding()
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        compute = [i for i, q in enumerate(families) if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
        if not compute:
            raise VulkanUnavailable(f"{self.info.name} has no compute queue: {INSTALL_HINT}")
        with_timestamps = [i for i in compute if families[i].timestampValidBits > 0]
        family = (with_timestamps or compute)[0]
        self.timestamp_bits = int(families[family].timestampValidBits)
        self._family_queues = max(1, int(families[family].queueCount))
        return family

    def _create_device(self) -> Any:
        vk = binding()
        priorities = [1.0] * self.queue_count
        queue_info = vk.VkDeviceQueueCreateInfo(
            queueFamilyIndex=self.queue_family, queueCount=self.queue_count, pQueuePriorities=priorities
        )
        queue_infos = [queue_info]
        # MoltenVK and other portability drivers require this extension to be enabled when they offer it.
        extensions = [e for e in ("VK_KHR_portability_subset",) if e in self.info.extensions]
        # 16-bit storage (core in 1.1) lets fp16 plans store activations and weights in half the bytes
        # cooperative matrices: the extension, its feature, fp16 arithmetic (the kernels' float16_t tiles) and
        # the Vulkan memory model (their SPIR-V's), chained after 16-bit storage, only where a usable shape exists
        # and nothing turns them off
        chain: Any = None
        coopmat_features = arith16 = memory_model = stats_features = None
        # VKOCR_PIPELINE_STATS=1: the driver's statistics of every pipeline (registers, shared and local memory:
        # Pipeline.statistics), where it offers them (NVIDIA does; lavapipe does not): sweep_conv_tiles.py --stats
        self.pipeline_stats = (os.environ.get(PIPELINE_STATS_ENV, "") == "1"
                               and PIPELINE_STATS_EXTENSION in self.info.extensions)
        if self.pipeline_stats:
            extensions.append(PIPELINE_STATS_EXTENSION)
            stats_features = vk.VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR(
                pipelineExecutableInfo=vk.VK_TRUE)
            chain = stats_features
        if self.coopmat_shape is not None:
            extensions.append(COOPMAT_EXTENSION)
            coopmat_features = vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(pNext=chain,
                                                                              cooperativeMatrix=vk.VK_TRUE)
            arith16 = vk.VkPhysicalDeviceShaderFloat16Int8Features(pNext=coopmat_features, shaderFloat16=vk.VK_TRUE)
            memory_model = vk.VkPhysicalDeviceVulkanMemoryModelFeatures(pNext=arith16, vulkanMemoryModel=vk.VK_TRUE)
            chain = memory_model
        storage16 = vk.VkPhysicalDevice16BitStorageFeatures(pNext=chain, storageBuffer16BitAccess=vk.VK_TRUE) \
            if self.info.fp16_storage else None
        create_info = vk.VkDeviceCreateInfo(
            pNext=storage16 if storage16 is not None else chain,
            queueCreateInfoCount=1,
            pQueueCreateInfos=queue_infos,
            enabledExtensionCount=len(extensions),
            ppEnabledExtensionNames=extensions or None,
        )
        handle = call(vk.vkCreateDevice, self.physical, create_info, None)
        # (kept alive until the call returned)
        del storage16, memory_model, arith16, coopmat_features, stats_features, chain
        return handle

    # -- streams --------------------------------------------------------------------------------------------

    def stream(self, index: int) -> Stream:
        """Stream `index` (made on first use): queue index % queue_count, a command pool of its own. Stream 0 is
        the default of every recording that names none."""
        if index < 0:
            raise ValueError(f"stream index must be ≥ 0, got {index}")
        with self._streams_lock:
            while len(self.streams) <= index:
                queue, lock = self._queues[len(self.streams) % self.queue_count]
                self.streams.append(Stream(self, len(self.streams), queue, lock))
            return self.streams[index]

    @property
    def wait_seconds(self) -> float:
        """Time hosts spent blocked on this device's fences, every stream's: what is not Python overhead."""
        return sum(s.wait_seconds for s in self.streams)

    @property
    def gpu_busy_seconds(self) -> float:
        """Time the GPU was busy with this device's recordings (vk/streams.py BusyClock)."""
        return self._busy.seconds

    def note_busy(self, start_ns: int, end_ns: int) -> None:
        """A finished recording's span on the device's clock (the Recorder's timestamps)."""
        self._busy.add(start_ns, end_ns)

    # -- pipelines ------------------------------------------------------------------------------------------

    def shader_module(self, name: str) -> Any:
        with self._pipeline_lock:
            if name not in self._modules:
                self._modules[name] = load_module(self, name)
            return self._modules[name]

    def pipeline(self, kernel: KernelDef, constants: tuple[Constant, ...]) -> Pipeline:
        """The pipeline for `kernel` specialised by `constants`, created once per device (any thread)."""
        key = (kernel, constants)
        found = self._pipelines.get(key)
        if found is None:
            with self._pipeline_lock:
                found = self._pipelines.get(key)
                if found is None:
                    found = self._pipelines[key] = Pipeline(self, kernel, constants)
        return found

    def pipelines(self) -> list[Pipeline]:
        """Every pipeline created on this device so far."""
        with self._pipeline_lock:
            return list(self._pipelines.values())

    # -- tensors ----------------------------------------------------------------------------------------------

    def tensor(self, shape: tuple[int, ...], dtype: Any = np.float32) -> Tensor:
        """Device-local storage for a tensor (contents undefined until written)."""
        dt = np.dtype(dtype)
        nbytes = max(1, int(np.prod(shape))) * dt.itemsize
        return Tensor(self.pool.alloc(nbytes, "device"), tuple(shape), dt)

    def upload(self, array: np.ndarray) -> Tensor:
        """A new device tensor holding `array` (one small submission; for tests and weights)."""
        array = np.ascontiguousarray(array).reshape(np.shape(array))  # keeps 0-d arrays 0-d
        t = self.tensor(array.shape, array.dtype)
        self.write(t, array)
        return t

    def write(self, tensor: Tensor, array: np.ndarray) -> None:
        """Copy `array` into an existing device tensor through staging."""
        from vkocr.engine.recorder import Recorder

        array = np.ascontiguousarray(array, dtype=tensor.dtype).reshape(np.shape(array))
        if array.shape != tensor.shape:
            raise ValueError(f"array shape {array.shape} != tensor shape {tensor.shape}")
        if array.size == 0:
            return
        staging = self.pool.alloc(tensor.nbytes, "upload")
        try:
            staging.array(tensor.dtype)[:] = array.reshape(-1)
            staging.flush()
            with Recorder(self) as rec:
                rec.copy(staging.view, tensor.view)
                rec.run()
        finally:
            self.pool.free(staging)

    def download(self, tensor: Tensor) -> np.ndarray:
        """The tensor's contents as a new NumPy array."""
        from vkocr.engine.recorder import Recorder

        if tensor.numel == 0:
            return np.empty(tensor.shape, tensor.dtype)

        staging = self.pool.alloc(tensor.nbytes, "readback")
        try:
            with Recorder(self) as rec:
                rec.copy(tensor.view, staging.view)
                rec.run()
            staging.invalidate()
            return staging.array(tensor.dtype).reshape(tensor.shape).copy()
        finally:
            self.pool.free(staging)

    def free(self, tensor: Tensor) -> None:
        self.pool.free(tensor.alloc)

    def inject_submit_failure(self, result: str = "VK_ERROR_DEVICE_LOST") -> None:
        """Fault injection for recovery drills and tests: the next queue submission fails with `result`, as
        a real failure would (DeviceLost for VK_ERROR_DEVICE_LOST), instead of reaching the driver."""
        self.fail_next_submit = result

    def memory_usage(self) -> tuple[int, int]:
        """(bytes in live allocations, bytes allocated from the driver) of the memory pool, all kinds."""
        stats = self.pool.stats()
        return stats.in_use, stats.reserved

    # -- lifetime ---------------------------------------------------------------------------------------------

    def wait_idle(self) -> None:
        call(binding().vkDeviceWaitIdle, self.handle)

    def _destroy_device(self) -> None:
        vk = binding()
        if self.handle is None:
            return
        try:
            vk.vkDeviceWaitIdle(self.handle)
        except Exception as exc:  # noqa: BLE001 - a lost device still has to be destroyed, and may be
            log.warning("device_wait_idle_failed", error=str(exc))
        for p in getattr(self, "_pipelines", {}).values():
            p.close()
        for m in getattr(self, "_modules", {}).values():
            vk.vkDestroyShaderModule(self.handle, m, None)
        if hasattr(self, "pool"):
            self.pool.close()
        if hasattr(self, "pipeline_cache"):
            try:
                self.pipeline_cache.save()
            except OSError as exc:  # a read-only cache dir must not stop a clean shutdown
                log.warning("pipeline_cache_not_saved", error=str(exc))
            self.pipeline_cache.close()
        if hasattr(self, "slots"):
            self.slots.close()
        for stream in self.streams:
            stream.close()
        vk.vkDestroyDevice(self.handle, None)
        self.handle = None

    def close(self) -> None:
        self._destroy_device()
        self.instance.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def describe(info: DeviceInfo) -> str:
    return f"{info.name} ({info.type}, {info.vendor}, driver {info.driver_version}, Vulkan {info.api_version})"
