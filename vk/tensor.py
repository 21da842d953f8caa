"""A tensor on the device: an allocation, a shape and a dtype (contiguous, row-major)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from vkocr.engine.memory import Allocation, BufferView


@dataclass(frozen=True)
class Tensor:
    alloc: Allocation
    shape: tuple[int, ...]
    dtype: np.dtype

    numel: int = field(init=False, repr=False, compare=False)
    nbytes: int = field(init=False, repr=False, compare=False)
    view: BufferView = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Derived once: kernels read them many times while a plan is recorded, which is on the request path.
        numel = math.prod(self.shape)
        nbytes = numel * self.dtype.itemsize
        object.__setattr__(self, "numel", numel)
        object.__setattr__(self, "nbytes", nbytes)
        object.__setattr__(self, "view", BufferView(self.alloc.view.buffer, self.alloc.offset, nbytes))
