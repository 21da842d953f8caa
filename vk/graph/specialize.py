"""Specialise a graph for concrete input shapes: infer every shape and fold what became constant.

With the input shapes known, Shape nodes are constants, and so is every shape subgraph behind them
(Shape/Cast/Slice/Concat/Gather/Unsqueeze/Reshape): they are evaluated once here with the NumPy ops, so a plan
runs only the nodes that touch data. Under a symbolic trace (vk/symbolic.py) a Shape folds to an object array of
the dimensions, so the shape subgraphs behind it fold symbolically too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vkocr.engine.errors import ShapeError
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.opset import OPS, Shape
from vkocr.engine.symbolic import dim, is_symbolic

FLOAT32 = np.dtype(np.float32)


@dataclass
class Specialized:
    """A graph whose nodes all touch runtime data, with the shape of every value."""

    graph: Graph
    shapes: dict[str, Shape]
    dtypes: dict[str, np.dtype] = field(default_factory=dict)  # storage of runtime values; absent: float32

    def shape(self, name: str) -> Shape:
        return self.shapes[name] if name in self.shapes else tuple(self.graph.constants[name].shape)

    def dtype(self, name: str) -> np.dtype:
        return self.dtypes.get(name, FLOAT32)


def shape_value(shape: Shape) -> np.ndarray:
    """What a Shape node folds to: int64, or an object array where a dimension is symbolic."""
    return np.array(shape, dtype=object if is_symbolic(shape) else np.int64)


def specialize(graph: Graph, input_shapes: dict[str, Shape]) -> Specialized:
    """Shape inference and constant folding for these input shapes; the input graph is not modified."""
    g = graph.shallow_copy()  # nodes are only dropped here, never edited
    missing = [name for name in g.inputs if name not in input_shapes]
    if missing:
        raise ShapeError(f"no shape given for graph inputs {missing}")
    shapes: dict[str, Shape] = {name: tuple(dim(d) for d in input_shapes[name]) for name in g.inputs}
    kept: list[Node] = []
    constants = g.constants
    for node in g.nodes:  # on the request path (a plan per new shape): plain loops, no generators
        inputs = node.inputs
        if node.op == "Shape" and inputs[0] in shapes:
            constants[node.outputs[0]] = shape_value(shapes[inputs[0]])
        elif all(not name or name in constants for name in inputs):
            values = [constants[name] if name else None for name in inputs]
            for out, value in zip(node.outputs, OPS[node.op].run(node, values)):  # type: ignore[arg-type]  # None: an omitted optional input
                constants[out] = np.asarray(value)
        else:
            in_shapes: list[Shape] = []
            consts: list[np.ndarray | None] = []
            for name in inputs:
                if name in shapes:
                    in_shapes.append(shapes[name])
                    consts.append(None)
                elif name in constants:
                    in_shapes.append(constants[name].shape)
                    consts.append(constants[name])
                else:  # an omitted optional input
                    in_shapes.append(())
                    consts.append(None)
            try:
                out_shapes = OPS[node.op].infer(node, in_shapes, consts)
            except (ValueError, KeyError, IndexError) as exc:
                raise ShapeError(f"node {node.name} ({node.op}) with input shapes {in_shapes}: {exc}") from exc
            for out, shape in zip(node.outputs, out_shapes):
                shapes[out] = tuple(map(dim, shape))
            kept.append(node)
    g.nodes = kept
    return Specialized(g, shapes)
