"""The CPU backend: the three models on onnxruntime's CPU execution provider, inside the same pipeline (the
same host preprocessing as the NumPy reference stages, through the OpenCV calls that the references match bit
for bit, so the same crops and the same lines). Chosen with `--device cpu`, and automatically when no usable
Vulkan GPU exists."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnxruntime as ort

from vkocr.agent.errors import ModelSetError
from vkocr.agent.ocr import opencv_kernels
from vkocr.agent.ocr.host_stages import HostStages
from vkocr.log import get_logger

log = get_logger(__name__)


def default_threads() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def session_options(threads: int) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL  # one stage at a time: parallel inside an op
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: its warnings name graph nodes, not problems of ours
    return options


def _session(role: str, path: Path, options: ort.SessionOptions) -> ort.InferenceSession:
    """onnxruntime's session of one model; a file it cannot load (no ONNX model, a broken one) is a
    ModelSetError naming the role and the file, as the Vulkan engine's ModelError names the file."""
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime's own error types (InvalidProtobuf, Fail, …) are private
        raise ModelSetError(f"cannot read ONNX model {path} (the {role} model): {exc}") from exc


class OrtStages(HostStages):
    """`threads`: intra-op threads of each session (0: default_threads())."""

    resize_u8 = staticmethod(opencv_kernels.resize_linear_u8)
    warp = staticmethod(opencv_kernels.warp_perspective_cubic)
    warms = True  # each session's first run initialises its kernels: prepare does it before serving

    def __init__(self, model_paths: Mapping[str, Path], threads: int = 0) -> None:
        super().__init__()
        self.threads = threads or default_threads()
        options = session_options(self.threads)
        self.sessions = {role: _session(role, path, options) for role, path in model_paths.items()}
        self.orients = "ori" in self.sessions
        self.backend = f"cpu (onnxruntime {ort.__version__}, {self.threads} threads)"
        self.warmed: set[str] = set()  # the models that prepare() has run once

    def run_model(self, role: str, x: np.ndarray) -> np.ndarray:
        session = self.sessions[role]
        return session.run(None, {session.get_inputs()[0].name: x})[0]

    def rec_output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """By running the recogniser once on zeros (the pipeline caches the answer per shape)."""
        return tuple(self.run_model("rec", np.zeros(input_shape, np.float32)).shape)

    def prepare(self, role: str, shape: tuple[int, ...]) -> None:
        """Warm-up: the first run of a session initialises its kernels and memory; later shapes cost no more
        than their arithmetic, so each model runs once, on the first shape asked for."""
        if role in self.warmed:
            return
        self.run_model(role, np.zeros(shape, np.float32))
        self.warmed.add(role)

    def close(self) -> None:
        self.sessions.clear()  # onnxruntime frees a session with its last reference
