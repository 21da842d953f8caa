"""Constants on the device: a model's weights, uploaded once at load, and the few values a plan folds for its own
shape; each set in one device allocation, uploaded through one staging buffer in one copy. A constant is
stored in the precision of the nodes that read it (float32, or float16 under an fp16 precision plan): the
float16 copy has a key of its own (`constant_key`), so nodes of both precisions can read one weight."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from vkocr.engine.memory import Allocation
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

if TYPE_CHECKING:
    from vkocr.engine.device import Device

FLOAT32 = np.dtype(np.float32)
FLOAT16 = np.dtype(np.float16)


def constant_key(name: str, array: np.ndarray) -> str:
    """The arena key of a constant: its name, marked when it is stored as float16."""
    return f"{name}@fp16" if array.dtype == FLOAT16 else name


def _layout(arrays: Mapping[str, np.ndarray], alignment: int) -> tuple[dict[str, int], int]:
    offsets, end = {}, 0
    for key, array in arrays.items():
        offsets[key] = end
        end += max(alignment, math.ceil(array.nbytes / alignment) * alignment)
    return offsets, end


class ConstantArena:
    """Float32 and float16 constants (by `constant_key`) in one device allocation, uploaded through one staging
    buffer in one copy."""

    def __init__(self, device: Device, arrays: Mapping[str, np.ndarray]) -> None:
        self.device = device
        # float16 arrays keep their dtype (an fp16 node's); anything else is stored as float32
        self._arrays = {k: np.ascontiguousarray(a, dtype=FLOAT16 if a.dtype == FLOAT16 else FLOAT32)
                        for k, a in arrays.items()}
        offsets, total = _layout(self._arrays, device.alignment)
        self.nbytes = sum(a.nbytes for a in self._arrays.values())
        self.alloc: Allocation | None = device.pool.alloc(total, "device") if total else None
        self.tensors: dict[str, Tensor] = {}
        if self.alloc is not None:
            self._upload(self.alloc, offsets, total)
            self.tensors = {k: Tensor(self.alloc.sub(offsets[k], a.nbytes), a.shape, a.dtype)
                            for k, a in self._arrays.items()}

    def _upload(self, target: Allocation, offsets: dict[str, int], total: int) -> None:
        staging = self.device.pool.alloc(total, "upload")
        try:
            raw = staging.array(np.uint8)
            for key, array in self._arrays.items():
                raw[offsets[key]:offsets[key] + array.nbytes] = array.reshape(-1).view(np.uint8)
            staging.flush()
            with Recorder(self.device) as rec:  # same layout on both sides: one copy of everything
                rec.copy(staging.view, target.view, label="upload_constants")
                rec.run()
        finally:
            self.device.pool.free(staging)

    def lookup(self, key: str, array: np.ndarray) -> Tensor | None:
        """The uploaded tensor for `key` if it holds exactly `array` (a per-plan fold may differ)."""
        known = self._arrays.get(key)
        if known is None:
            return None
        same = known is array or (known.shape == np.shape(array) and np.array_equal(known, array))
        return self.tensors[key] if same else None

    def close(self) -> None:
        if self.alloc is not None:
            self.device.pool.free(self.alloc)
            self.alloc = None
        self.tensors.clear()
