"""Specialise a graph for concrete input shapes: infer every shape and fold what became constant.

With the input shapes known, Shape nodes are constants, and so is every shape subgraph behind them
(Shape/Cast/Slice/Concat/Gather/Unsqueeze/Reshape): they are evaluated once here with the NumPy ops, so a plan
runs only the nodes that touch data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vkocr.engine.errors import ShapeError
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.opset import OPS, Shape


@dataclass
class Specialized:
    """A graph whose nodes all touch runtime data, with the shape of every value."""

    graph: Graph
    shapes: dict[str, Shape]

    def shape(self, name: str) -> Shape:
        return self.shapes[name] if name in self.shapes else tuple(self.graph.constants[name].shape)


def specialize(graph: Graph, input_shapes: dict[str, Shape]) -> Specialized:
    """Shape inference and constant folding for these input shapes; the input graph is not modified."""
    g = graph.shallow_copy()  # nodes are only dropped here, never edited
    missing = [name for name in g.inputs if name not in input_shapes]
    if missing:
        raise ShapeError(f"no shape given for graph inputs {missing}")
    shapes: dict[str, Shape] = {name: tuple(int(d) for d in input_shapes[name]) for name in g.inputs}
    kept: list[Node] = []
    for node in g.nodes:
        present = [name for name in node.inputs if name]
        if node.op == "Shape" and node.inputs[0] in shapes:
            g.constants[node.outputs[0]] = np.array(shapes[node.inputs[0]], dtype=np.int64)
        elif all(g.is_const(name) for name in present):
            values = [g.constants[name] if name else None for name in node.inputs]
            for out, value in zip(node.outputs, OPS[node.op].run(node, values)):  # type: ignore[arg-type]  # None: an omitted optional input
                g.constants[out] = np.asarray(value)
        else:
            in_shapes = [shapes.get(n, g.constants[n].shape if g.is_const(n) else ()) if n else () for n in node.inputs]
            consts = [g.constants.get(n) if n else None for n in node.inputs]
            try:
                out_shapes = OPS[node.op].infer(node, in_shapes, consts)
            except (ValueError, KeyError, IndexError) as exc:
                raise ShapeError(f"node {node.name} ({node.op}) with input shapes {in_shapes}: {exc}") from exc
            for out, shape in zip(node.outputs, out_shapes):
                shapes[out] = tuple(int(d) for d in shape)
            kept.append(node)
    g.nodes = kept
    return Specialized(g, shapes)
