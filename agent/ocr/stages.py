"""The seams between the pipeline and its backends (DESIGN.md, "One request, end to end"), declared: `Stages`, what
runs the networks on one stream (one thread drives it), and `StageSet`, what a pipeline holds: its streams, and
the warm-up and statistics of their plans. Every backend implements both explicitly: the GPU (gpu_stages.py, a
`StreamStages` per stream), the CPU backend (ort_stages.py) and the NumPy reference (numpy_stages.py), whose one
set of stages serves every thread (`NoPlanStages`). Serving never looks a capability up by name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from vkocr.agent.ocr.image_kernels import Crop
from vkocr.agent.ocr.prep import Prepared


class RecBatch(NamedTuple):
    """One recogniser submission's worth of crops: fitted to `height` × `width`, run in a batch of `batch`
    (spare slots zero; 0: as many as there are crops, rounded as the stages round)."""

    crops: Sequence[Crop]
    height: int
    width: int
    batch: int = 0


class Stages(Protocol):
    """What runs the networks on one stream: the GPU's stages of one stream, the CPU backend or the NumPy
    reference."""

    backend: str
    max_batch: int  # crops one classify or recognize call takes
    image_slots: int  # images held at once: a batch may hold crops of each (Crop.image names the slot)
    orients: bool  # whether it holds the page orientation model (`orient`)
    joint_batches: int  # rec batches `recognize_many` runs in one submission, at most (1: one each)

    def orient(self, image: np.ndarray) -> np.ndarray:
        """(4,) probabilities that the image (H×W×3 uint8 RGB) is turned 0, 90, 180, 270° clockwise: the page
        orientation model on agent/ocr/orientation.py's input (KernelArgumentError without the model)."""

    def load(self, image: np.ndarray, prep: Prepared, slot: int = 0, turn: int = 0) -> None:
        """The image (H×W×3 uint8 RGB) turned `turn` quarter turns counterclockwise (np.rot90's k: a page turned
        upright; the GPU turns it in its resize shader), prepared as ``prep`` says (the turned image's
        preparation), into image slot `slot`: detect reads the one loaded last, crops the one their slot names."""

    def detect(self, det_h: int, det_w: int, thresh: float = 0.3, use_dilation: bool = True) -> np.ndarray:
        """Probability map (det_h × det_w) of the loaded image resized to det_h × det_w (valid until the next
        call); `thresh` and `use_dilation` are DB's, for a stage that makes the bitmap too."""

    def db_bitmap(self) -> np.ndarray | None:
        """DB's bitmap of the last map (H×W uint8), when the stage made it (the GPU's); None: DB makes it."""

    def db_row_spans(self) -> np.ndarray | None:
        """With that bitmap, the columns of each of its rows that hold its set pixels (H×2, [start, stop)); None:
        DB traces contours over the whole bitmap."""

    def classify(self, crops: Sequence[Crop], height: int, width: int) -> np.ndarray:
        """(n, 2) class probabilities of the crops (0°, 180°)."""

    def recognize(self, crops: Sequence[Crop], height: int, width: int, batch: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
        """(n, T) argmax indices and (n, T) max probabilities per time step; `batch`: the batch size to run
        (spare slots are zero), for fewer distinct shapes."""

    def recognize_many(self, batches: Sequence[RecBatch]) -> list[tuple[np.ndarray, np.ndarray]]:
        """`recognize` of each batch, in order, up to `joint_batches` of them sharing a submission."""

    def wait_seconds(self) -> float:
        """The seconds the host has waited for the GPU on this stream so far (0 off the GPU)."""


class StageSet(Protocol):
    """What a pipeline holds: its stages per stream, and the warm-up and statistics of their plans."""

    backend: str
    max_batch: int
    image_slots: int
    orients: bool
    warms: bool  # whether a warm-up has anything to do (record plans, or run each model once)

    def stream(self, index: int) -> Stages:
        """The stages on stream `index`, for one thread to drive beside the others; stream 0 serves a pipeline
        that one thread drives."""

    def set_lanes(self, detect: int, read: int) -> None:
        """Streams 0..detect-1 run detection, the next `read` classification and recognition (read 0: stream 0 runs
        every stage): what a warm-up prepares on each."""

    def prepare(self, role: str, shape: tuple[int, ...]) -> None:
        """Make model `role` ready for this input shape now (warm start), on every stream that runs the role."""

    def set_joint_batches(self, count: int) -> None:
        """Up to `count` rec batches in one submission on every stream (`Stages.recognize_many`)."""

    def reserve(self, role: str, shape: tuple[int, ...]) -> None:
        """Size the memory of model `role`'s plans for this input shape now, recording nothing."""

    def learn_shape_class(self, role: str, shape: tuple[int, ...]) -> bool:
        """Learn the shape class of model `role` for this shape unless one is kept; True when one was learnt."""

    def plan_stats(self) -> dict[str, dict[str, Any]]:
        """Per model role: plans, recordings, distinct shapes, plan memory, build times (empty without plans)."""

    def recordings_total(self) -> int:
        """Plans recorded so far on every stream (cheap: for deciding whether plan_stats changed)."""

    def rec_output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The recogniser's output shape for this input shape."""

    def close(self) -> None: ...


class NoPlanStages:
    """The StageSet side of stages that record no plans and serve every thread themselves (the host backends,
    whose sessions take calls from several threads): one stream, nothing to reserve, learn or count."""

    image_slots = 1
    orients = False  # stages that hold the page orientation model say so
    warms = False
    joint_batches = 1  # no barriers to share: one batch after another

    def recognize(self, crops: Sequence[Crop], height: int, width: int, batch: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def recognize_many(self, batches: Sequence[RecBatch]) -> list[tuple[np.ndarray, np.ndarray]]:
        return [self.recognize(*b) for b in batches]

    def stream(self, index: int) -> Any:
        return self

    def set_lanes(self, detect: int, read: int) -> None:
        """Nothing to narrow: the same stages serve every lane."""

    def set_joint_batches(self, count: int) -> None:
        """Nothing to share: one batch after another."""

    def prepare(self, role: str, shape: tuple[int, ...]) -> None:
        """Nothing to record."""

    def reserve(self, role: str, shape: tuple[int, ...]) -> None:
        """No plan memory to size."""

    def learn_shape_class(self, role: str, shape: tuple[int, ...]) -> bool:
        return False

    def plan_stats(self) -> dict[str, dict[str, Any]]:
        return {}

    def recordings_total(self) -> int:
        return 0

    def wait_seconds(self) -> float:
        return 0.0
