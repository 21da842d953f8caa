"""A tensor on the device: an allocation, a shape and a dtype (contiguous, row-major)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from vkocr.engine.memory import Allocation, BufferView


class Tensor:
    """Immutable once made. A slotted class rather than a frozen dataclass: a plan makes one per value and per
    view on the request path, and the dataclass's field-by-field set-up cost twice as much."""

    __slots__ = ("alloc", "shape", "dtype", "numel", "nbytes", "view")
    alloc: Allocation
    shape: tuple[int, ...]
    dtype: np.dtype
    numel: int
    nbytes: int
    view: BufferView  # the bytes a descriptor binds: numel elements from the allocation's start (over its slot)

    def __init__(self, alloc: Allocation, shape: tuple[int, ...], dtype: np.dtype) -> None:
        numel = math.prod(shape)
        nbytes = numel * dtype.itemsize
        init = object.__setattr__
        init(self, "alloc", alloc)
        init(self, "shape", shape)
        init(self, "dtype", dtype)
        init(self, "numel", numel)
        init(self, "nbytes", nbytes)
        init(self, "view", BufferView(alloc.view.buffer, alloc.offset, nbytes, alloc.size))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Tensor is immutable: cannot set {name}")

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, dtype={self.dtype}, offset={self.alloc.offset})"
