"""The OCR stages on one stream of the device (vk/streams.py), one submission each: that stream's plans of the
models (the weights are SharedGpu's, uploaded once), its staging, params and readback buffers; the image slots it
loads into and crops from are every stream's (agent/ocr/gpu_shared.py). agent/ocr/gpu_stages.py says what each
stage does on the GPU."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from vkocr.agent.ocr.db_bitmap import DB_BITMAP_PARAMS_WORDS, BitmapReadback, db_bitmap_params
from vkocr.agent.ocr.device_images import DeviceImage, HostBuffer
from vkocr.agent.ocr.gpu_shared import SharedGpu
from vkocr.agent.ocr.image_kernels import (
    IMAGE_PARAMS_WORDS,
    Crop,
    ImageSource,
    crop_params,
    crop_params_words,
    image_params,
    padded_batch,
    record_crop_warp,
    record_image_preprocess,
)
from vkocr.agent.ocr.image_reference import resize_linear_u8
from vkocr.agent.ocr.orientation import orientation_input
from vkocr.agent.ocr.prep import Prepared, prepared_image, unchanged
from vkocr.agent.ocr.stages import RecBatch
from vkocr.engine.device import Device
from vkocr.engine.errors import BindingTooLarge, KernelArgumentError, ModelError
from vkocr.engine.graph.joint import JointRuns
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.plan import Plan, StageHooks
from vkocr.engine.kernels.reduce import record_argmax
from vkocr.engine.memory import Allocation
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor
from vkocr.log import get_logger

log = get_logger(__name__)

MAX_REC_STEPS = 8192  # time steps per line (the recogniser makes one per 8 input columns)
ROLES = ("det", "cls", "rec")
# rec batches of different widths in one submission (vk/graph/joint.py), unless told otherwise: one, since the
# joint recording is made per run (4.3 ms of host time for four batches on the 2-core build machine, against
# 2.6 to 4.7 ms of GPU time saved on an H100) and a lone image waits for both; the agent takes
# throughput.joint_batches, 1 by default too (with 4 it answered 8 % fewer images per second on an H100)
JOINT_BATCHES = 1
JOINT_COPY_BYTES = 128 << 20  # activations a rec batch may take in a joint run's copy (larger ones run apart)
JOINT_MEMORY_SHARE = 32  # and at most this fraction of the device's memory (a small board's goes to the plans)


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

    def record(self, rec: Recorder, probs: Tensor, softmax: bool = False) -> None:
        """`probs`: the recogniser's probabilities, or with `softmax` its logits (agent/ocr/rec_logits.py)."""
        shape = tuple(probs.shape[:-1])
        count = math.prod(shape)
        if count > self.capacity:
            raise KernelArgumentError(f"recogniser output of {shape} time steps exceeds the {self.capacity} "
                                      "that the argmax buffers hold")
        indices = Tensor(self.indices, shape, np.dtype(np.int32))
        values = Tensor(self.values, shape, np.dtype(np.float32))
        record_argmax(rec, probs, indices, values, axis=-1, softmax=softmax)
        rec.copy(indices.view, self.indices_back.view)
        rec.copy(values.view, self.values_back.view)

    def read(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        self.indices_back.invalidate()
        self.values_back.invalidate()
        count = int(np.prod(shape))
        return (self.indices_back.array(np.int32)[:count].reshape(shape).copy(),
                self.values_back.array(np.float32)[:count].reshape(shape).copy())

    @property
    def allocations(self) -> list[Allocation]:
        return [self.indices, self.values, self.indices_back, self.values_back]

    def close(self) -> None:
        for a in self.allocations:
            self.device.pool.free(a)


class RecMember:
    """The buffers of one rec batch in a joint run beside the stream's own (its crop params and argmax), and
    where the stream's recording moves to them."""

    def __init__(self, device: Device, max_batch: int, first: tuple[HostBuffer, ArgmaxReadback]) -> None:
        self.params = HostBuffer(device, crop_params_words(max_batch))
        self.argmax = ArgmaxReadback(device, max_batch * MAX_REC_STEPS)
        params, argmax = first
        self.moves = [(theirs.view, mine.view) for theirs, mine in
                      zip([params.alloc, *argmax.allocations], [self.params.alloc, *self.argmax.allocations])]

    def close(self) -> None:
        self.params.close()
        self.argmax.close()


class StreamStages:
    """The stages on one stream of the device (vk/streams.py): that stream's plans of the models it runs (the
    weights are the pipeline's, uploaded once), its staging, params and readback buffers. One thread drives it;
    the image slots it loads into and crops from are every stream's (ImageSlots). Streams of one device run side
    by side: one request's detection beside another's recognition (agent/serving/flow.py)."""

    def __init__(self, shared: SharedGpu, index: int) -> None:
        device = shared.device
        self.shared, self.index, self.device = shared, index, device
        self.stream = device.stream(index)
        self.backend, self.max_batch = shared.backend, shared.max_batch
        self.image_capacity, self.image_slots = shared.image_capacity, shared.image_slots
        self.roles: set[str] = set(shared.base_models)  # the models its warm-up prepares (set_lanes narrows them)
        self.orients = "ori" in shared.base_models
        # stream 0 runs the shared models themselves; another stream makes a sibling for a role on first use
        self._models: dict[str, Model] = dict(shared.base_models) if index == 0 else {}
        self.image = DeviceImage(device, shared.slots, shared.max_staging, self.stream, shared.copiers)
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
        self.joint_batches = JOINT_BATCHES
        self._joint: JointRuns | None = None  # made on the first joint run
        self._members: list[RecMember] = []  # the rec batches' buffers beside the stream's own, in joint runs

    @property
    def models(self) -> dict[str, Model]:
        """This stream's model of every role (siblings made now for roles not used yet)."""
        for role in self.shared.base_models:
            self.model(role)
        return self._models

    def made_models(self) -> dict[str, Model]:
        """This stream's models made so far, by role (none made for the asking)."""
        return dict(self._models)

    def model(self, role: str) -> Model:
        found = self._models.get(role)
        if found is None:
            found = self._models[role] = self.shared.base_models[role].on_stream(self.stream)
        return found

    def _det_epilogue(self, rec: Recorder, outputs: dict[str, Tensor]) -> None:
        (prob,) = outputs.values()
        self._bitmap.record(rec, prob, self.db_params.tensor)

    def _rec_epilogue(self, rec: Recorder, outputs: dict[str, Tensor]) -> None:
        (out,) = outputs.values()
        self._argmax.record(rec, out, softmax=self.shared.rec_logits)

    def load(self, image: np.ndarray, prep: Prepared, slot: int = 0, turn: int = 0) -> None:
        """Prepare this request's image (H×W×3 uint8) as ``prep`` says into image slot `slot`, where every stage's
        shaders read it: a resize and letterbox in a shader, which turns the image `turn` quarter turns first
        (a page turned upright; the raw image goes into staging as it is); on the host in the rare case of two
        resizes, and for an image too big for staging (max_staging_bytes, or the host-visible memory there is).
        detect reads the image this stream loaded last; crops name their slot."""
        if len(prep.sizes) > 1 or not self.image.can_stage(image.nbytes):
            upright = np.rot90(image, turn) if turn else image
            image, prep, turn = prepared_image(upright, prep, resize_linear_u8), unchanged(*prep.shape), 0
        h, w = prep.shape
        if 3 * h * w > self.image_capacity:
            raise KernelArgumentError(f"prepared image of {w}×{h} pixels needs {3 * h * w} bytes; the GPU image "
                                      f"buffer holds {self.image_capacity}")
        if prep.sizes or prep.pad_top or turn:
            out_h, out_w = prep.sizes[0] if prep.sizes else np.rot90(image, turn).shape[:2]
            self.image.resize(image, out_h, out_w, prep.pad_top, slot, turn)
        else:
            self.image.copy(image, slot)
        self._slot = slot
        self.shared.slots.sources[slot] = ImageSource(h, w, self.image.offset(slot))
        self.shared.slots.host_images[slot] = (np.rot90(image, turn) if turn else image, prep)
        self.shared.cpu.forget_image(slot)

    def orient(self, image: np.ndarray) -> np.ndarray:
        """The page orientation model on the image's 224×224 input (made on the host as the reference makes it:
        cv2's Lanczos-4 resize; 600 KB go up, 4 probabilities come back)."""
        if not self.orients:
            raise KernelArgumentError("no page orientation model loaded (model role ori)")
        x = orientation_input(image)
        plan = self.plan("ori", x.shape)
        if plan is None:
            return np.asarray(self.shared.cpu.run(lambda cpu: cpu.orient(image), []))
        return plan.run(x)[plan.output_names[0]][0]

    def plan(self, role: str, shape: tuple[int, ...]) -> Plan | None:
        """The plan, or None when this shape's tensors are larger than the device binds (the CPU runs it)."""
        if self.shared.cpu.has(role, shape):
            return None
        try:
            plan = self.model(role).plan(shape, hooks=self.hooks(role))
        except BindingTooLarge as exc:
            self.shared.cpu.take(role, shape, exc)
            return None
        assert isinstance(plan, Plan)
        return plan

    def detect(self, det_h: int, det_w: int, thresh: float = 0.3, use_dilation: bool = True) -> np.ndarray:
        """The probability map (a read-only view of the readback mapping, valid until this stream's next detect);
        DB's bitmap of it for `thresh` and `use_dilation` comes with it (`db_bitmap`)."""
        source = self.shared.slots.sources[self._slot]
        self.det_params.write(image_params(source.height, source.width, det_h, det_w, offset=source.offset,
                                           capacity=self.image.tensor.nbytes))
        self.db_params.write(db_bitmap_params(thresh, use_dilation))
        plan = self.plan("det", (1, 3, det_h, det_w))
        if plan is None:
            self._last_bitmap = None  # DB thresholds the map on the host
            return self.shared.cpu.run(lambda cpu: cpu.detect(det_h, det_w, thresh, use_dilation),
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

    def _crop_params(self, crops: Sequence[Crop], batch: int, height: int, width: int) -> np.ndarray:
        if len(crops) > self.max_batch:
            raise KernelArgumentError(f"{len(crops)} crops in one batch; at most {self.max_batch}")
        try:
            sources = [self.shared.slots.sources[c.image] for c in crops]
        except KeyError as exc:
            raise KernelArgumentError(f"a crop of image slot {exc.args[0]}, where no image was loaded") from None
        return crop_params(0, 0, crops, batch, height, width, sources=sources, capacity=self.image.tensor.nbytes)

    def classify(self, crops: Sequence[Crop], height: int, width: int) -> np.ndarray:
        """Crops in a batch rounded up to a power of two (few plans); the warp zero-fills the spare slots."""
        batch = padded_batch(len(crops), self.max_batch)
        self.cls_params.write(self._crop_params(crops, batch, height, width))
        plan = self.plan("cls", (batch, 3, height, width))
        if plan is None:
            return self.shared.cpu.run(lambda cpu: cpu.classify(crops, height, width), [c.image for c in crops])
        return plan.run()[plan.output_names[0]][: len(crops)]

    def recognize(self, crops: Sequence[Crop], height: int, width: int, batch: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Crops in a batch rounded up to a power of two, at most `batch` (RapidOCR's batch size, so a full batch
        runs as it is): few shapes, little spare work; the warp zero-fills the spare slots."""
        batch = min(self.max_batch, padded_batch(len(crops), batch))
        self.rec_params.write(self._crop_params(crops, batch, height, width))
        plan = self.plan("rec", (batch, 3, height, width))
        if plan is None:
            return self.shared.cpu.run(lambda cpu: cpu.recognize(crops, height, width),
                                            [c.image for c in crops])
        plan.run()
        out_shape = plan.output_shapes[plan.output_names[0]]
        indices, values = self._argmax.read(tuple(out_shape[:-1]))
        return indices[:len(crops)], values[:len(crops)]

    def recognize_many(self, batches: Sequence[RecBatch]) -> list[tuple[np.ndarray, np.ndarray]]:
        """`recognize` of each batch, up to `joint_batches` at a time in one submission (vk/graph/joint.py): a
        batch of a few lines leaves most of the GPU idle between barriers, which the others then fill. A batch
        the CPU runs runs as `recognize` does, and so does one too large for a copy beside a larger one."""
        results: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(batches)
        step = max(1, self.joint_batches)
        for start in range(0, len(batches), step):
            self._recognize_jointly(batches, range(start, min(len(batches), start + step)), results)
        done = [r for r in results if r is not None]
        assert len(done) == len(batches)
        return done

    def _recognize_jointly(self, batches: Sequence[RecBatch], indices: range,
                           results: list[tuple[np.ndarray, np.ndarray] | None]) -> None:
        if len(indices) == 1 or self.model("rec").shape_classes is None:  # commands come again from the classes
            for i in indices:
                results[i] = self.recognize(*batches[i])
            return
        sizes = {i: min(self.max_batch, padded_batch(len(batches[i].crops), batches[i].batch)) for i in indices}
        plans: dict[int, Plan] = {}
        on_cpu: set[int] = set()
        for _ in range(2):  # a plan made later may grow the shared memory, which stales those made before
            for i in indices:
                if i not in on_cpu and (i not in plans or plans[i].stale):
                    plan = self.plan("rec", (sizes[i], 3, batches[i].height, batches[i].width))
                    if plan is None:
                        on_cpu.add(i)
                    else:
                        plans[i] = plan
        joint = self._joint_runs()
        # the largest first, in the model's own memory; the others in copies that hold what their tensors take
        current = sorted((i for i in plans if not plans[i].stale), key=lambda i: sizes[i] * batches[i].width,
                         reverse=True)
        try:
            together = current[:1] + [i for i in current[1:] if joint.fits(plans[i])]
            if len(together) > 1:
                while len(self._members) < len(together) - 1:
                    self._members.append(RecMember(self.device, self.max_batch, (self.rec_params, self._argmax)))
                buffers = [(self.rec_params, self._argmax)] + [(m.params, m.argmax) for m in self._members]
                for i, (params, _) in zip(together, buffers):
                    b = batches[i]
                    params.write(self._crop_params(b.crops, sizes[i], b.height, b.width))
                joint.run([plans[i] for i in together], [[]] + [m.moves for m in self._members[:len(together) - 1]])
                for i, (_, argmax) in zip(together, buffers):
                    out_shape = plans[i].output_shapes[plans[i].output_names[0]]
                    found, values = argmax.read(tuple(out_shape[:-1]))
                    results[i] = found[:len(batches[i].crops)], values[:len(batches[i].crops)]
        except ModelError as exc:  # a class traced anew under the plans (their memory replaced): apart
            log.info("joint_run_skipped", reason=str(exc))
        for i in indices:  # the CPU's, those no copy holds, a round refused: as recognize runs them
            if results[i] is None:
                results[i] = self.recognize(*batches[i])

    @property
    def joint_memory_bytes(self) -> int:
        """Device memory of the joint runs' copies of rec's activations (counted with rec's plans)."""
        return self._joint.nbytes if self._joint is not None else 0

    def _joint_runs(self) -> JointRuns:
        if self._joint is not None and self._joint.width != self.joint_batches:
            self._joint.close()
            self._joint = None
        if self._joint is None:
            info = self.device.info
            limit = min(JOINT_COPY_BYTES, (info.device_local_mib << 20) // JOINT_MEMORY_SHARE)
            self._joint = JointRuns(self.model("rec"), self.joint_batches, copy_limit_bytes=limit,
                                    stream=self.stream)
        return self._joint

    def wait_seconds(self) -> float:
        return float(self.stream.wait_seconds)

    def hooks(self, role: str) -> StageHooks | None:
        """The GPU work around model `role`'s network (None for the page orientation model: its input comes from
        the host)."""
        return {"det": self.det_hooks, "cls": self.cls_hooks, "rec": self.rec_hooks}.get(role)

    def close(self) -> None:
        """Free this stream's plans, siblings and buffers (the shared models are SharedGpu's to close)."""
        for role, model in self._models.items():
            if model is not self.shared.base_models.get(role):
                model.close()
        if self._joint is not None:
            self._joint.close()
            self._joint = None
        for member in self._members:
            member.close()
        self._members.clear()
        self._models.clear()
        self._argmax.close()
        self._bitmap.close()
        self.image.close()
        for buf in (self.det_params, self.cls_params, self.rec_params, self.db_params):
            buf.close()
