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

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vkocr.agent.ocr.device_images import DEFAULT_MAX_STAGING, DeviceImage
from vkocr.agent.ocr.gpu_shared import DEFAULT_IMAGE_CAPACITY, SharedGpu
from vkocr.agent.ocr.gpu_stream import JOINT_BATCHES, StreamStages
from vkocr.agent.ocr.image_kernels import Crop
from vkocr.agent.ocr.prep import Prepared
from vkocr.agent.ocr.stages import RecBatch
from vkocr.engine.device import Device
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.plan import StageHooks
from vkocr.engine.graph.precision import PrecisionPlan


class GpuStages:
    """The OCR stages on a Vulkan device (a StageSet): what the streams share (SharedGpu: the models, `image_slots`
    images on the device at once, so that one cls or rec batch may hold the crops of several, the CPU spill) and
    a StreamStages per stream (`stream`). As Stages, it is stream 0's: a pipeline that one thread drives."""

    warms = True

    def __init__(self, device: Device, model_paths: Mapping[str, Path], *, max_batch: int = 64,
                 image_capacity: int = DEFAULT_IMAGE_CAPACITY, max_staging_bytes: int = DEFAULT_MAX_STAGING,
                 image_slots: int = 1, precision: Mapping[str, PrecisionPlan] | None = None) -> None:
        """`precision`: each model's storage precision by role (fp32 for a role not named)."""
        self.shared = SharedGpu(device, model_paths, max_batch=max_batch, image_capacity=image_capacity,
                                max_staging_bytes=max_staging_bytes, image_slots=image_slots, precision=precision)
        self.device, self.backend, self.max_batch = device, self.shared.backend, max_batch
        self.image_capacity, self.image_slots = image_capacity, self.shared.image_slots
        self.model_paths = self.shared.model_paths
        self.orients = "ori" in self.shared.base_models
        self._streams: dict[int, StreamStages] = {}
        self._joint_batches = JOINT_BATCHES
        self._first = self.stream(0)

    # -- the streams --------------------------------------------------------------------------------------------

    def stream(self, index: int) -> StreamStages:
        """The stages on stream `index`, made on first use."""
        found = self._streams.get(index)
        if found is None:
            found = self._streams[index] = StreamStages(self.shared, index)
            found.joint_batches = self._joint_batches
        return found

    def set_lanes(self, detect: int, read: int) -> None:
        """Streams 0..detect-1 run detection, the next `read` streams classification and recognition (read 0:
        stream 0 runs every stage): what a warm-up prepares on each (`prepare`, `reserve`, `learn_shape_class`)."""
        models = set(self.shared.base_models)
        for index in range(detect + read):
            lane = self.stream(index)
            # the page orientation model runs in a request's first half, beside det
            lane.roles = ({"det", "ori"} & models if index < detect and read else {"cls", "rec"} if index >= detect
                          else models)

    def set_joint_batches(self, count: int) -> None:
        """Up to `count` rec batches in one submission on every stream, this one's and those made later."""
        if count < 1:
            raise ValueError(f"joint batches must be at least 1, got {count}")
        self._joint_batches = count
        for lane in self._streams.values():
            lane.joint_batches = count

    def _lanes_for(self, role: str) -> list[StreamStages]:
        return [lane for lane in self._streams.values() if role in lane.roles] or [self._first]

    # -- Stages: stream 0's -------------------------------------------------------------------------------------

    @property
    def image(self) -> DeviceImage:
        return self._first.image

    @property
    def models(self) -> dict[str, Model]:
        return self._first.models

    def hooks(self, role: str) -> StageHooks | None:
        return self._first.hooks(role)

    def orient(self, image: np.ndarray) -> np.ndarray:
        return self._first.orient(image)

    def load(self, image: np.ndarray, prep: Prepared, slot: int = 0, turn: int = 0) -> None:
        self._first.load(image, prep, slot, turn)

    def detect(self, det_h: int, det_w: int, thresh: float = 0.3, use_dilation: bool = True) -> np.ndarray:
        return self._first.detect(det_h, det_w, thresh, use_dilation)

    def db_bitmap(self) -> np.ndarray | None:
        return self._first.db_bitmap()

    def db_row_spans(self) -> np.ndarray | None:
        return self._first.db_row_spans()

    def classify(self, crops: Sequence[Crop], height: int, width: int) -> np.ndarray:
        return self._first.classify(crops, height, width)

    def recognize(self, crops: Sequence[Crop], height: int, width: int, batch: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
        return self._first.recognize(crops, height, width, batch)

    @property
    def joint_batches(self) -> int:
        return self._first.joint_batches

    def recognize_many(self, batches: Sequence[RecBatch]) -> list[tuple[np.ndarray, np.ndarray]]:
        return self._first.recognize_many(batches)

    def wait_seconds(self) -> float:
        return self._first.wait_seconds()

    # -- the plans ----------------------------------------------------------------------------------------------

    def rec_output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return self.shared.base_models["rec"].output_shape(input_shape)

    @property
    def shapes_on_cpu(self) -> list[tuple[str, tuple[int, ...]]]:
        """(model role, input shape) of the shapes run on the CPU: too large for this device's bindings."""
        return self.shared.cpu.shapes

    def plan_stats(self) -> dict[str, dict[str, Any]]:
        """Per model role, over every stream: plans cached, plans built so far, distinct input shapes planned, the
        memory the plans hold (rec's with its joint runs' copies), the host time of every plan built (ms, in
        order), and the shape classes traced so far (each new plan of another shape came from one's compiled
        function: vk/graph/shape_classes.py)."""
        stats: dict[str, dict[str, Any]] = {}
        made = [lane.made_models() for lane in self._streams.values()]
        for role in self.shared.base_models:
            models = [m[role] for m in made if role in m]
            shapes = set().union(*(m.shapes_seen for m in models))
            joint = sum(lane.joint_memory_bytes for lane in self._streams.values()) if role == "rec" else 0
            stats[role] = {"plans": sum(m.plan_count for m in models),
                           "recordings": sum(m.recordings for m in models), "distinct_shapes": len(shapes),
                           "plan_memory_bytes": sum(m.plan_memory_bytes for m in models) + joint,
                           "build_ms": [ms for m in models for ms in m.build_ms],
                           "build_kinds": [kind for m in models for kind in m.build_kinds],
                           "classes_traced": sum(m.shape_classes.traced for m in models
                                                 if m.shape_classes is not None)}
        return stats

    def recordings_total(self) -> int:
        """Plans recorded so far on every stream (cheap: for deciding whether plan_stats changed)."""
        return sum(m.recordings for lane in list(self._streams.values()) for m in lane.made_models().values())

    def reserve(self, role: str, shape: tuple[int, ...]) -> None:
        """Size the shared memory of model `role`'s plans for this input shape now, recording nothing (on every
        stream that runs the role)."""
        for lane in self._lanes_for(role):
            lane.model(role).reserve(shape, hooks=lane.hooks(role))

    def prepare(self, role: str, shape: tuple[int, ...]) -> None:
        """Record the plan of model `role` ("det", "cls", "rec") for this input shape now, without running it
        (warm start), on every stream that runs the role; shapes are what detect/classify/recognize pass: det
        (1, 3, h, w), cls and rec (batch, 3, height, width); one too large for the device's bindings is left to
        the CPU."""
        for lane in self._lanes_for(role):
            lane.plan(role, shape)

    def learn_shape_class(self, role: str, shape: tuple[int, ...]) -> bool:
        """Trace the shape class of model `role`'s plans for this shape unless one is kept (recording nothing), on
        every stream that runs the role; True when one was traced."""
        traced = False
        for lane in self._lanes_for(role):
            traced = lane.model(role).learn_shape_class(shape, hooks=lane.hooks(role)) or traced
        return traced

    def close(self) -> None:
        for lane in self._streams.values():
            lane.close()
        self._streams.clear()
        self.shared.close()
