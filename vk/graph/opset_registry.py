"""The op registry: every op type the IR knows maps to an `OpDef`, its output shapes for concrete input shapes
(`infer`) and its NumPy execution (`run`). The ops register themselves with `@op` in the opset_* modules;
import `OPS` from vk/graph/opset.py, which imports them all (from here it may still be incomplete).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vkocr.engine.graph.ir import Node

Shape = tuple[int, ...]
Infer = Callable[[Node, list[Shape], list[np.ndarray | None]], list[Shape]]
Run = Callable[[Node, list[np.ndarray]], list[np.ndarray]]


@dataclass(frozen=True)
class OpDef:
    infer: Infer
    run: Run


OPS: dict[str, OpDef] = {}


def op(*names: str, infer: Infer) -> Callable[[Run], Run]:
    """Register `run` (and `infer`) for these op types."""

    def register(run: Run) -> Run:
        for name in names:
            OPS[name] = OpDef(infer, run)
        return run

    return register


def same_shape(node: Node, shapes: list[Shape], consts: list[np.ndarray | None]) -> list[Shape]:
    return [shapes[0]]


def norm_axis(axis: int, rank: int) -> int:
    """A possibly negative ONNX axis as 0..rank-1."""
    return axis + rank if axis < 0 else axis
