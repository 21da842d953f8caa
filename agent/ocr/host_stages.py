"""The OCR stages' image work on the host, around models that a subclass runs (`run_model`): the NumPy reference
executor (numpy_stages.py) or onnxruntime (ort_stages.py). The image kernels are the NumPy references of the
GPU's shaders (image_reference.py), or the OpenCV calls they reproduce bit for bit (opencv_kernels.py): the
same crops either way, so the same lines."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from vkocr.agent.ocr import image_reference as reference
from vkocr.agent.ocr.image_kernels import Crop
from vkocr.agent.ocr.image_reference import preprocess_image, resize_normalize_pad, rotate_crop
from vkocr.agent.ocr.orientation import orientation_input
from vkocr.agent.ocr.prep import Prepared, prepared_image
from vkocr.agent.ocr.stages import NoPlanStages
from vkocr.engine.errors import KernelArgumentError


class LastLoaded(threading.local):
    """Per thread (an agent's lanes share one set of host stages): the image it loaded last, which its detect
    reads."""

    image: np.ndarray | None = None


class HostStages(NoPlanStages):
    """One set of stages for every thread (NoPlanStages), implementing Stages on the host."""

    backend: str
    max_batch = 64  # as the GPU stages: the same submissions, so the same results
    # the image kernels: (image, out_h, out_w) → image, and (image, inverse, w, h) → crop
    resize_u8 = staticmethod(reference.resize_linear_u8)
    warp = staticmethod(reference.warp_perspective_cubic)

    image_slots = 64  # images held at once (load's slot): host memory, so as many as a batch may want

    def __init__(self) -> None:
        self._last = LastLoaded()
        self.images: dict[int, np.ndarray] = {}  # by slot, which crops read

    @property
    def image(self) -> np.ndarray:
        """The image this thread loaded last, which its detect reads."""
        image = self._last.image
        return image if image is not None else np.zeros((1, 1, 3), np.uint8)

    def run_model(self, role: str, x: np.ndarray) -> np.ndarray:
        """The first output of model `role` ("det", "cls", "rec", "ori") for input `x`."""
        raise NotImplementedError

    def orient(self, image: np.ndarray) -> np.ndarray:
        if not self.orients:
            raise KernelArgumentError("no page orientation model loaded (model role ori)")
        return self.run_model("ori", orientation_input(image))[0]

    def load(self, image: np.ndarray, prep: Prepared, slot: int = 0, turn: int = 0) -> None:
        if not 0 <= slot < self.image_slots:
            raise KernelArgumentError(f"image slot {slot} outside 0..{self.image_slots - 1}")
        # a page turned upright (or any strided view): OpenCV's warps want rows of contiguous pixels
        image = np.rot90(image, turn) if turn else image
        image = image if image.flags.c_contiguous else np.ascontiguousarray(image)
        self._last.image = self.images[slot] = prepared_image(image, prep, self.resize_u8)

    def detect(self, det_h: int, det_w: int, thresh: float = 0.3, use_dilation: bool = True) -> np.ndarray:
        return self.run_model("det", preprocess_image(self.image, det_h, det_w, resize=self.resize_u8))[0, 0]

    def db_bitmap(self) -> np.ndarray | None:
        """None: DB thresholds and dilates the map on the host, as RapidOCR does."""
        return None

    def db_row_spans(self) -> np.ndarray | None:
        """None: no bitmap comes from here, so DB has no row spans of one."""
        return None

    def _batch(self, crops: Sequence[Crop], height: int, width: int) -> np.ndarray:
        items = []
        for c in crops:
            warped = self.warp(self.images[c.image], c.inverse, c.width, c.height)
            crop = rotate_crop(warped, c.rotate90, c.rotate180)
            items.append(resize_normalize_pad(crop, height, width, c.resized_w, resize=self.resize_u8))
        return np.stack(items)

    def classify(self, crops: Sequence[Crop], height: int, width: int) -> np.ndarray:
        return self.run_model("cls", self._batch(crops, height, width))

    def recognize(self, crops: Sequence[Crop], height: int, width: int, batch: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
        """`batch` is ignored: the CPU has no plans to save, only work, so spare slots are not run."""
        probs = self.run_model("rec", self._batch(crops, height, width))
        return probs.argmax(axis=-1).astype(np.int32), probs.max(axis=-1)
