"""The OCR pipeline: decode → prepare → det → DB boxes → crops → cls → rec → CTC → plugins.

One engine: the models opened on a backend, the deployment's options and plugin chains, and the local API that reads
an image (`__call__`, `recognize`, `run`). A request's two halves are driven by agent/ocr/detection.py and
agent/ocr/reading.py (`detect` and `read` here run them on a lane's stages, or the pipeline's own), which mirror
RapidOCR step by step (its batching by aspect ratio, its crop rules, its filters), so that our lines match its
lines: 1.4.4's, or where 3.10's code differs the variants its procedure names (options.procedure,
agent/ocr/procedures.py). The stages run on the GPU (agent/ocr/gpu_stages.py), on the CPU backend (onnxruntime:
agent/ocr/ort_stages.py) or on the NumPy reference executor (numpy_stages.py).
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from vkocr.agent.errors import RequestStopped
from vkocr.agent.ocr import detection, reading
from vkocr.agent.ocr.backend_choice import open_stages
from vkocr.agent.ocr.images import decode_image
from vkocr.agent.ocr.lanes import LaneResources
from vkocr.agent.ocr.model_files import PPOCRV4_FILES, models_dir
from vkocr.agent.ocr.options import OcrOptions, check_orientation
from vkocr.agent.ocr.plugin_chains import PluginChains, run_plugins
from vkocr.agent.ocr.precision import FP32_CHOICE, PrecisionChoice
from vkocr.agent.ocr.procedures import PROCEDURES
from vkocr.agent.ocr.request import OcrRequest
from vkocr.agent.ocr.request_halves import (
    Detected,
    StopCheck,
)
from vkocr.agent.ocr.stages import Stages, StageSet
from vkocr.log import get_logger
from vkocr.postproc.ctc import load_charset
from vkocr.postproc.registry import PluginChain
from vkocr.postproc.result import OcrResult

log = get_logger(__name__)


def ppocrv4_paths(directory: Path | None = None) -> dict[str, Path]:
    """ppocrv4's files by role, in `directory` else models_dir(): what OcrOptions()'s procedure (RapidOCR 1.4.4's)
    reads."""
    root = directory or models_dir()
    return {m.role: root / m.filename for m in PPOCRV4_FILES}


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
        self.chains.deploy(self.options, plugins)
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

    @property
    def plugins(self) -> PluginChain:
        """The deployment's chain: what a request whose options name no other plugins runs."""
        return self.chains.chain_for(self.options)

    @plugins.setter
    def plugins(self, chain: PluginChain) -> None:
        self.chains.deploy(self.options, chain)

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
        """A request's first half (agent/ocr/detection.py) on `lane` (the pipeline's own stages when None)."""
        return detection.detect(lane if lane is not None else self.stages.stream(0), request, stop=stop, slot=slot)

    def read(self, requests: Sequence[Detected], *, lane: Stages | None = None) -> list[OcrResult | RequestStopped]:
        """The second half of these requests (agent/ocr/reading.py) on `lane` (the pipeline's own when None)."""
        return reading.read(lane if lane is not None else self.stages.stream(0), requests, self.charset,
                            self.read_batch, self.rec_steps)

    def rec_steps(self, height: int, width: int) -> int:
        """Time steps the recogniser makes for a height × width input."""
        key = (height, width)
        if key not in self._steps:
            self._steps[key] = int(self.stages.rec_output_shape((1, 3, height, width))[1])
        return self._steps[key]
