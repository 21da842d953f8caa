"""The OCR pipeline: decode → prepare → det → DB boxes → crops → cls → rec → CTC → plugins.

The orchestration here mirrors RapidOCR step by step (its batching by aspect ratio, its crop rules, its
filters), so that our lines match its lines: 1.4.4's, or where 3.10's code differs the variants its procedure
names (options.procedure, agent/ocr/procedures.py); the stages themselves run on the GPU (agent/ocr/gpu_stages.py), on
the CPU backend (onnxruntime: agent/ocr/ort_stages.py) or on the NumPy reference executor (numpy_stages.py).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from vkocr.agent.errors import RequestStopped
from vkocr.agent.ocr.backend_choice import open_stages
from vkocr.agent.ocr.image_kernels import Crop, line_crops
from vkocr.agent.ocr.images import decode_image
from vkocr.agent.ocr.lanes import LaneResources
from vkocr.agent.ocr.model_files import PPOCRV4_FILES, models_dir
from vkocr.agent.ocr.options import OcrOptions, check_orientation
from vkocr.agent.ocr.orientation import UPRIGHT_TURNS, page_probabilities, result_in_input_frame, turned_upright
from vkocr.agent.ocr.plugin_chains import PluginChains, run_plugins
from vkocr.agent.ocr.precision import FP32_CHOICE, PrecisionChoice
from vkocr.agent.ocr.procedures import PROCEDURES
from vkocr.agent.ocr.reading import read_group
from vkocr.agent.ocr.request import OcrRequest
from vkocr.agent.ocr.request_halves import (
    Detected,
    Laps,
    StopCheck,
    read_key,
)
from vkocr.agent.ocr.stages import Stages, StageSet
from vkocr.log import get_logger
from vkocr.postproc.ctc import load_charset
from vkocr.postproc.db import db_boxes
from vkocr.postproc.order import sort_boxes, sort_boxes_in_lines
from vkocr.postproc.registry import PluginChain
from vkocr.postproc.result import OcrResult

log = get_logger(__name__)



def ppocrv4_paths(directory: Path | None = None) -> dict[str, Path]:
    """ppocrv4's files by role, in `directory` else models_dir(): what OcrOptions()'s procedure (RapidOCR 1.4.4's)
    reads."""
    root = directory or models_dir()
    return {m.role: root / m.filename for m in PPOCRV4_FILES}


def whole_image_quad(h: int, w: int) -> np.ndarray:
    """The quad that samples the whole image unchanged (the line of a request without detection)."""
    return np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)


class OcrPipeline:
    """One OCR engine: the three models on one backend, options, and a plugin chain. Not thread-safe: one
    worker drives it (the agent's GPU worker)."""

    def __init__(self, stages: StageSet, charset: list[str], options: OcrOptions | None = None,
                 plugins: PluginChain | None = None) -> None:
        self.stages = stages
        self._device: Any = None  # the Vulkan device open() made for this pipeline, closed with it
        self.charset = charset
        self.options = options or OcrOptions()
        self.options.validate()
        check_orientation(self.options, stages.orients)
        self.chains = PluginChains()
        # the deployment's chain: what a request whose options name no other plugins runs
        self.plugins = self.chains.deploy(self.options, plugins)
        self._steps: dict[tuple[int, int], int] = {}
        self.backend_reason = ""  # why open() chose this backend (the status stream and metrics repeat it)
        self.precision: PrecisionChoice = FP32_CHOICE  # the storage precision that serves, and why (open() sets it)
        self.read_batch = 0  # the most crops of one rec submission in `read` (0: the options' rec_batch)

    @classmethod
    def open(cls, device: str | None = None, *, options: OcrOptions | None = None,
             model_dir: Path | None = None, model_paths: dict[str, Path] | None = None,
             cpu_threads: int = 0, lanes: LaneResources | None = None, precision: str = "fp32",
             model_set: str | None = None) -> OcrPipeline:
        """The pipeline on the backend `device` names (agent/ocr/backend_choice.py): a Vulkan device (index,
        UUID, name part), "cpu" (onnxruntime, `cpu_threads` intra-op threads, 0: every core), "numpy" (the
        reference executor); None: VKOCR_DEVICE, else the best ranked usable GPU, else the CPU backend, with a
        warning that says why. Models: ``model_paths`` by role (det, cls, rec), else ppocrv4's files in
        ``model_dir``, the set whose procedure OcrOptions() follows by default. The default set (ppocrv6-small)
        or any other, with the options it needs: agent/ocr/model_sets.py (``choose_models(…)`` gives both:
        ``model_paths=chosen.paths, options=chosen.ocr_options()``). ``lanes``: the streams and image slots a
        server's lanes drive (agent/serving/flow.py); one of each by default. ``precision``: auto, fp32 or fp16
        storage on a GPU, with ``model_set``'s calibrated plans (agent/ocr/precision.py; ``pipeline.precision``
        says what serves and why)."""
        from vkocr.engine.graph.onnx_import import load_onnx

        paths = model_paths or ppocrv4_paths(model_dir)
        charset = load_charset(load_onnx(paths["rec"]).metadata)
        opened = open_stages(device, paths, cpu_threads=cpu_threads, lanes=lanes, precision=precision,
                             model_set=model_set)
        try:
            pipeline = cls(opened.stages, charset, options)
        except BaseException:
            opened.stages.close()
            if opened.device is not None:
                opened.device.close()
            raise
        pipeline._device, pipeline.backend_reason = opened.device, opened.reason
        pipeline.precision = opened.precision
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

    def memory_usage(self) -> tuple[int, int]:
        """(bytes in live allocations, bytes allocated from the driver) of the device's pool; zeros off the GPU."""
        return self._device.memory_usage() if self._device is not None else (0, 0)

    def gpu_busy_seconds(self) -> float:
        """The time the GPU was busy with this pipeline's recordings so far (every stream's at once counted once:
        vk/streams.py); 0 off the GPU."""
        return float(self._device.gpu_busy_seconds) if self._device is not None else 0.0

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
        request = self.request(source, opts)
        return run_plugins(self.run(request), request.chain)

    def request(self, source: Any, opts: OcrOptions | None = None, *, decoded: bool = False) -> OcrRequest:
        """The request of one image (path, bytes or array; ``decoded``: already decode_image's output) with these
        options (the pipeline's by default): decoded, with its plugin chain and its geometry."""
        opts = opts or self.options
        check_orientation(opts, self.stages.orients)
        chain = self.chains.chain_for(opts)
        image = source if decoded else decode_image(source, max_pixels=opts.max_pixels, apply_exif=opts.apply_exif,
                                                    copy=False, rgba=PROCEDURES[opts.procedure].rgba)
        return OcrRequest.of(image, opts, chain)

    def recognize(self, source: Any, opts: OcrOptions | None = None, *, decoded: bool = False,
                  stop: StopCheck | None = None) -> OcrResult:
        """Lines of one image without the plugin chain: every stage that needs the device, and the CPU steps
        between them. ``decoded``: ``source`` is already decode_image's output. ``stop`` is asked after every
        stage (and every rec batch); when it names who no longer wants the answer, RequestStopped is raised and
        nothing more runs."""
        return self.run(self.request(source, opts, decoded=decoded), stop=stop)

    def run(self, request: OcrRequest, *, stop: StopCheck | None = None) -> OcrResult:
        """Both halves of one request, on the pipeline's own stages (no plugins: run_plugins runs them)."""
        (result,) = self.read([self.detect(request, stop=stop)])
        if isinstance(result, RequestStopped):
            raise result
        return result

    def stream(self, index: int) -> Stages:
        """The stages on stream `index` of the device, for one thread to drive beside the others (each
        detection or reading lane of the agent: agent/serving/flow.py); the stages themselves where there are
        no streams (the CPU backends, whose onnxruntime sessions take calls from several threads)."""
        return self.stages.stream(index)

    def detect(self, request: OcrRequest, *, stop: StopCheck | None = None, lane: Stages | None = None,
               slot: int = 0) -> Detected:
        """A request's first half: its image into image slot `slot` of `lane` (the pipeline's stages when None),
        detection and DB's boxes; the crops come back, for `read` to classify and recognise, alone or with
        other requests'. ``stop`` is asked after each stage (RequestStopped when it names who no longer wants
        the answer); it is kept for `read`."""
        stages = lane if lane is not None else self.stages.stream(0)
        laps = Laps(stages.wait_seconds, stop)
        source, angle = request.image, None
        if request.options.use_doc_orientation:  # the page upright before anything reads it
            request, angle = turned_upright(request, page_probabilities(stages.orient, source))
            laps.lap("ori")
        opts, prep = request.options, request.geometry.prep
        stages.load(source, prep, slot, UPRIGHT_TURNS[angle or 0])
        laps.lap("decode")
        h, w = prep.shape
        if opts.use_det:
            quads = self._detect(stages, request, laps.lap)
            crops = line_crops(np.stack(quads), opts.rec_height, 10**6, slot) if quads else []
        else:
            quads = [whole_image_quad(h, w)]
            crops = [Crop(np.eye(3), w, h, False, False, 1, slot)]  # RapidOCR passes the image itself on
        return Detected(request, quads, crops, laps, angle, (source.shape[0], source.shape[1]))

    def read(self, requests: Sequence[Detected], *, lane: Stages | None = None) -> list[OcrResult | RequestStopped]:
        """The second half of these requests (`detect`'s output): classification and recognition of every crop,
        with the crops of all of them in as few submissions as the stages take, then CTC and each request's
        lines. Answers in request order; a request whose ``stop`` names who no longer wants it (asked after
        cls and after rec) gets RequestStopped instead. A rec submission holds at most `read_batch` crops (0: the
        requests' rec_batch); only crops of one width share one, so each line is read at its RapidOCR batch
        width exactly, whoever it shares the batch with."""
        stages = lane if lane is not None else self.stages.stream(0)
        results: list[OcrResult | RequestStopped | None] = [None] * len(requests)
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, request in enumerate(requests):
            request.laps.restart(stages.wait_seconds)
            if not request.crops:
                results[i] = OcrResult(timings_ms=request.laps.timings, gpu_wait_ms=request.laps.waits)
            else:
                groups.setdefault(read_key(request.opts), []).append(i)
        for members in groups.values():
            group = [requests[i] for i in members]
            batch = self.read_batch or group[0].opts.rec_batch
            for i, outcome in zip(members, read_group(stages, group, self.charset, batch, self._rec_steps)):
                results[i] = outcome
        for i, request in enumerate(requests):  # a page read upright answers in its input's frame
            result = results[i]
            if request.page_angle is not None and isinstance(result, OcrResult):
                results[i] = result_in_input_frame(result, request.page_angle, *request.input_size)
        return [r for r in results if r is not None]

    def _detect(self, stages: Stages, request: OcrRequest, lap: Callable[[str], None]) -> list[np.ndarray]:
        opts, geometry = request.options, request.geometry
        h, w = geometry.prep.shape
        if not geometry.detects:
            return []
        det_h, det_w = geometry.det_size
        prob = stages.detect(det_h, det_w, opts.thresh, opts.use_dilation)
        lap("det")
        boxes, _scores = db_boxes(prob, w, h, thresh=opts.thresh, box_thresh=opts.box_thresh,
                                  max_candidates=opts.max_candidates, unclip_ratio=opts.unclip_ratio,
                                  use_dilation=opts.use_dilation, score_mode=opts.score_mode,
                                  bitmap=stages.db_bitmap(), row_spans=stages.db_row_spans())
        lap("db")
        order = sort_boxes_in_lines if PROCEDURES[opts.procedure].box_order == "lines" else sort_boxes
        return [np.asarray(b, np.float32) for b in order(list(boxes))]

    def _rec_steps(self, height: int, width: int) -> int:
        """Time steps the recogniser makes for a height × width input."""
        key = (height, width)
        if key not in self._steps:
            self._steps[key] = int(self.stages.rec_output_shape((1, 3, height, width))[1])
        return self._steps[key]
