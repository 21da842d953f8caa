"""What the whole-model tests share: each model loaded once per backend for a test module."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vkocr.engine.device import Device
from vkocr.engine.graph.model import Model

GetModel = Callable[[Path, str], Model]  # (model file, "vulkan" or "numpy") -> the loaded model


@pytest.fixture(scope="module")
def models(device: Device) -> Iterator[GetModel]:
    """Each model loaded once per backend for the whole module (plans stay cached between tests)."""
    loaded: dict[tuple[Path, str], Model] = {}

    def get(path: Path, backend: str) -> Model:
        if (path, backend) not in loaded:
            loaded[(path, backend)] = Model.load(path, device if backend == "vulkan" else None)
        return loaded[(path, backend)]

    yield get
    for model in loaded.values():
        model.close()
