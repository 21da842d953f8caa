"""Storage precision per node: which values a plan keeps in fp16, which in fp32, and the casts between them.

A model's `PrecisionPlan` names a default storage precision and the nodes that must stay fp32 (a calibration
decides them: agent/ocr/calibration.py). `assign()` runs on every specialised graph (vk/graph/plan_recipe.py):
each node that computes stores its output in its precision and reads its inputs in it, and where a value
crosses from one precision to the other a `StorageCast` node converts it, once per value and precision. A
view (Reshape, View, …) keeps its input's precision. The graph's input arrives in fp32 (the host or a prologue
writes it) and every output leaves in fp32 (readbacks and epilogues read fp32): the nodes that produce outputs
stay fp32, through any views in between. Arithmetic is fp32 everywhere (storage.glsl); only storage changes.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vkocr.engine.errors import ModelError
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.lower import is_view
from vkocr.engine.graph.lower_registry import STORAGE_CAST

FLOAT32 = np.dtype(np.float32)
FLOAT16 = np.dtype(np.float16)
STORAGE_DTYPES: dict[str, np.dtype] = {"fp32": FLOAT32, "fp16": FLOAT16}


@dataclass(frozen=True)
class PrecisionPlan:
    """Every node stores `default` ("fp32" or "fp16") except `fp32_nodes`, which store fp32. Compared by
    value, so a model's plans and shape classes are keyed by what the plan says, not by which object says it."""

    default: str = "fp32"
    fp32_nodes: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.default not in STORAGE_DTYPES:
            raise ModelError(f"precision {self.default!r}: expected one of {', '.join(STORAGE_DTYPES)}")

    @property
    def mixed(self) -> bool:
        """True when any node stores fp16."""
        return self.default != "fp32"

    def dtype(self, node: Node) -> np.dtype:
        return FLOAT32 if self.default == "fp32" or node.name in self.fp32_nodes else STORAGE_DTYPES[self.default]

    def with_fp32(self, names: Iterable[str]) -> PrecisionPlan:
        return PrecisionPlan(self.default, self.fp32_nodes | frozenset(names))

    def to_json(self) -> str:
        return json.dumps({"default": self.default, "fp32_nodes": sorted(self.fp32_nodes)}, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> PrecisionPlan:
        """A plan as `to_json` writes it; ModelError for anything else."""
        try:
            data: Any = json.loads(text)
            default, names = data["default"], data["fp32_nodes"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"not a precision plan: {exc}") from exc
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ModelError("not a precision plan: fp32_nodes must be a list of node names")
        return cls(str(default), frozenset(names))


FP32 = PrecisionPlan()


def output_producers(graph: Graph, outputs: Collection[str]) -> set[str]:
    """Names of the nodes whose results leave the plan as these outputs, looking through views."""
    producers = graph.producers()
    found: set[str] = set()
    todo = [name for name in outputs if name in producers]
    while todo:
        node = producers[todo.pop()]
        if is_view(node) and node.inputs[0] in producers:
            todo.append(node.inputs[0])
        else:
            found.add(node.name)
    return found


def cast_name(value: str, dtype: np.dtype) -> str:
    return f"{value}@{'fp16' if dtype == FLOAT16 else 'fp32'}"


def assign(graph: Graph, shapes: dict[str, Any], plan: PrecisionPlan, outputs: Collection[str],
           device_inputs: Any) -> tuple[Graph, dict[str, np.dtype]]:
    """The graph with a StorageCast wherever a value crosses precisions, and the storage dtype of every runtime
    value. `shapes` gains the casts' outputs. `device_inputs(node)`: the positions of the inputs a node reads
    on the device (the others are read on the host and keep their NumPy values)."""
    dtypes: dict[str, np.dtype] = {name: FLOAT32 for name in graph.inputs}
    if not plan.mixed:
        for node in graph.nodes:
            for name in node.outputs:
                if name:
                    dtypes[name] = FLOAT32
        return graph, dtypes
    fp32 = output_producers(graph, outputs)
    casts: dict[tuple[str, np.dtype], str] = {}
    nodes: list[Node] = []
    for node in graph.nodes:
        if is_view(node):
            out_dtype = dtypes.get(node.inputs[0], FLOAT32)
            nodes.append(node)
        else:
            out_dtype = FLOAT32 if node.name in fp32 else plan.dtype(node)
            inputs = list(node.inputs)
            for i in device_inputs(node):
                name = inputs[i]
                if not name or name not in dtypes or dtypes[name] == out_dtype:
                    continue  # absent, a constant (stored in the node's precision), or already right
                key = (name, out_dtype)
                if key not in casts:
                    casts[key] = cast_name(name, out_dtype)
                    nodes.append(Node(STORAGE_CAST, f"{casts[key]}.cast", [name], [casts[key]]))
                    shapes[casts[key]] = shapes[name]
                    dtypes[casts[key]] = out_dtype
                inputs[i] = casts[key]
            nodes.append(node if inputs == node.inputs else Node(node.op, node.name, inputs, node.outputs, node.attrs))
        for name in node.outputs:
            if name:
                dtypes[name] = out_dtype
    g = graph.shallow_copy()
    g.nodes = nodes
    return g, dtypes
