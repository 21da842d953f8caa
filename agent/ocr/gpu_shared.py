"""What the streams of one device share in the GPU stages (agent/ocr/gpu_stages.py): the models (weights uploaded
once), the image slots, the staging copiers, and the CPU backend that runs a shape larger than the device binds."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from vkocr.agent.ocr.device_images import COPY_THREADS, DEFAULT_MAX_STAGING, ImageSlots
from vkocr.agent.ocr.rec_logits import load_rec_logits
from vkocr.engine.device import Device
from vkocr.engine.errors import BindingTooLarge
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.precision import FP32, PrecisionPlan
from vkocr.log import get_logger

log = get_logger(__name__)

DEFAULT_IMAGE_CAPACITY = 2048 * 2048 * 3  # bytes: RapidOCR caps the longest side at 2000 before detection
SLOT_MEMORY_SHARE = 8  # the image slots take at most 1/8 of the device-local memory


class CpuSpill:
    """The CPU backend (onnxruntime) for shapes whose tensors are larger than the device binds (BindingTooLarge):
    the same answer, slower, logged once per shape. Its sessions are made on first use; one stream at a time
    uses them."""

    def __init__(self, model_paths: Mapping[str, Path], slots: ImageSlots) -> None:
        self.model_paths, self.slots = dict(model_paths), slots
        self._cpu: Any = None  # OrtStages, made when a shape first needs it
        self._images: dict[int, np.ndarray] = {}  # by slot, the images _cpu has loaded
        self._lock = threading.Lock()  # streams share it (rare: shapes larger than the device binds)
        self._shapes: set[tuple[str, tuple[int, ...]]] = set()  # shapes too large for this device's bindings

    def has(self, role: str, shape: tuple[int, ...]) -> bool:
        return (role, shape) in self._shapes

    def take(self, role: str, shape: tuple[int, ...], exc: BindingTooLarge) -> None:
        log.warning("shape_on_cpu", model=role, shape=list(shape), reason=str(exc))
        self._shapes.add((role, shape))

    def forget_image(self, slot: int) -> None:
        self._images.pop(slot, None)

    def run(self, work: Callable[[Any], Any], slots: Sequence[int], last: int | None = None) -> Any:
        """`work` on the CPU backend's stages with the images of `slots` loaded (`last` loaded last: its detect
        reads it)."""
        from vkocr.agent.ocr.ort_stages import OrtStages

        with self._lock:
            if self._cpu is None:
                self._cpu = OrtStages(self.model_paths)
            order = [*sorted(set(slots) - {last}), *([last] if last is not None else [])]
            for slot in order:
                image, prep = self.slots.host_images[slot]
                if self._images.get(slot) is not image or slot == last:
                    self._cpu.load(image, prep, slot)
                    self._images[slot] = image
            return work(self._cpu)

    @property
    def shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        return sorted(self._shapes)

    def close(self) -> None:
        if self._cpu is not None:
            self._cpu.close()


class SharedGpu:
    """The device, its models (`base_models`, weights uploaded once), `image_slots` images on the device at once
    (each costs image_capacity bytes of device memory), the staging copiers and the CPU spill: what every
    stream's stages use."""

    def __init__(self, device: Device, model_paths: Mapping[str, Path], *, max_batch: int, image_capacity: int,
                 max_staging_bytes: int = DEFAULT_MAX_STAGING, image_slots: int = 1,
                 precision: Mapping[str, PrecisionPlan] | None = None) -> None:
        self.device = device
        self.backend = f"vulkan ({device.info.name})"
        self.model_paths = dict(model_paths)
        self.max_batch = max_batch
        self.image_capacity = image_capacity
        binds = device.info.max_storage_buffer_range // image_capacity  # the shaders bind every slot at once
        # a small board's GPU memory goes to the plans first: the slots take at most an eighth of it
        fits = (device.info.device_local_mib << 20) // SLOT_MEMORY_SHARE // image_capacity
        if image_slots > min(binds, fits):
            log.info("image_slots_reduced", asked=image_slots, slots=max(1, min(binds, fits)),
                     reason=f"the device binds at most {device.info.max_storage_buffer_range} bytes and has "
                     f"{device.info.device_local_mib} MiB of device memory, an eighth of it for the slots")
        self.image_slots = max(1, min(image_slots, binds, fits))
        self.max_staging = max(max_staging_bytes, image_capacity)
        self.precision = {role: (precision or {}).get(role, FP32) for role in model_paths}
        self.base_models: dict[str, Model] = {}
        self.rec_logits = False  # the rec model ends at its logits (agent/ocr/rec_logits.py)
        for role, path in model_paths.items():
            if role == "rec":
                self.base_models[role], self.rec_logits = load_rec_logits(path, device, self.precision[role])
            else:
                self.base_models[role] = Model.load(path, device, precision=self.precision[role])
        self.slots = ImageSlots(device, image_capacity, self.image_slots)
        # threads start on the first large image (ThreadPoolExecutor makes them on demand)
        self.copiers = (ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="vkocr-staging")
                        if COPY_THREADS > 1 else None)
        self.cpu = CpuSpill(model_paths, self.slots)

    def close(self) -> None:
        self.cpu.close()
        for model in self.base_models.values():
            model.close()
        if self.copiers is not None:
            self.copiers.shutdown()
        self.slots.close()
