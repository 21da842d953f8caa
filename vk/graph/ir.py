"""The IR: nodes in topological order over named values; constants held as NumPy arrays.

Op types are ONNX's names, plus the fused ops the passes make (see vk/graph/opset.py). Attributes are plain
Python values; an operand that a pass turned into an attribute (a Reshape's target shape) is removed from
`inputs`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from vkocr.engine.graph.precision import PrecisionPlan


@dataclass
class Node:
    op: str
    name: str
    inputs: list[str]  # "" marks an absent optional input
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"{self.op}({self.name}: {', '.join(self.inputs)} -> {', '.join(self.outputs)})"


@dataclass
class Graph:
    nodes: list[Node]
    inputs: list[str]
    outputs: list[str]
    constants: dict[str, np.ndarray]
    metadata: dict[str, str] = field(default_factory=dict)
    name: str = ""
    precision: PrecisionPlan | None = None  # storage precision per node (vk/graph/precision.py); None: all fp32

    def copy(self) -> Graph:
        """A copy whose node list and attributes can be rewritten; constant arrays are shared, never mutated."""
        return Graph(copy.deepcopy(self.nodes), list(self.inputs), list(self.outputs), dict(self.constants),
                     dict(self.metadata), self.name, self.precision)

    def shallow_copy(self) -> Graph:
        """A copy whose node list and constant dict can be replaced, sharing the nodes themselves: for passes
        that drop or add nodes but never edit one (per-shape specialisation runs on the request path)."""
        return Graph(list(self.nodes), list(self.inputs), list(self.outputs), dict(self.constants),
                     dict(self.metadata), self.name, self.precision)

    def producers(self) -> dict[str, Node]:
        return {out: n for n in self.nodes for out in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for n in self.nodes:
            for name in n.inputs:
                if name:
                    users.setdefault(name, []).append(n)
        return users

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return dict(sorted(counts.items()))
