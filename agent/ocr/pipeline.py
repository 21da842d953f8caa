"""The OCR pipeline: decode → prepare → det → DB boxes → crops → cls → rec → CTC → plugins.

The orchestration here mirrors RapidOCR step by step (its batching by aspect ratio, its crop rules, its
filters), so that our lines match its lines: 1.4.4's, or where 3.10's code differs the variants its procedure
names (options.procedure, agent/ocr/procedures.py); the stages themselves run on the GPU (agent/ocr/gpu_stages.py), on
the CPU backend (onnxruntime: agent/ocr/ort_stages.py) or on the NumPy reference executor (numpy_stages.py).
"""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, Self

import numpy as np

from vkocr.agent.errors import RequestStopped
from vkocr.agent.ocr.backend_choice import choose_backend
from vkocr.agent.ocr.image_kernels import CropSlot, crop_slots
from vkocr.agent.ocr.image_reference import det_input_size
from vkocr.agent.ocr.images import decode_image
from vkocr.agent.ocr.model_files import PPOCRV4_FILES, models_dir
from vkocr.agent.ocr.options import OcrOptions
from vkocr.agent.ocr.plan_shapes import rec_tensor_width
from vkocr.agent.ocr.prep import Prepared, preparation, to_original
from vkocr.agent.ocr.procedures import PROCEDURES
from vkocr.agent.ocr.request_halves import (
    Detected,
    Laps,
    PipelineLanes,
    StopCheck,
    read_key,
    stream_clock,
)
from vkocr.log import get_logger
from vkocr.postproc.ctc import CtcText, ctc_decode, load_charset
from vkocr.postproc.db import db_boxes
from vkocr.postproc.order import sort_boxes, sort_boxes_in_lines
from vkocr.postproc.registry import PluginChain, build_chain
from vkocr.postproc.result import CharBox, OcrLine, OcrResult
from vkocr.postproc.wordboxes import char_boxes
from vkocr.postproc.wordboxes_310 import word_boxes

log = get_logger(__name__)



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
        self.read_batch = 0  # the most crops of one rec submission in `read` (0: the options' rec_batch)

    @classmethod
    def open(cls, device: str | None = None, *, options: OcrOptions | None = None,
             model_dir: Path | None = None, model_paths: dict[str, Path] | None = None,
             cpu_threads: int = 0, lanes: PipelineLanes | None = None) -> OcrPipeline:
        """The pipeline on the backend `device` names (agent/ocr/backend_choice.py): a Vulkan device (index,
        UUID, name part), "cpu" (onnxruntime, `cpu_threads` intra-op threads, 0: every core), "numpy" (the
        reference executor); None: VKOCR_DEVICE, else the best ranked usable GPU, else the CPU backend, with a
        warning that says why. Models: ``model_paths`` by role (det, cls, rec), else ppocrv4's files in
        ``model_dir``, the set whose procedure OcrOptions() follows by default. The default set (ppocrv6-small)
        or any other, with the options it needs: agent/ocr/model_sets.py (``choose_models(…)`` gives both:
        ``model_paths=chosen.paths, options=chosen.ocr_options()``). ``lanes``: the streams and image slots a
        server's lanes drive (agent/serving/flow.py); one of each by default."""
        from vkocr.engine.graph.onnx_import import load_onnx

        paths = model_paths or ppocrv4_paths(model_dir)
        charset = load_charset(load_onnx(paths["rec"]).metadata)
        choice = choose_backend(device)
        if choice.kind == "vulkan":
            pipeline = cls._open_vulkan(choice.selector, paths, charset, options, lanes or PipelineLanes())
            pipeline.backend_reason = choice.reason
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
                     options: OcrOptions | None, lanes: PipelineLanes) -> OcrPipeline:
        from vkocr.agent.ocr.gpu_stages import GpuStages
        from vkocr.engine.device import Device

        dev = Device(selector, queues=lanes.queues)
        try:
            pipeline = cls(GpuStages(dev, paths, image_slots=lanes.image_slots), charset, options)
        except BaseException:
            dev.close()
            raise
        pipeline._device = dev
        # The models' objects live as long as the pipeline; left in the cyclic collector's reach, every full
        # collection walks them (100-180 ms on the CI machine) in the middle of some request.
        gc.freeze()
        return pipeline

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
        (result,) = self.read([self.detect(source, opts, decoded=decoded, stop=stop)])
        if isinstance(result, RequestStopped):
            raise result
        return result

    def lane(self, index: int) -> Stages:
        """The stages on stream `index` of the device, for one thread to drive beside the others (each
        detection or reading lane of the agent: agent/serving/flow.py); the stages themselves where there are
        no streams (the CPU backends, whose onnxruntime sessions take calls from several threads)."""
        lane: Callable[[int], Stages] | None = getattr(self.stages, "lane", None)
        return lane(index) if lane is not None else self.stages

    def detect(self, source: Any, opts: OcrOptions | None = None, *, decoded: bool = False,
               stop: StopCheck | None = None, lane: Stages | None = None, slot: int = 0) -> Detected:
        """A request's first half: its image into image slot `slot` of `lane` (the pipeline's stages when None),
        detection and DB's boxes; the crops come back, for `read` to classify and recognise, alone or with
        other requests'. ``stop`` is asked after each stage (RequestStopped when it names who no longer wants
        the answer); it is kept for `read`."""
        opts = opts or self.options
        stages = lane if lane is not None else self.stages
        laps = Laps(stream_clock(stages, self._device), stop)
        procedure = PROCEDURES[opts.procedure]
        image = source if decoded else decode_image(source, max_pixels=opts.max_pixels, apply_exif=opts.apply_exif,
                                                    copy=False,  # stages.load copies it before this call returns
                                                    rgba=procedure.rgba)
        prep = preparation(*image.shape[:2], max_side_len=opts.max_side_len, min_side_len=opts.min_side_len,
                           min_height=opts.min_height, width_height_ratio=opts.width_height_ratio,
                           letterbox=opts.use_det)
        stages.load(image, prep, slot)
        laps.lap("decode")
        h, w = prep.shape
        if opts.use_det:
            quads = self._detect(stages, prep, opts, laps.lap)
            slots = crop_slots(np.stack(quads), opts.rec_height, 10**6, slot) if quads else []
        else:
            quads = [whole_image_quad(h, w)]
            slots = [CropSlot(np.eye(3), w, h, False, False, 1, slot)]  # RapidOCR passes the image itself on
        return Detected(opts, prep, quads, slots, laps)

    def read(self, requests: Sequence[Detected], *, lane: Stages | None = None) -> list[OcrResult | RequestStopped]:
        """The second half of these requests (`detect`'s output): classification and recognition of every crop,
        with the crops of all of them in as few submissions as the stages take, then CTC and each request's
        lines. Answers in request order; a request whose ``stop`` names who no longer wants it (asked after
        cls and after rec) gets RequestStopped instead. A rec submission holds at most `read_batch` crops (0: the
        requests' rec_batch); only crops of one width share one, so each line is read at its RapidOCR batch
        width exactly, whoever it shares the batch with."""
        stages = lane if lane is not None else self.stages
        results: list[OcrResult | RequestStopped | None] = [None] * len(requests)
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, request in enumerate(requests):
            request.laps.restart(stream_clock(stages, self._device))
            if not request.slots:
                results[i] = OcrResult(timings_ms=request.laps.timings, gpu_wait_ms=request.laps.waits)
            else:
                groups.setdefault(read_key(request.opts), []).append(i)
        for members in groups.values():
            for i, outcome in zip(members, self._read_group(stages, [requests[i] for i in members])):
                results[i] = outcome
        return [r for r in results if r is not None]

    def _read_group(self, stages: Stages, requests: list[Detected]) -> list[OcrResult | RequestStopped]:
        """`read` of requests whose options read alike (read_key)."""
        opts = requests[0].opts
        live = list(range(len(requests)))
        stopped: dict[int, RequestStopped] = {}

        def lap_all(name: str) -> None:
            for i in list(live):
                try:
                    requests[i].laps.lap(name)
                except RequestStopped as exc:
                    stopped[i] = exc
                    live.remove(i)

        slots = [list(r.slots) for r in requests]
        angles = [[0] * len(s) for s in slots]
        verdicts: list[list[tuple[str, float]]] = [[] for _ in requests]
        if opts.use_cls:
            self._classify(stages, requests, slots, angles, verdicts, opts)
            lap_all("cls")
        texts: list[list[CtcText] | None] = [None] * len(requests)
        ratios: list[list[float]] = [[] for _ in requests]
        if opts.use_rec and live:
            order = list(live)

            def wanted() -> set[int]:  # after each rec submission: which of `order` are still wanted
                lap_all("rec")
                return {k for k, i in enumerate(order) if i in live}

            done = self._recognize(stages, [slots[i] for i in order], opts, self.read_batch or opts.rec_batch, wanted)
            for i, (request_texts, request_ratios) in zip(order, done):
                texts[i], ratios[i] = request_texts, request_ratios
        outcomes: list[OcrResult | RequestStopped] = []
        procedure = PROCEDURES[opts.procedure]
        for i, request in enumerate(requests):
            if i in stopped:
                outcomes.append(stopped[i])
                continue
            chars: list[tuple[CharBox, ...] | None] = [None] * len(slots[i])
            found = texts[i]
            if found is not None and opts.return_word_box and opts.use_det:
                words = procedure.word_boxes == "words"
                chars = [self._chars(t, q, s, r, request.prep, words)
                         for t, q, s, r in zip(found, request.quads, slots[i], ratios[i])]
            result = self._assemble(request.prep, request.quads, angles[i], found, chars, verdicts[i], opts)
            request.laps.lap("postproc", last=True)  # done: an answer nobody waits for costs nothing more
            result.timings_ms, result.gpu_wait_ms = request.laps.timings, request.laps.waits
            outcomes.append(result)
        return outcomes

    def _detect(self, stages: Stages, prep: Prepared, opts: OcrOptions, lap: Callable[[str], None]
                ) -> list[np.ndarray]:
        h, w = prep.shape
        det_h, det_w = det_input_size(h, w, opts.limit_side_len, opts.limit_type)
        if det_h <= 0 or det_w <= 0:
            return []
        prob = stages.detect(det_h, det_w, opts.thresh, opts.use_dilation)
        lap("det")
        boxes, _scores = db_boxes(prob, w, h, thresh=opts.thresh, box_thresh=opts.box_thresh,
                                  max_candidates=opts.max_candidates, unclip_ratio=opts.unclip_ratio,
                                  use_dilation=opts.use_dilation, score_mode=opts.score_mode,
                                  bitmap=stages.db_bitmap(), row_spans=stages.db_row_spans())
        lap("db")
        order = sort_boxes_in_lines if PROCEDURES[opts.procedure].box_order == "lines" else sort_boxes
        return [np.asarray(b, np.float32) for b in order(list(boxes))]

    @staticmethod
    def _classify(stages: Stages, requests: Sequence[Detected], slots: list[list[CropSlot]],
                  angles: list[list[int]], verdicts: list[list[tuple[str, float]]], opts: OcrOptions) -> None:
        """Every crop of every request through the classifier; flagged crops turn 180° (in `slots`, `angles`).
        Every crop is padded to the classifier's fixed width, so grouping cannot change a verdict: all crops go
        in as few submissions as the stage allows, instead of RapidOCR's groups of cls_batch."""
        every = [(i, k) for i in range(len(requests)) for k in range(len(slots[i]))]
        for i in range(len(requests)):
            verdicts[i] = [("0", 0.0)] * len(slots[i])
        step = stages.max_batch
        for start in range(0, len(every), step):
            group = every[start:start + step]
            batch = [slots[i][k].fitted(opts.cls_height, opts.cls_width) for i, k in group]
            probs = stages.classify(batch, opts.cls_height, opts.cls_width)
            for (i, k), label, score in zip(group, probs.argmax(axis=1).tolist(), probs.max(axis=1).tolist()):
                verdicts[i][k] = (("0", "180")[label], score)
                if label == 1 and score > opts.cls_thresh:
                    slots[i][k] = dataclasses.replace(slots[i][k], rotate180=True)
                    angles[i][k] = 180

    def _recognize(self, stages: Stages, requests: list[list[CropSlot]], opts: OcrOptions, batch: int,
                   wanted: Callable[[], set[int]]) -> list[tuple[list[CtcText], list[float]]]:
        """Decoded text of every slot of every request, and the width/height ratio its RapidOCR batch was padded
        to.

        Each request's lines are grouped as RapidOCR groups them (ratio_batches of rec_batch); a group runs at
        RapidOCR's batch width rounded up to opts.rec_width_bucket, and the groups of one tensor width, of every
        request, share submissions of at most `batch` crops (the warp zero-fills the spare columns and slots; no
        line sees another): a few plans serve every batch. The crops are fitted exactly as RapidOCR fits them.
        `wanted()` is asked after each submission (and once if there is none): the requests still wanted, whose
        crops the later submissions hold (a submission with none is skipped)."""
        by_width: dict[int, list[tuple[int, int, int, CropSlot]]] = {}  # tensor width → (request, line, width, crop)
        ratios: list[list[float]] = [[0.0] * len(slots) for slots in requests]
        for r, slots in enumerate(requests):
            for group in ratio_batches([slot_ratio(s) for s in slots], opts.rec_batch):
                max_ratio = max([opts.rec_width / opts.rec_height, *(slot_ratio(slots[i]) for i in group)])
                width = int(opts.rec_height * max_ratio)  # RapidOCR's batch width, exactly
                for i in group:
                    ratios[r][i] = max_ratio
                    by_width.setdefault(rec_tensor_width(width, opts), []).append(
                        (r, i, width, slots[i].fitted(opts.rec_height, width)))
        # every submission first, decoded after the last (shorter idle gaps between submissions)
        outputs = []
        live = set(range(len(requests)))
        for tensor_width, crops in by_width.items():
            pending = crops
            while pending:
                pending = [c for c in pending if c[0] in live]  # a stopped request's crops leave the rest
                chunk, pending = pending[:batch], pending[batch:]
                if chunk:
                    outputs.append((chunk, stages.recognize([c[3] for c in chunk], opts.rec_height, tensor_width,
                                                            batch)))
                    live = wanted()
        if not outputs:
            wanted()
        texts: list[list[CtcText]] = [[CtcText("", 0.0, (), (), 0)] * len(slots) for slots in requests]
        decimals = PROCEDURES[opts.procedure].score_decimals
        for chunk, (indices, scores) in outputs:
            for (r, i, width, _), decoded in zip(chunk, ctc_decode(indices, scores, self.charset, decimals)):
                # word boxes scale time steps by RapidOCR's width: its step count, not the padded tensor's
                steps = self._rec_steps(opts.rec_height, width) if opts.return_word_box else 0
                texts[r][i] = dataclasses.replace(decoded, steps=steps) if steps else decoded
        return list(zip(texts, ratios))

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
