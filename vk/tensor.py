"""A tensor on the device: an allocation, a shape and a dtype (contiguous, row-major)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vkocr.engine.memory import Allocation, BufferView


@dataclass
class Tensor:
    alloc: Allocation
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def view(self) -> BufferView:
        return BufferView(self.alloc.view.buffer, self.alloc.offset, self.nbytes)

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize
