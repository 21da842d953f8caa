"""The OCR stages on the GPU, one submission each (DESIGN.md, "One request, end to end").

The decoded image is written once per request into persistent host-visible staging and copied into one of the
device's image slots, or, when RapidOCR would resize it (a side over 2000 px) or letterbox it, resized into it
by the image_resize shader (one small submission either way, recorded once per size class; agent/ocr/
device_images.py). Every stage's shaders then read the slots; a small params buffer per stage carries what
changes per request (sizes, crop matrices, which slot each crop comes from). The stages of one stream
(StreamStages) are driven by one thread; GpuStages holds the models and the slots and makes a StreamStages per
stream of the device, so that several threads (the agent's lanes) run stages side by side.
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
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from vkocr.agent.ocr.db_bitmap import DB_BITMAP_PARAMS_WORDS, BitmapReadback, db_bitmap_params
from vkocr.agent.ocr.device_images import COPY_THREADS, DEFAULT_MAX_STAGING, DeviceImage, HostBuffer, ImageSlots
from vkocr.agent.ocr.image_kernels import (
    IMAGE_PARAMS_WORDS,
    CropSlot,
    ImageSource,
    crop_params,
    crop_params_words,
    image_params,
    padded_batch,
    record_crop_warp,
    record_image_preprocess,
)
from vkocr.agent.ocr.image_reference import resize_linear_u8
from vkocr.agent.ocr.prep import Prepared, prepared_image, unchanged
from vkocr.engine.device import Device
from vkocr.engine.errors import BindingTooLarge, KernelArgumentError
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.plan import Plan, StageHooks
from vkocr.engine.kernels.reduce import record_argmax
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor
from vkocr.log import get_logger

log = get_logger(__name__)

DEFAULT_IMAGE_CAPACITY = 2048 * 2048 * 3  # bytes: RapidOCR caps the longest side at 2000 before detection
MAX_REC_STEPS = 8192  # time steps per line (the recogniser makes one per 8 input columns)
SLOT_MEMORY_SHARE = 8  # the image slots take at most 1/8 of the device-local memory

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


ROLES = ("det", "cls", "rec")


class StreamStages:
    """The stages on one stream of the device (vk/streams.py): that stream's plans of the models it runs (the
    weights are the pipeline's, uploaded once), its staging, params and readback buffers. One thread drives it;
    the image slots it loads into and crops from are every stream's (ImageSlots). Streams of one device run side
    by side: one request's detection beside another's recognition (agent/serving/flow.py)."""

    def __init__(self, owner: GpuStages, index: int, models: dict[str, Model] | None = None) -> None:
        device = owner.device
        self.owner, self.index, self.device = owner, index, device
        self.stream = device.stream(index)
        self.backend, self.max_batch = owner.backend, owner.max_batch
        self.image_capacity, self.image_slots = owner.image_capacity, owner.image_slots
        self.roles: set[str] = set(ROLES)  # the models its warm-up prepares (set_lanes narrows them)
        self._models: dict[str, Model] = dict(models or {})  # a sibling is made for a role on first use
        self.image = DeviceImage(device, owner.slots, owner.max_staging, self.stream, owner.copiers)
        self.det_params = HostBuffer(device, IMAGE_PARAMS_WORDS)
        self.cls_params = HostBuffer(device, crop_params_words(self.max_batch))
        self.rec_params = HostBuffer(device, crop_params_words(self.max_batch))
        self._argmax = ArgmaxReadback(device, self.max_batch * MAX_REC_STEPS)
        self.db_params = HostBuffer(device, DB_BITMAP_PARAMS_WORDS)
        self._bitmap = BitmapReadback(device)
        self._last_bitmap: tuple[np.ndarray, np.ndarray] | None = None  # the bitmap and its row spans
        self.det_hooks = StageHooks(
            lambda rec, x: record_image_preprocess(rec, self.image.tensor, self.det_params.tensor, x),
            self._det_epilogue)
        self.cls_hooks = StageHooks(lambda rec, x: record_crop_warp(rec, self.image.tensor, self.cls_params.tensor, x))
        self.rec_hooks = StageHooks(lambda rec, x: record_crop_warp(rec, self.image.tensor, self.rec_params.tensor, x),
                                    self._rec_epilogue, read_outputs=False)
        self._slot = 0  # the slot this stream loaded last, which detect reads

    @property
    def models(self) -> dict[str, Model]:
        """This stream's model of every role (siblings made now for roles not used yet)."""
        for role in self.owner.base_models:
            self.model(role)
        return self._models

    def model(self, role: str) -> Model:
        found = self._models.get(role)
        if found is None:
            found = self._models[role] = self.owner.base_models[role].on_stream(self.stream)
        return found

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
        the image this stream loaded last; crops name their slot."""
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
        self.owner.slots.sources[slot] = ImageSource(h, w, self.image.offset(slot))
        self.owner.slots.host_images[slot] = (image, prep)
        self.owner.forget_cpu_image(slot)

    def _plan(self, role: str, shape: tuple[int, ...], hooks: StageHooks) -> Plan | None:
        """The plan, or None when this shape's tensors are larger than the device binds (the CPU runs it)."""
        if self.owner.on_cpu(role, shape):
            return None
        try:
            plan = self.model(role).plan(shape, hooks=hooks)
        except BindingTooLarge as exc:
            self.owner.refuse(role, shape, exc)
            return None
        assert isinstance(plan, Plan)
        return plan

    def detect(self, det_h: int, det_w: int, thresh: float = 0.3, use_dilation: bool = True) -> np.ndarray:
        """The probability map (a read-only view of the readback mapping, valid until this stream's next detect);
        DB's bitmap of it for `thresh` and `use_dilation` comes with it (`db_bitmap`)."""
        source = self.owner.slots.sources[self._slot]
        self.det_params.write(image_params(source.height, source.width, det_h, det_w, offset=source.offset,
                                           capacity=self.image.tensor.nbytes))
        self.db_params.write(db_bitmap_params(thresh, use_dilation))
        plan = self._plan("det", (1, 3, det_h, det_w), self.det_hooks)
        if plan is None:
            self._last_bitmap = None  # DB thresholds the map on the host
            return self.owner.on_cpu_stages(lambda cpu: cpu.detect(det_h, det_w, thresh, use_dilation),
                                            [self._slot], last=self._slot)
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
            sources = [self.owner.slots.sources[c.image] for c in crops]
        except KeyError as exc:
            raise KernelArgumentError(f"a crop of image slot {exc.args[0]}, where no image was loaded") from None
        return crop_params(0, 0, crops, batch, height, width, sources=sources, capacity=self.image.tensor.nbytes)

    def classify(self, crops: Sequence[CropSlot], height: int, width: int) -> np.ndarray:
        """Crops in a batch rounded up to a power of two (few plans); the warp zero-fills the spare slots."""
        batch = padded_batch(len(crops), self.max_batch)
        self.cls_params.write(self._crop_params(crops, batch, height, width))
        plan = self._plan("cls", (batch, 3, height, width), self.cls_hooks)
        if plan is None:
            return self.owner.on_cpu_stages(lambda cpu: cpu.classify(crops, height, width), [c.image for c in crops])
        return plan.run()[plan.output_names[0]][: len(crops)]

    def recognize(self, crops: Sequence[CropSlot], height: int, width: int, batch: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Crops in a batch rounded up to a power of two, at most `batch` (RapidOCR's batch size, so a full batch
        runs as it is): few shapes, little spare work; the warp zero-fills the spare slots."""
        batch = min(self.max_batch, padded_batch(len(crops), batch))
        self.rec_params.write(self._crop_params(crops, batch, height, width))
        plan = self._plan("rec", (batch, 3, height, width), self.rec_hooks)
        if plan is None:
            return self.owner.on_cpu_stages(lambda cpu: cpu.recognize(crops, height, width),
                                            [c.image for c in crops])
        plan.run()
        out_shape = plan.output_shapes[plan.output_names[0]]
        indices, values = self._argmax.read(tuple(out_shape[:-1]))
        return indices[:len(crops)], values[:len(crops)]

    def rec_output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return self.owner.base_models["rec"].output_shape(input_shape)

    def _hooks(self, role: str) -> StageHooks:
        return {"det": self.det_hooks, "cls": self.cls_hooks, "rec": self.rec_hooks}[role]

    def close(self) -> None:
        """Free this stream's plans, siblings and buffers (the pipeline's own models are its owner's)."""
        for role, model in self._models.items():
            if model is not self.owner.base_models.get(role):
                model.close()
        self._models.clear()
        self._argmax.close()
        self._bitmap.close()
        self.image.close()
        for buf in (self.det_params, self.cls_params, self.rec_params, self.db_params):
            buf.close()


class GpuStages(StreamStages):
    """The OCR stages on a Vulkan device: the models (`base_models`, weights uploaded once), `image_slots` images
    on the device at once (load's slot), so that one cls or rec batch may hold the crops of several (each slot
    costs image_capacity bytes of device memory), and a StreamStages per stream (`lane`). Itself stream 0's: the
    Stages protocol of a pipeline that one thread drives."""

    device: Device
    backend: str
    max_batch: int
    image_capacity: int
    image_slots: int
    max_staging: int
    slots: ImageSlots
    copiers: ThreadPoolExecutor | None

    def __init__(self, device: Device, model_paths: Mapping[str, Path], *, max_batch: int = 64,
                 image_capacity: int = DEFAULT_IMAGE_CAPACITY, max_staging_bytes: int = DEFAULT_MAX_STAGING,
                 image_slots: int = 1) -> None:
        self.device = device
        self.backend = f"vulkan ({device.info.name})"
        self.model_paths = dict(model_paths)
        self.base_models = {role: Model.load(path, device) for role, path in model_paths.items()}
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
        self.slots = ImageSlots(device, image_capacity, self.image_slots)
        # threads start on the first large image (ThreadPoolExecutor makes them on demand)
        self.copiers = (ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="vkocr-staging")
                        if COPY_THREADS > 1 else None)
        self._cpu: Any = None  # OrtStages, made when a shape first needs it
        self._cpu_images: dict[int, np.ndarray] = {}  # by slot, the images _cpu has loaded
        self._cpu_lock = threading.Lock()  # streams share it (rare: shapes larger than the device binds)
        self._on_cpu: set[tuple[str, tuple[int, ...]]] = set()  # shapes too large for this device's bindings
        self._lanes: dict[int, StreamStages] = {}
        super().__init__(self, 0, self.base_models)
        self._lanes[0] = self

    # -- the streams --------------------------------------------------------------------------------------------

    def lane(self, index: int) -> StreamStages:
        """The stages on stream `index` (this one for 0), made on first use."""
        found = self._lanes.get(index)
        if found is None:
            found = self._lanes[index] = StreamStages(self, index)
        return found

    def set_lanes(self, detect: int, read: int) -> None:
        """Streams 0..detect-1 run detection, the next `read` streams classification and recognition (read 0:
        stream 0 runs every stage): what a warm-up prepares on each (`prepare`, `reserve`, `learn_shape_class`)."""
        for index in range(detect + read):
            lane = self.lane(index)
            lane.roles = {"det"} if index < detect and read else {"cls", "rec"} if index >= detect else set(ROLES)

    def _lanes_for(self, role: str) -> list[StreamStages]:
        return [lane for lane in self._lanes.values() if role in lane.roles] or [self]

    # -- what the streams share -----------------------------------------------------------------------------------

    def on_cpu(self, role: str, shape: tuple[int, ...]) -> bool:
        return (role, shape) in self._on_cpu

    def refuse(self, role: str, shape: tuple[int, ...], exc: BindingTooLarge) -> None:
        log.warning("shape_on_cpu", model=role, shape=list(shape), reason=str(exc))
        self._on_cpu.add((role, shape))

    def forget_cpu_image(self, slot: int) -> None:
        self._cpu_images.pop(slot, None)

    def on_cpu_stages(self, work: Callable[[Any], Any], slots: Sequence[int], last: int | None = None) -> Any:
        """`work` on the CPU backend's stages with the images of `slots` loaded (`last` loaded last: its detect
        reads it); the sessions are made on first use, and one stream at a time uses them."""
        from vkocr.agent.ocr.ort_stages import OrtStages

        with self._cpu_lock:
            if self._cpu is None:
                self._cpu = OrtStages(self.model_paths)
            order = [*sorted(set(slots) - {last}), *([last] if last is not None else [])]
            for slot in order:
                image, prep = self.slots.host_images[slot]
                if self._cpu_images.get(slot) is not image or slot == last:
                    self._cpu.load(image, prep, slot)
                    self._cpu_images[slot] = image
            return work(self._cpu)

    @property
    def shapes_on_cpu(self) -> list[tuple[str, tuple[int, ...]]]:
        """(model role, input shape) of the shapes run on the CPU: too large for this device's bindings."""
        return sorted(self._on_cpu)

    def plan_stats(self) -> dict[str, dict[str, Any]]:
        """Per model role, over every stream: plans cached, plans built so far, distinct input shapes planned, the
        memory the plans hold, the host time of every plan built (ms, in order), and the shape classes traced so
        far (each new plan of another shape came from one's compiled function: vk/graph/shape_classes.py)."""
        stats: dict[str, dict[str, Any]] = {}
        for role in self.base_models:
            models = [lane._models[role] for lane in self._lanes.values() if role in lane._models]
            shapes = set().union(*(m.shapes_seen for m in models))
            stats[role] = {"plans": sum(m.plan_count for m in models),
                           "recordings": sum(m.recordings for m in models), "distinct_shapes": len(shapes),
                           "plan_memory_bytes": sum(m.plan_memory_bytes for m in models),
                           "build_ms": [ms for m in models for ms in m.build_ms],
                           "build_kinds": [kind for m in models for kind in m.build_kinds],
                           "classes_traced": sum(m.shape_classes.traced for m in models
                                                 if m.shape_classes is not None)}
        return stats

    def recordings_total(self) -> int:
        """Plans recorded so far on every stream (cheap: for deciding whether plan_stats changed)."""
        return sum(m.recordings for lane in list(self._lanes.values()) for m in list(lane._models.values()))

    def reserve(self, role: str, shape: tuple[int, ...]) -> None:
        """Size the shared memory of model `role`'s plans for this input shape now, recording nothing (on every
        stream that runs the role)."""
        for lane in self._lanes_for(role):
            lane.model(role).reserve(shape, hooks=lane._hooks(role))

    def prepare(self, role: str, shape: tuple[int, ...]) -> None:
        """Record the plan of model `role` ("det", "cls", "rec") for this input shape now, without running it
        (warm start), on every stream that runs the role; shapes are what detect/classify/recognize pass: det
        (1, 3, h, w), cls and rec (batch, 3, height, width); one too large for the device's bindings is left to
        the CPU."""
        for lane in self._lanes_for(role):
            lane._plan(role, shape, lane._hooks(role))

    def learn_shape_class(self, role: str, shape: tuple[int, ...]) -> bool:
        """Trace the shape class of model `role`'s plans for this shape unless one is kept (recording nothing), on
        every stream that runs the role; True when one was traced."""
        traced = False
        for lane in self._lanes_for(role):
            traced = lane.model(role).learn_shape_class(shape, hooks=lane._hooks(role)) or traced
        return traced

    def close(self) -> None:
        for index, lane in list(self._lanes.items()):
            if index != 0:
                lane.close()
        self._lanes.clear()
        if self._cpu is not None:
            self._cpu.close()
        StreamStages.close(self)
        for model in self.base_models.values():
            model.close()
        if self.copiers is not None:
            self.copiers.shutdown()
        self.slots.close()
