"""The OCR stages on the GPU, one submission each (DESIGN.md, "One request, end to end").

The decoded image is written once per request into persistent host-visible staging and copied into a
device-local image buffer, or, when RapidOCR would resize it (a side over 2000 px) or letterbox it, resized
into that buffer by the image_resize shader (one small submission either way, recorded once per size class).
Every stage's shaders then read that buffer; a small params buffer per stage carries what changes per request
(sizes, crop matrices).
Each stage is a plan of its model with hooks: det resizes and normalises the image in a shader before the
network, and after it the db_bitmap shader thresholds and dilates the probability map as RapidOCR's DB does
(agent/ocr/db_bitmap.py): the map comes back for the box scores and the bitmap for OpenCV's contours; cls
and rec sample their crops out of the same image buffer with the warp shader; rec reduces its probabilities to
argmax and max on the GPU, so T×2 values per line come back instead of T×6625.

A shape whose tensors are larger than the device binds (BindingTooLarge: lavapipe and many embedded GPUs bind
at most 128 MiB, and PP-OCRv6's det stem on a 736×4416 input holds 149 MiB) runs on the CPU backend
(onnxruntime) instead: the same answer, slower, logged once per shape.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from vkocr.agent.ocr.db_bitmap import DB_BITMAP_PARAMS_WORDS, BitmapReadback, db_bitmap_params
from vkocr.agent.ocr.image_kernels import (
    IMAGE_PARAMS_WORDS,
    RESIZE_PARAMS_WORDS,
    CropSlot,
    ImageSource,
    crop_params,
    crop_params_words,
    image_params,
    padded_batch,
    record_crop_warp,
    record_image_preprocess,
    record_image_resize,
    resize_params,
)
from vkocr.agent.ocr.image_reference import resize_linear_u8
from vkocr.agent.ocr.prep import Prepared, prepared_image, unchanged
from vkocr.engine.device import Device
from vkocr.engine.errors import BindingTooLarge, KernelArgumentError, OutOfMemory, VulkanError
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.plan import Plan, StageHooks
from vkocr.engine.kernels.reduce import record_argmax
from vkocr.engine.memory import Allocation, BufferView
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor
from vkocr.log import get_logger

log = get_logger(__name__)

DEFAULT_IMAGE_CAPACITY = 2048 * 2048 * 3  # bytes: RapidOCR caps the longest side at 2000 before detection
MAX_REC_STEPS = 8192  # time steps per line (the recogniser makes one per 8 input columns)
DEFAULT_MAX_STAGING = 64 << 20  # host-visible bytes for the raw image (20 MP); a bigger one is resized on the host
PARALLEL_COPY_BYTES = 2 << 20  # images above this go into staging on several threads
COPY_THREADS = min(4, os.cpu_count() or 1)


class HostBuffer:
    """A persistent host-visible allocation bound straight into shaders (no copy), as a uint32 tensor."""

    def __init__(self, device: Device, words: int) -> None:
        self.device = device
        self.alloc: Allocation = device.pool.alloc(4 * words, "upload")
        self.tensor = Tensor(self.alloc, (words,), np.dtype(np.uint32))

    def write(self, words: np.ndarray) -> None:
        self.alloc.array(np.uint32)[: len(words)] = words
        self.alloc.flush()

    def write_image(self, rgb: np.ndarray, pool: ThreadPoolExecutor | None = None) -> int:
        """An H×W×3 uint8 image as packed bytes (rgb_words' layout), straight into the mapping; its size in
        bytes. A large one is copied in parts on ``pool``'s threads (NumPy releases the GIL while it copies):
        one core alone does not reach the memory bandwidth that copying tens of MB from DRAM wants."""
        data = np.ascontiguousarray(rgb, dtype=np.uint8).reshape(-1)
        target = self.alloc.array(np.uint8)[: data.size]
        if pool is None or data.size < PARALLEL_COPY_BYTES:
            target[...] = data
        else:
            step = -(-data.size // COPY_THREADS)
            parts = [slice(i, i + step) for i in range(0, data.size, step)]
            for done in [pool.submit(np.copyto, target[part], data[part]) for part in parts]:
                done.result()
        self.alloc.flush()
        return int(data.size)

    def close(self) -> None:
        self.device.pool.free(self.alloc)


COPY_GRANULE = 1 << 20  # copies and resizes are recorded per MiB of output, so at most capacity/granule recordings


class DeviceImage:
    """The prepared image in device-local memory, which every stage's shaders read (reading host memory over
    PCIe is slow on discrete GPUs), and the host-visible staging buffer it is filled from: by a copy when the
    image is used as it is, else by the image_resize shader (RapidOCR's resize of an oversized image and its
    letterbox), which reads the raw image from staging. Both are recorded once per MiB of output and replayed.
    Staging grows with the largest raw image seen (an image of more than 2000 px a side arrives whole), up to
    max_staging bytes (GpuStages.load resizes a bigger one on the host).
    The buffer holds `slots` images of up to `capacity` bytes each, one after another (slot k from byte
    offset(k)): the crops of several requests' images can then go through one cls or rec batch."""

    def __init__(self, device: Device, capacity: int, max_staging: int = DEFAULT_MAX_STAGING, slots: int = 1
                 ) -> None:
        self.device, self.capacity, self.max_staging = device, capacity, max_staging
        if slots < 1:
            raise KernelArgumentError(f"{slots} image slots; at least 1")
        self.slot_bytes = -(-capacity // device.alignment) * device.alignment  # each slot aligned for binding
        self.tensor = device.tensor((slots * self.slot_bytes // 4,), np.uint32)
        self.slots = [Tensor(self.tensor.alloc.sub(k * self.slot_bytes, self.slot_bytes), (self.slot_bytes // 4,),
                             np.dtype(np.uint32)) for k in range(slots)]
        self.staging = HostBuffer(device, -(-capacity // 4))
        self.resize_params = HostBuffer(device, RESIZE_PARAMS_WORDS)
        self._recordings: dict[tuple[str, int, int], Recorder] = {}  # (kind, bytes, slot)
        self._pending: Recorder | None = None
        # threads start on the first large image (ThreadPoolExecutor makes them on demand)
        self._copiers = (ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="vkocr-staging")
                         if COPY_THREADS > 1 else None)

    def offset(self, slot: int) -> int:
        """Where image slot `slot` starts in the buffer, in bytes."""
        return slot * self.slot_bytes

    def settle(self) -> None:
        """Wait for the last copy or resize (staging may be rewritten after this)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.wait()

    def can_stage(self, nbytes: int) -> bool:
        """Whether staging holds (or may grow to hold, and did) an image of nbytes; False past max_staging or
        when the host-visible memory is not there (the caller then resizes on the host)."""
        if nbytes <= self.staging.alloc.nbytes:
            return True
        if nbytes > self.max_staging:
            return False
        self.settle()
        try:
            bigger = HostBuffer(self.device, -(-nbytes // COPY_GRANULE) * COPY_GRANULE // 4)
        except OutOfMemory as exc:  # nothing changed: the old buffer and its recordings stay
            log.warning("staging_not_grown", bytes=nbytes, error=str(exc))
            return False
        for rec in self._recordings.values():  # they bind the old buffer
            rec.close()
        self._recordings.clear()
        self.staging.close()
        self.staging = bigger
        return True

    def _stage(self, image: np.ndarray) -> None:
        self.settle()
        if not self.can_stage(image.nbytes):
            raise KernelArgumentError(f"an image of {image.nbytes} bytes does not fit GPU staging "
                                      f"({self.staging.alloc.nbytes} bytes, at most {self.max_staging})")
        self.staging.write_image(image, self._copiers)

    def _replay(self, kind: str, nbytes: int, slot: int, record: Callable[[Recorder, int, Tensor], None]) -> None:
        """Submit the recording of `kind` for `nbytes` of output into image slot `slot` without waiting for it:
        the stage submitted next on the queue starts with a full barrier, so it reads the whole image, and its
        fence covers this submission too (one round trip less)."""
        if not 0 <= slot < len(self.slots):
            raise KernelArgumentError(f"image slot {slot} outside 0..{len(self.slots) - 1}")
        size = min(self.slot_bytes, -(-max(nbytes, 1) // COPY_GRANULE) * COPY_GRANULE)
        rec = self._recordings.get((kind, size, slot))
        if rec is None:
            rec = self._recordings[(kind, size, slot)] = Recorder(self.device)
            record(rec, size, self.slots[slot])
            rec.end()
        rec.submit()
        self._pending = rec

    def copy(self, image: np.ndarray, slot: int = 0) -> None:
        """The image (H×W×3 uint8, at most the capacity) as it is, into image slot `slot`."""
        def record(rec: Recorder, size: int, out: Tensor) -> None:
            src, dst = self.staging.tensor.view, out.view
            rec.copy(BufferView(src.buffer, src.offset, size), BufferView(dst.buffer, dst.offset, size))

        self._stage(image)
        self._replay("copy", image.nbytes, slot, record)

    def resize(self, image: np.ndarray, out_h: int, out_w: int, pad_top: int, slot: int = 0) -> None:
        """The image (H×W×3 uint8, any size staging can hold) resized to out_h × out_w as cv2.resize
        INTER_LINEAR does, with pad_top black rows above and below, into image slot `slot`."""
        def record(rec: Recorder, size: int, out: Tensor) -> None:
            record_image_resize(rec, self.staging.tensor, self.resize_params.tensor, out, words=size // 4)

        h, w = image.shape[:2]
        params = resize_params(h, w, out_h, out_w, pad_top=pad_top, out_capacity=self.capacity)
        self._stage(image)
        self.resize_params.write(params)
        self._replay("resize", (out_h + 2 * pad_top) * out_w * 3, slot, record)

    def close(self) -> None:
        try:
            self.settle()
        except VulkanError as exc:  # a lost device: the copy no longer matters, the resources still do
            log.warning("image_copy_not_settled", error=str(exc))
        for rec in self._recordings.values():
            rec.close()
        if self._copiers is not None:
            self._copiers.shutdown()
        self.device.free(self.tensor)
        self.staging.close()
        self.resize_params.close()


class ArgmaxReadback:
    """The rec epilogue: argmax and max over the classes, and their readback. One fixed-size set of buffers
    serves every plan shape (submissions never overlap), so no memory grows with the number of widths seen."""

    def __init__(self, device: Device, capacity: int) -> None:
        self.device, self.capacity = device, capacity
        self.indices = device.pool.alloc(4 * capacity, "device")
        self.values = device.pool.alloc(4 * capacity, "device")
        self.indices_back = device.pool.alloc(4 * capacity, "readback")
        self.values_back = device.pool.alloc(4 * capacity, "readback")
        self.shape: tuple[int, ...] = (0,)

    def record(self, rec: Recorder, probs: Tensor) -> None:
        shape = tuple(probs.shape[:-1])
        count = math.prod(shape)
        if count > self.capacity:
            raise KernelArgumentError(f"recogniser output of {shape} time steps exceeds the {self.capacity} "
                                      "that the argmax buffers hold")
        indices = Tensor(self.indices, shape, np.dtype(np.int32))
        values = Tensor(self.values, shape, np.dtype(np.float32))
        record_argmax(rec, probs, indices, values, axis=-1)
        rec.copy(indices.view, self.indices_back.view)
        rec.copy(values.view, self.values_back.view)

    def read(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        self.indices_back.invalidate()
        self.values_back.invalidate()
        count = int(np.prod(shape))
        return (self.indices_back.array(np.int32)[:count].reshape(shape).copy(),
                self.values_back.array(np.float32)[:count].reshape(shape).copy())

    def close(self) -> None:
        for a in (self.indices, self.values, self.indices_back, self.values_back):
            self.device.pool.free(a)


class GpuStages:
    """`image_slots`: images held on the device at once (load's slot), so that one cls or rec batch may hold the
    crops of several; each slot costs image_capacity bytes of device memory."""

    def __init__(self, device: Device, model_paths: Mapping[str, Path], *, max_batch: int = 64,
                 image_capacity: int = DEFAULT_IMAGE_CAPACITY, max_staging_bytes: int = DEFAULT_MAX_STAGING,
                 image_slots: int = 1) -> None:
        self.device = device
        self.backend = f"vulkan ({device.info.name})"
        self.model_paths = dict(model_paths)
        self.models = {role: Model.load(path, device) for role, path in model_paths.items()}
        self.max_batch = max_batch
        self.image_capacity = image_capacity
        binds = device.info.max_storage_buffer_range // image_capacity  # the shaders bind every slot at once
        if image_slots > binds:
            log.warning("image_slots_reduced", asked=image_slots, slots=max(binds, 1),
                        reason=f"the device binds at most {device.info.max_storage_buffer_range} bytes")
        self.image_slots = max(1, min(image_slots, binds))
        self.image = DeviceImage(device, image_capacity, max(max_staging_bytes, image_capacity), self.image_slots)
        self.det_params = HostBuffer(device, IMAGE_PARAMS_WORDS)
        self.cls_params = HostBuffer(device, crop_params_words(max_batch))
        self.rec_params = HostBuffer(device, crop_params_words(max_batch))
        self._argmax = ArgmaxReadback(device, max_batch * MAX_REC_STEPS)
        self.db_params = HostBuffer(device, DB_BITMAP_PARAMS_WORDS)
        self._bitmap = BitmapReadback(device)
        self._last_bitmap: tuple[np.ndarray, np.ndarray] | None = None  # the bitmap and its row spans
        self.det_hooks = StageHooks(
            lambda rec, x: record_image_preprocess(rec, self.image.tensor, self.det_params.tensor, x),
            self._det_epilogue)
        self.cls_hooks = StageHooks(lambda rec, x: record_crop_warp(rec, self.image.tensor, self.cls_params.tensor, x))
        self.rec_hooks = StageHooks(lambda rec, x: record_crop_warp(rec, self.image.tensor, self.rec_params.tensor, x),
                                    self._rec_epilogue, read_outputs=False)
        self._slot = 0  # the slot loaded last, which detect reads
        self._sources: dict[int, ImageSource] = {}  # by slot: the prepared image there
        self._host_images: dict[int, tuple[np.ndarray, Prepared]] = {}  # by slot, for a shape run on the CPU
        self._cpu: Any = None  # OrtStages, made when a shape first needs it
        self._cpu_images: dict[int, np.ndarray] = {}  # by slot, the images _cpu has loaded
        self._on_cpu: set[tuple[str, tuple[int, ...]]] = set()  # shapes too large for this device's bindings

    def _det_epilogue(self, rec: Recorder, outputs: dict[str, Tensor]) -> None:
        (prob,) = outputs.values()
        self._bitmap.record(rec, prob, self.db_params.tensor)

    def _rec_epilogue(self, rec: Recorder, outputs: dict[str, Tensor]) -> None:
        (probs,) = outputs.values()
        self._argmax.record(rec, probs)

    def load(self, image: np.ndarray, prep: Prepared, slot: int = 0) -> None:
        """Prepare this request's image (H×W×3 uint8) as ``prep`` says into image slot `slot`, where every stage's
        shaders read it: a resize and letterbox in a shader; on the host in the rare case of two resizes, and
        for an image too big for staging (max_staging_bytes, or the host-visible memory there is). detect reads
        the image loaded last; crops name their slot."""
        if len(prep.sizes) > 1 or not self.image.can_stage(image.nbytes):
            image, prep = prepared_image(image, prep, resize_linear_u8), unchanged(*prep.shape)
        h, w = prep.shape
        if 3 * h * w > self.image_capacity:
            raise KernelArgumentError(f"prepared image of {w}×{h} pixels needs {3 * h * w} bytes; the GPU image "
                                      f"buffer holds {self.image_capacity}")
        if prep.sizes or prep.pad_top:
            out_h, out_w = prep.sizes[0] if prep.sizes else image.shape[:2]
            self.image.resize(image, out_h, out_w, prep.pad_top, slot)
        else:
            self.image.copy(image, slot)
        self._slot = slot
        self._sources[slot] = ImageSource(h, w, self.image.offset(slot))
        self._host_images[slot] = (image, prep)
        self._cpu_images.pop(slot, None)

    def _plan(self, role: str, shape: tuple[int, ...], hooks: StageHooks) -> Plan | None:
        """The plan, or None when this shape's tensors are larger than the device binds (the CPU runs it)."""
        if (role, shape) in self._on_cpu:
            return None
        try:
            plan = self.models[role].plan(shape, hooks=hooks)
        except BindingTooLarge as exc:
            log.warning("shape_on_cpu", model=role, shape=list(shape), reason=str(exc))
            self._on_cpu.add((role, shape))
            return None
        assert isinstance(plan, Plan)
        return plan

    @property
    def shapes_on_cpu(self) -> list[tuple[str, tuple[int, ...]]]:
        """(model role, input shape) of the shapes run on the CPU: too large for this device's bindings."""
        return sorted(self._on_cpu)

    def _cpu_stages(self, slots: Sequence[int] = ()) -> Any:
        """The CPU backend's stages with the images of `slots` loaded, and the last loaded image last (which its
        detect reads); sessions made on first use."""
        from vkocr.agent.ocr.ort_stages import OrtStages

        if self._cpu is None:
            self._cpu = OrtStages(self.model_paths)
        for slot in [*sorted(set(slots) - {self._slot}), self._slot]:
            image, prep = self._host_images[slot]
            if self._cpu_images.get(slot) is not image:
                self._cpu.load(image, prep, slot)
                self._cpu_images[slot] = image
        return self._cpu

    def detect(self, det_h: int, det_w: int, thresh: float = 0.3, use_dilation: bool = True) -> np.ndarray:
        """The probability map (a read-only view of the readback mapping, valid until the next detect); DB's
        bitmap of it for `thresh` and `use_dilation` comes with it (`db_bitmap`)."""
        source = self._sources[self._slot]
        self.det_params.write(image_params(source.height, source.width, det_h, det_w, offset=source.offset,
                                           capacity=self.image.tensor.nbytes))
        self.db_params.write(db_bitmap_params(thresh, use_dilation))
        plan = self._plan("det", (1, 3, det_h, det_w), self.det_hooks)
        if plan is None:
            self._last_bitmap = None  # DB thresholds the map on the host
            return self._cpu_stages().detect(det_h, det_w, thresh, use_dilation)
        prob = plan.run(copy=False)[plan.output_names[0]][0, 0]
        map_h, map_w = prob.shape
        self._last_bitmap = self._bitmap.read(map_h, map_w) if self._bitmap.fits(map_h, map_w) else None
        return prob

    def db_bitmap(self) -> np.ndarray | None:
        """The last detection's bitmap (H×W uint8, read-only, valid until the next detect), None when its map
        was too large for the GPU's bitmap buffer (DB then thresholds the map itself)."""
        return self._last_bitmap[0] if self._last_bitmap is not None else None

    def db_row_spans(self) -> np.ndarray | None:
        """The columns of each row of that bitmap that hold its set pixels (H×2 uint32, [start, stop), start ≥
        stop for an empty row; read-only, valid until the next detect), None without a bitmap."""
        return self._last_bitmap[1] if self._last_bitmap is not None else None

    def _crop_params(self, crops: Sequence[CropSlot], batch: int, height: int, width: int) -> np.ndarray:
        if len(crops) > self.max_batch:
            raise KernelArgumentError(f"{len(crops)} crops in one batch; at most {self.max_batch}")
        try:
            sources = [self._sources[c.image] for c in crops]
        except KeyError as exc:
            raise KernelArgumentError(f"a crop of image slot {exc.args[0]}, where no image was loaded") from None
        return crop_params(0, 0, crops, batch, height, width, sources=sources, capacity=self.image.tensor.nbytes)

    def classify(self, crops: Sequence[CropSlot], height: int, width: int) -> np.ndarray:
        """Crops in a batch rounded up to a power of two (few plans); the warp zero-fills the spare slots."""
        batch = padded_batch(len(crops), self.max_batch)
        self.cls_params.write(self._crop_params(crops, batch, height, width))
        plan = self._plan("cls", (batch, 3, height, width), self.cls_hooks)
        if plan is None:
            return self._cpu_stages([c.image for c in crops]).classify(crops, height, width)
        return plan.run()[plan.output_names[0]][: len(crops)]

    def recognize(self, crops: Sequence[CropSlot], height: int, width: int, batch: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Crops in a batch rounded up to a power of two, at most `batch` (RapidOCR's batch size, so a full batch
        runs as it is): few shapes, little spare work; the warp zero-fills the spare slots."""
        batch = min(self.max_batch, padded_batch(len(crops), batch))
        self.rec_params.write(self._crop_params(crops, batch, height, width))
        plan = self._plan("rec", (batch, 3, height, width), self.rec_hooks)
        if plan is None:
            return self._cpu_stages([c.image for c in crops]).recognize(crops, height, width)
        plan.run()
        out_shape = plan.output_shapes[plan.output_names[0]]
        indices, values = self._argmax.read(tuple(out_shape[:-1]))
        return indices[:len(crops)], values[:len(crops)]

    def rec_output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return self.models["rec"].output_shape(input_shape)

    def plan_stats(self) -> dict[str, dict[str, Any]]:
        """Per model role: plans cached, plans built so far, distinct input shapes planned, the memory the plans
        hold, the host time of every plan built (ms, in order), and the shape classes traced so far (each
        new plan of another shape came from one's compiled function: vk/graph/shape_classes.py)."""
        return {role: {"plans": m.plan_count, "recordings": m.recordings, "distinct_shapes": len(m.shapes_seen),
                       "plan_memory_bytes": m.plan_memory_bytes, "build_ms": list(m.build_ms),
                       "build_kinds": list(m.build_kinds),
                       "classes_traced": m.shape_classes.traced if m.shape_classes is not None else 0}
                for role, m in self.models.items()}

    def reserve(self, role: str, shape: tuple[int, ...]) -> None:
        """Size the shared memory of model `role`'s plans for this input shape now, recording nothing."""
        self.models[role].reserve(shape, hooks=self._hooks(role))

    def _hooks(self, role: str) -> StageHooks:
        return {"det": self.det_hooks, "cls": self.cls_hooks, "rec": self.rec_hooks}[role]

    def prepare(self, role: str, shape: tuple[int, ...]) -> None:
        """Record the plan of model `role` ("det", "cls", "rec") for this input shape now, without running it
        (warm start); shapes are what detect/classify/recognize pass: det (1, 3, h, w), cls and rec
        (batch, 3, height, width); one too large for the device's bindings is left to the CPU."""
        self._plan(role, shape, self._hooks(role))

    def learn_shape_class(self, role: str, shape: tuple[int, ...]) -> bool:
        """Trace the shape class of model `role`'s plans for this shape unless one is kept (recording nothing);
        True when one was traced."""
        return self.models[role].learn_shape_class(shape, hooks=self._hooks(role))

    def close(self) -> None:
        if self._cpu is not None:
            self._cpu.close()
        for model in self.models.values():
            model.close()
        self._argmax.close()
        self._bitmap.close()
        self.image.close()
        for buf in (self.det_params, self.cls_params, self.rec_params, self.db_params):
            buf.close()
