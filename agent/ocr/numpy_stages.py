"""The OCR stages on the NumPy reference executor of the models: the reference for tests and `debug compare`,
chosen only by name (`--device numpy`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from vkocr.agent.ocr.host_stages import HostStages
from vkocr.engine.graph.model import Model


class NumpyStages(HostStages):
    backend = "numpy (reference executor)"

    def __init__(self, model_paths: Mapping[str, Path]) -> None:
        super().__init__()
        self.models = {role: Model.load(path, None) for role, path in model_paths.items()}
        self.orients = "ori" in self.models

    def run_model(self, role: str, x: np.ndarray) -> np.ndarray:
        return self.models[role].run(x)

    def rec_output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return self.models["rec"].output_shape(input_shape)

    def close(self) -> None:
        for model in self.models.values():
            model.close()
