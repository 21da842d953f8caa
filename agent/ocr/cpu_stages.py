"""The explicit CPU fallback of the OCR stages: the NumPy references of the image kernels and the NumPy
executor of the models. Chosen with `--device cpu`, and reported as such."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from vkocr.agent.ocr.image_kernels import CropSlot
from vkocr.agent.ocr.image_reference import (
    preprocess_image,
    resize_linear_u8,
    resize_normalize_pad,
    rotate_crop,
    warp_perspective_cubic,
)
from vkocr.agent.ocr.prep import Prepared, prepared_image
from vkocr.engine.graph.model import Model


class CpuStages:
    backend = "cpu (numpy)"
    max_batch = 64  # as the GPU stages: the same submissions, so the same results

    def __init__(self, model_paths: Mapping[str, Path]) -> None:
        self.models = {role: Model.load(path, None) for role, path in model_paths.items()}
        self.image = np.zeros((1, 1, 3), np.uint8)

    def load(self, image: np.ndarray, prep: Prepared) -> None:
        self.image = prepared_image(image, prep, resize_linear_u8)

    def detect(self, det_h: int, det_w: int, thresh: float = 0.3, use_dilation: bool = True) -> np.ndarray:
        return self.models["det"].run(preprocess_image(self.image, det_h, det_w))[0, 0]

    def db_bitmap(self) -> np.ndarray | None:
        """None: DB thresholds and dilates the map on the host, as RapidOCR does."""
        return None

    def _batch(self, crops: Sequence[CropSlot], height: int, width: int) -> np.ndarray:
        items = []
        for c in crops:
            warped = warp_perspective_cubic(self.image, c.inverse, c.width, c.height)
            crop = rotate_crop(warped, c.rotate90, c.rotate180)
            items.append(resize_normalize_pad(crop, height, width, c.resized_w))
        return np.stack(items)

    def classify(self, crops: Sequence[CropSlot], height: int, width: int) -> np.ndarray:
        return self.models["cls"].run(self._batch(crops, height, width))

    def recognize(self, crops: Sequence[CropSlot], height: int, width: int, batch: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
        """`batch` is ignored: the CPU has no plans to save, only work, so spare slots are not run."""
        probs = self.models["rec"].run(self._batch(crops, height, width))
        return probs.argmax(axis=-1).astype(np.int32), probs.max(axis=-1)

    def rec_output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return self.models["rec"].output_shape(input_shape)

    def close(self) -> None:
        for model in self.models.values():
            model.close()
