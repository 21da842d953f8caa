"""The OCR pipeline: decode → prepare → det → DB boxes → crops → cls → rec → CTC → plugins.

The orchestration here mirrors RapidOCR step by step (its batching by aspect ratio, its crop rules, its
filters), so that our lines match its lines: 1.4.4's, or where 3.10's code differs the variants its procedure
names (options.procedure, agent/ocr/procedures.py); the stages themselves run on the GPU (agent/ocr/gpu_stages.py), on
the CPU backend (onnxruntime: agent/ocr/ort_stages.py) or on the NumPy reference executor (numpy_stages.py).
"""

from __future__ import annotations

import dataclasses
import gc
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, Self

import numpy as np

from vkocr.agent.errors import RequestStopped, StopWho
from vkocr.agent.ocr.backend_choice import choose_backend
from vkocr.agent.ocr.image_kernels import CropSlot, crop_slots, padded_batch
from vkocr.agent.ocr.image_reference import det_input_size
from vkocr.agent.ocr.images import decode_image
from vkocr.agent.ocr.model_files import PPOCRV4_FILES, models_dir
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.prep import Prepared, preparation, to_original
from vkocr.agent.ocr.procedures import PROCEDURES
from vkocr.log import get_logger
from vkocr.postproc.ctc import CtcText, ctc_decode, load_charset
from vkocr.postproc.db import db_boxes
from vkocr.postproc.order import sort_boxes, sort_boxes_in_lines
from vkocr.postproc.registry import PluginChain, build_chain
from vkocr.postproc.result import CharBox, OcrLine, OcrResult
from vkocr.postproc.wordboxes import char_boxes
from vkocr.postproc.wordboxes_310 import word_boxes

log = get_logger(__name__)

StopCheck = Callable[[], StopWho | None]  # who no longer wants the answer, None while it is still wanted


class Stages(Protocol):
    """What runs the networks: the GPU stages, the CPU backend or the NumPy reference."""

    backend: str
    max_batch: int  # crops one classify or recognize call takes
    image_slots: int  # images held at once: a batch may hold crops of each (CropSlot.image names the slot)

    def load(self, image: np.ndarray, prep: Prepared, slot: int = 0) -> None:
        """The image (H×W×3 uint8 RGB), prepared as ``prep`` says, into image slot `slot`: detect reads the one
        loaded last, crops the one their slot names."""

    def detect(self, det_h: int, det_w: int, thresh: float = 0.3, use_dilation: bool = True) -> np.ndarray:
        """Probability map (det_h × det_w) of the loaded image resized to det_h × det_w (valid until the next
        call); `thresh` and `use_dilation` are DB's, for a stage that makes the bitmap too."""

    def db_bitmap(self) -> np.ndarray | None:
        """DB's bitmap of the last map (H×W uint8), when the stage made it (the GPU's); None: DB makes it."""

    def db_row_spans(self) -> np.ndarray | None:
        """With that bitmap, the columns of each of its rows that hold its set pixels (H×2, [start, stop)); None:
        DB traces contours over the whole bitmap."""

    def classify(self, crops: Sequence[CropSlot], height: int, width: int) -> np.ndarray:
        """(n, 2) class probabilities of the crops (0°, 180°)."""

    def recognize(self, crops: Sequence[CropSlot], height: int, width: int, batch: int
                  ) -> tuple[np.ndarray, np.ndarray]:
        """(n, T) argmax indices and (n, T) max probabilities per time step; `batch`: the batch size to run
        (spare slots are zero), for fewer distinct shapes."""

    def rec_output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The recogniser's output shape for this input shape."""

    def close(self) -> None: ...


def ppocrv4_paths(directory: Path | None = None) -> dict[str, Path]:
    """ppocrv4's files by role, in `directory` else models_dir(): what OcrOptions()'s procedure (RapidOCR 1.4.4's)
    reads."""
    root = directory or models_dir()
    return {m.role: root / m.filename for m in PPOCRV4_FILES}


def ratio_batches(ratios: Sequence[float], batch: int) -> list[list[int]]:
    """Indices grouped as RapidOCR groups them: sorted by width/height ratio (np.argsort), `batch` at a time."""
    order = np.argsort(np.array(ratios, dtype=np.float64))
    return [order[i:i + batch].tolist() for i in range(0, len(order), batch)]


def slot_ratio(slot: CropSlot) -> float:
    """Width/height of the crop as the model sees it (after the 90° turn): RapidOCR's sort key."""
    width, height = slot.model_size
    return width / height


def whole_image_quad(h: int, w: int) -> np.ndarray:
    """The quad that samples the whole image unchanged (the line of a request without detection)."""
    return np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)


def warm_plan_shapes(image_sizes: Sequence[tuple[int, int]], opts: OcrOptions, max_batch: int
                     ) -> list[tuple[str, tuple[int, ...]]]:
    """(role, input shape) of the plans a request on images of these (width, height) sizes is likely to need,
    for recording before the first request: det for each size as the request path computes it, cls for every
    batch size it rounds to, rec for the common line widths."""
    shapes: list[tuple[str, tuple[int, ...]]] = []
    for w, h in image_sizes:
        prep = preparation(h, w, max_side_len=opts.max_side_len, min_side_len=opts.min_side_len,
                           min_height=opts.min_height, width_height_ratio=opts.width_height_ratio,
                           letterbox=opts.use_det)
        det_h, det_w = det_input_size(*prep.shape, opts.limit_side_len, opts.limit_type)
        if opts.use_det and det_h > 0 and det_w > 0 and ("det", (1, 3, det_h, det_w)) not in shapes:
            shapes.append(("det", (1, 3, det_h, det_w)))
    if opts.use_cls:
        batch = 1
        while batch <= max_batch:
            shapes.append(("cls", (batch, 3, opts.cls_height, opts.cls_width)))
            batch *= 2
    if opts.use_rec:
        shapes += [("rec", shape) for shape in rec_warm_shapes(opts)]
    return shapes


def reserve_shapes(opts: OcrOptions) -> list[tuple[str, tuple[int, ...]]]:
    """(role, input shape) whose memory a warm-up reserves without recording a plan: det's largest input (the
    longest side allowed, at the widest aspect before a letterbox, resized as a request would be), so that the
    det plans' shared memory is sized once: a region that grows later drops every plan recorded before it."""
    if not opts.use_det:
        return []
    w = opts.max_side_len
    h = max(1, math.ceil(w / opts.width_height_ratio))
    prep = preparation(h, w, max_side_len=opts.max_side_len, min_side_len=opts.min_side_len,
                       min_height=opts.min_height, width_height_ratio=opts.width_height_ratio, letterbox=True)
    det_h, det_w = det_input_size(*prep.shape, opts.limit_side_len, opts.limit_type)
    return [("det", (1, 3, det_h, det_w))] if det_h > 0 and det_w > 0 else []


REC_WARM_MAX_WIDTH = 960  # px at rec_height 48: a line 20 times as wide as it is tall
REC_RESERVE_WIDTH = 1600  # the widest rec batch recorded at warm-up: its memory serves every narrower one


def rec_tensor_width(width: int, opts: OcrOptions) -> int:
    """The rec input width of a batch RapidOCR runs at `width`: rounded up to the bucket."""
    return -(-width // opts.rec_width_bucket) * opts.rec_width_bucket


def rec_warm_shapes(opts: OcrOptions) -> list[tuple[int, ...]]:
    """The rec input shapes most lines land in, at every batch size the GPU stages round to: RapidOCR's
    narrowest batch width (most lines), and with width buckets every bucket up to REC_WARM_MAX_WIDTH; first a
    full batch at REC_RESERVE_WIDTH, so that the plans' shared memory rarely grows (growing re-records them)."""
    first = rec_tensor_width(opts.rec_width, opts)
    widths = [first] if opts.rec_width_bucket == 1 else range(first, max(first, REC_WARM_MAX_WIDTH) + 1,
                                                              opts.rec_width_bucket)
    reserve = (opts.rec_batch, 3, opts.rec_height, rec_tensor_width(max(first, REC_RESERVE_WIDTH), opts))
    return [reserve, *((batch, 3, opts.rec_height, w) for w in widths for batch in rec_batch_sizes(opts))]


def rec_batch_sizes(opts: OcrOptions) -> list[int]:
    """The rec batch sizes the GPU stages round a request's lines to."""
    return sorted({padded_batch(n, opts.rec_batch) for n in range(1, opts.rec_batch + 1)})


REC_CLASS_STEP = 8  # px between the rec widths whose shape classes a warm-up learns


def rec_class_shapes(opts: OcrOptions) -> list[tuple[int, ...]]:
    """Rec shapes across the width range at every batch size, for a warm-up to learn their shape classes
    (vk/graph/shape_classes.py; no plan is recorded): a rec model's classes split along the width where a GEMM
    changes tile, about ten per batch size, and a line width the warm-up did not learn would trace on the request
    path."""
    first = rec_tensor_width(opts.rec_width, opts)
    last = rec_tensor_width(max(first, REC_RESERVE_WIDTH), opts)
    step = max(REC_CLASS_STEP, opts.rec_width_bucket)
    return [(batch, 3, opts.rec_height, rec_tensor_width(w, opts)) for batch in rec_batch_sizes(opts)
            for w in range(first, last + 1, step)]


class OcrPipeline:
    """One OCR engine: the three models on one backend, options, and a plugin chain. Not thread-safe: one
    worker drives it (the agent's GPU worker)."""

    def __init__(self, stages: Stages, charset: list[str], options: OcrOptions | None = None,
                 plugins: PluginChain | None = None) -> None:
        self.stages = stages
        self._device: Any = None  # the Vulkan device open() made for this pipeline, closed with it
        self.charset = charset
        self.options = options or OcrOptions()
        self.options.validate()
        self.plugins = plugins if plugins is not None else build_chain(self.options.plugins,
                                                                       self.options.plugin_options)
        self._steps: dict[tuple[int, int], int] = {}
        self.backend_reason = ""  # why open() chose this backend (the status stream and metrics repeat it)
        self._reopen: Callable[[], OcrPipeline] | None = None  # open() with this one's models, on its device

    @classmethod
    def open(cls, device: str | None = None, *, options: OcrOptions | None = None,
             model_dir: Path | None = None, model_paths: dict[str, Path] | None = None,
             cpu_threads: int = 0) -> OcrPipeline:
        """The pipeline on the backend `device` names (agent/ocr/backend_choice.py): a Vulkan device (index,
        UUID, name part), "cpu" (onnxruntime, `cpu_threads` intra-op threads, 0: every core), "numpy" (the
        reference executor); None: VKOCR_DEVICE, else the best ranked usable GPU, else the CPU backend, with a
        warning that says why. Models: ``model_paths`` by role (det, cls, rec), else ppocrv4's files in
        ``model_dir``, the set whose procedure OcrOptions() follows by default. The default set (ppocrv6-small)
        or any other, with the options it needs: agent/ocr/model_sets.py (``choose_models(…)`` gives both:
        ``model_paths=chosen.paths, options=chosen.ocr_options()``)."""
        from vkocr.engine.graph.onnx_import import load_onnx

        paths = model_paths or ppocrv4_paths(model_dir)
        charset = load_charset(load_onnx(paths["rec"]).metadata)
        choice = choose_backend(device)
        if choice.kind == "vulkan":
            pipeline = cls._open_vulkan(choice.selector, paths, charset, options)
            pipeline.backend_reason = choice.reason
            # a sibling opens on this very device (its UUID), whatever the ranking says by then
            uuid = pipeline.device.info.uuid
            pipeline._reopen = lambda: cls.open(uuid, options=options, model_paths=paths)
            return pipeline
        if choice.kind == "numpy":
            from vkocr.agent.ocr.numpy_stages import NumpyStages

            pipeline = cls(NumpyStages(paths), charset, options)
        else:
            from vkocr.agent.ocr.ort_stages import OrtStages

            pipeline = cls(OrtStages(paths, cpu_threads), charset, options)
        pipeline.backend_reason = choice.reason
        if choice.fallback:  # a board whose GPU is missing or denied must say so, loudly and once
            log.warning("cpu_backend_chosen", backend=pipeline.backend, reason=choice.reason)
        else:
            log.info("backend_chosen", backend=pipeline.backend, reason=choice.reason)
        gc.freeze()  # as in _open_vulkan
        return pipeline

    @classmethod
    def _open_vulkan(cls, selector: str | None, paths: dict[str, Path], charset: list[str],
                     options: OcrOptions | None) -> OcrPipeline:
        from vkocr.agent.ocr.gpu_stages import GpuStages
        from vkocr.engine.device import Device

        dev = Device(selector)
        try:
            pipeline = cls(GpuStages(dev, paths), charset, options)
        except BaseException:
            dev.close()
            raise
        pipeline._device = dev
        # The models' objects live as long as the pipeline; left in the cyclic collector's reach, every full
        # collection walks them (100-180 ms on the CI machine) in the middle of some request.
        gc.freeze()
        return pipeline

    def sibling(self) -> OcrPipeline | None:
        """Another pipeline of the same models and options on the same Vulkan device, with its own device
        context, plans and buffers (the agent's lanes, agent/serving/lanes.py); None when this one was not
        opened on a Vulkan device by open()."""
        return self._reopen() if self._reopen is not None else None

    @property
    def backend(self) -> str:
        return self.stages.backend

    @property
    def device(self) -> Any:
        """The Vulkan device this pipeline opened (None on the CPU backends)."""
        return self._device

    @property
    def device_name(self) -> str:
        """The Vulkan device's name, else the backend's: "cpu" (onnxruntime) or "numpy"."""
        return self._device.info.name if self._device is not None else self.stages.backend.split(" ")[0]

    def close(self) -> None:
        try:
            self.stages.close()
        finally:  # a failing stage (a lost device) must not keep the device and its instance alive
            if self._device is not None:
                self._device.close()
                self._device = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one request ------------------------------------------------------------------------------------------

    def __call__(self, source: Any, **overrides: Any) -> OcrResult:
        """Read one image (path, bytes or array) with these options changed for this call; plugins included."""
        opts = self.options.replace(**overrides) if overrides else self.options
        chain = self.chain_for(opts)
        return self.finish(self.recognize(source, opts), chain)

    def chain_for(self, opts: OcrOptions) -> PluginChain:
        """The plugin chain these options ask for: the deployment's own, or one built for this request (which
        raises UnknownPluginError or PluginConfigError before any GPU work)."""
        if opts.plugins == self.options.plugins and opts.plugin_options == self.options.plugin_options:
            return self.plugins
        return build_chain(opts.plugins, opts.plugin_options)

    @staticmethod
    def finish(result: OcrResult, chain: PluginChain) -> OcrResult:
        """The plugin chain over a recognised result: CPU work that the agent overlaps with the next request's
        GPU work."""
        clock = time.perf_counter()
        chain.run(result)
        result.timings_ms["plugins"] = (time.perf_counter() - clock) * 1e3
        return result

    def recognize(self, source: Any, opts: OcrOptions | None = None, *, decoded: bool = False,
                  stop: StopCheck | None = None) -> OcrResult:
        """Lines of one image without the plugin chain: every stage that needs the device, and the CPU steps
        between them. ``decoded``: ``source`` is already decode_image's output (the agent decodes on the
        request's thread, before the GPU queue). ``stop`` is asked after every stage (and every rec batch);
        when it names who no longer wants the answer, RequestStopped is raised and nothing more runs."""
        opts = opts or self.options
        timings: dict[str, float] = {}
        waits: dict[str, float] = {}
        device = self._device
        clock = time.perf_counter()
        waited = device.wait_seconds if device is not None else 0.0

        def lap(name: str, *, last: bool = False) -> None:
            nonlocal clock, waited
            now = time.perf_counter()
            timings[name] = timings.get(name, 0.0) + (now - clock) * 1e3
            clock = now
            if device is not None:
                waits[name] = waits.get(name, 0.0) + (device.wait_seconds - waited) * 1e3
                waited = device.wait_seconds
            if not last and stop is not None and (who := stop()) is not None:
                raise RequestStopped(who, name)

        procedure = PROCEDURES[opts.procedure]
        image = source if decoded else decode_image(source, max_pixels=opts.max_pixels, apply_exif=opts.apply_exif,
                                                    copy=False,  # stages.load copies it before this call returns
                                                    rgba=procedure.rgba)
        prep = preparation(*image.shape[:2], max_side_len=opts.max_side_len, min_side_len=opts.min_side_len,
                           min_height=opts.min_height, width_height_ratio=opts.width_height_ratio,
                           letterbox=opts.use_det)
        self.stages.load(image, prep)
        lap("decode")
        h, w = prep.shape
        quads: list[np.ndarray]
        if opts.use_det:
            quads = self._detect(prep, opts, lap)
            if not quads:
                return OcrResult(timings_ms=timings, gpu_wait_ms=waits)
            slots = crop_slots(np.stack(quads), opts.rec_height, 10**6)
        else:
            quads = [whole_image_quad(h, w)]
            slots = [CropSlot(np.eye(3), w, h, False, False, 1)]  # RapidOCR passes the image itself on
        angles = [0] * len(slots)
        cls_only: list[tuple[str, float]] = []
        if opts.use_cls:
            slots, angles, cls_only = self._classify(slots, opts)
            lap("cls")
        texts: list[CtcText] | None = None
        chars: list[tuple[CharBox, ...] | None] = [None] * len(slots)
        if opts.use_rec:
            texts, batch_ratios = self._recognize(slots, opts, lap)
            if opts.return_word_box and opts.use_det:
                words = procedure.word_boxes == "words"
                chars = [self._chars(t, q, s, r, prep, words)
                         for t, q, s, r in zip(texts, quads, slots, batch_ratios)]
        result = self._assemble(prep, quads, angles, texts, chars, cls_only, opts)
        lap("postproc", last=True)  # done: an answer nobody waits for costs nothing more
        result.timings_ms, result.gpu_wait_ms = timings, waits
        return result

    def _detect(self, prep: Prepared, opts: OcrOptions, lap: Callable[[str], None]) -> list[np.ndarray]:
        h, w = prep.shape
        det_h, det_w = det_input_size(h, w, opts.limit_side_len, opts.limit_type)
        if det_h <= 0 or det_w <= 0:
            return []
        prob = self.stages.detect(det_h, det_w, opts.thresh, opts.use_dilation)
        lap("det")
        boxes, _scores = db_boxes(prob, w, h, thresh=opts.thresh, box_thresh=opts.box_thresh,
                                  max_candidates=opts.max_candidates, unclip_ratio=opts.unclip_ratio,
                                  use_dilation=opts.use_dilation, score_mode=opts.score_mode,
                                  bitmap=self.stages.db_bitmap(), row_spans=self.stages.db_row_spans())
        lap("db")
        order = sort_boxes_in_lines if PROCEDURES[opts.procedure].box_order == "lines" else sort_boxes
        return [np.asarray(b, np.float32) for b in order(list(boxes))]

    def _classify(self, slots: list[CropSlot], opts: OcrOptions
                  ) -> tuple[list[CropSlot], list[int], list[tuple[str, float]]]:
        angles = [0] * len(slots)
        verdicts: list[tuple[str, float]] = [("0", 0.0)] * len(slots)
        out = list(slots)
        # Every crop is padded to the classifier's fixed width, so grouping cannot change a verdict: all crops
        # go in as few submissions as the stage allows, instead of RapidOCR's groups of cls_batch.
        step = self.stages.max_batch
        for group in [list(range(i, min(i + step, len(slots)))) for i in range(0, len(slots), step)]:
            batch = [slots[i].fitted(opts.cls_height, opts.cls_width) for i in group]
            probs = self.stages.classify(batch, opts.cls_height, opts.cls_width)
            for i, label, score in zip(group, probs.argmax(axis=1).tolist(), probs.max(axis=1).tolist()):
                verdicts[i] = (("0", "180")[label], score)
                if label == 1 and score > opts.cls_thresh:
                    out[i] = dataclasses.replace(out[i], rotate180=True)
                    angles[i] = 180
        return out, angles, verdicts

    def _recognize(self, slots: list[CropSlot], opts: OcrOptions, lap: Callable[[str], None]
                   ) -> tuple[list[CtcText], list[float]]:
        """Decoded text of every slot, and the width/height ratio its batch was padded to.

        Each batch runs at RapidOCR's batch width rounded up to opts.rec_width_bucket, and with opts.rec_batch
        slots (the warp zero-fills the spare columns and slots; no line sees another): a few plans serve every
        batch. The crops are fitted exactly as RapidOCR fits them."""
        texts: list[CtcText] = [CtcText("", 0.0, (), (), 0)] * len(slots)
        batch_ratios = [0.0] * len(slots)
        batches = []
        for group in ratio_batches([slot_ratio(s) for s in slots], opts.rec_batch):
            max_ratio = max([opts.rec_width / opts.rec_height, *(slot_ratio(slots[i]) for i in group)])
            width = int(opts.rec_height * max_ratio)  # RapidOCR's batch width, exactly
            batches.append((group, max_ratio, width, [slots[i].fitted(opts.rec_height, width) for i in group]))
        # the batches one after another, decoded after the last (shorter idle gaps between submissions)
        outputs = []
        for _, _, width, batch in batches:
            outputs.append(self.stages.recognize(batch, opts.rec_height, rec_tensor_width(width, opts),
                                                 opts.rec_batch))
            lap("rec")
        if not batches:
            lap("rec")
        for (group, max_ratio, width, _), (indices, scores) in zip(batches, outputs, strict=True):
            steps = self._rec_steps(opts.rec_height, width) if opts.return_word_box else 0
            decimals = PROCEDURES[opts.procedure].score_decimals
            for i, decoded in zip(group, ctc_decode(indices, scores, self.charset, decimals)):
                # word boxes scale time steps by RapidOCR's width: its step count, not the padded tensor's
                texts[i] = dataclasses.replace(decoded, steps=steps) if steps else decoded
                batch_ratios[i] = max_ratio
        return texts, batch_ratios

    def _rec_steps(self, height: int, width: int) -> int:
        """Time steps the recogniser makes for a height × width input."""
        key = (height, width)
        if key not in self._steps:
            self._steps[key] = int(self.stages.rec_output_shape((1, 3, height, width))[1])
        return self._steps[key]

    @staticmethod
    def _chars(text: CtcText, quad: np.ndarray, slot: CropSlot, batch_ratio: float, prep: Prepared, words: bool
               ) -> tuple[CharBox, ...]:
        """Word results in original-image pixels, truncated to integers as RapidOCR does: 3.10's (``words``)
        or 1.4.4's per-character boxes."""
        crop_w, crop_h = slot.model_size
        if words:  # 3.10 maps the line box back first and lays the cells out in original pixels
            return tuple(word_boxes(text, to_original(quad, prep), crop_w, crop_h, batch_ratio,
                                    ratio_w=prep.ratio_w, ratio_h=prep.ratio_h))
        boxes = char_boxes(text, quad, crop_w, crop_h, batch_ratio)
        if not boxes:
            return ()
        mapped = to_original(np.array([b.box for b in boxes], np.float32), prep).astype(np.int32)
        return tuple(CharBox(b.text, m.astype(float).tolist(), b.score) for b, m in zip(boxes, mapped))

    def _assemble(self, prep: Prepared, quads: list[np.ndarray], angles: list[int], texts: list[CtcText] | None,
                  chars: list[tuple[CharBox, ...] | None], verdicts: list[tuple[str, float]],
                  opts: OcrOptions) -> OcrResult:
        boxes = to_original(np.stack(quads), prep) if quads else np.zeros((0, 4, 2), np.float32)
        # RapidOCR 3.10 drops lines that read as nothing but whitespace, when it detected them
        drop_blank = PROCEDURES[opts.procedure].drop_blank_text and opts.use_det
        lines = []
        for i, box in enumerate(boxes):
            if texts is None:  # detection (and classification) only: boxes without text
                score = verdicts[i][1] if verdicts else 1.0
                lines.append(OcrLine("", score, box.tolist(), angles[i]))
                continue
            text, score = texts[i].text, texts[i].score
            if drop_blank and not text.strip():
                continue
            if score >= opts.text_score:
                lines.append(OcrLine(text, score, box.tolist(), angles[i], chars[i]))
        return OcrResult(lines)
