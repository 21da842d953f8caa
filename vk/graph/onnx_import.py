"""ONNX → IR. Initializers and Constant nodes become constants; an op we cannot run is reported here, at load
time, with every unsupported op type and the names of its nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from vkocr.engine.errors import ModelError as ModelError  # re-exported: importable from here too
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.opset import OPS


def _attr(a: onnx.AttributeProto) -> Any:
    value = onnx.helper.get_attribute_value(a)
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    return value


def load_proto(path: str | Path) -> onnx.ModelProto:
    """An ONNX file; ModelError when it cannot be read as one."""
    try:
        return onnx.load(str(path))
    except Exception as exc:  # onnx raises DecodeError, OSError, ...: all mean "not a readable model"
        raise ModelError(f"cannot read ONNX model {path}: {exc}") from exc


def load_onnx(path: str | Path) -> Graph:
    return from_onnx(load_proto(path), name=Path(path).name)


def from_onnx(model: onnx.ModelProto, name: str = "") -> Graph:
    g = model.graph
    constants = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    nodes: list[Node] = []
    unsupported: dict[str, list[str]] = {}
    for i, n in enumerate(g.node):
        node_name = n.name or f"{n.op_type}_{i}"
        attrs = {a.name: _attr(a) for a in n.attribute}
        if n.op_type == "Constant":
            constants[n.output[0]] = np.asarray(attrs.get("value", attrs.get("value_float", attrs.get("value_ints"))))
            continue
        if n.domain not in ("", "ai.onnx") or n.op_type not in OPS:
            unsupported.setdefault(f"{n.domain + '.' if n.domain else ''}{n.op_type}", []).append(node_name)
            continue
        nodes.append(Node(n.op_type, node_name, list(n.input), list(n.output), attrs))
    if unsupported:
        listing = "; ".join(f"{op} (nodes: {', '.join(names[:5])}{', …' if len(names) > 5 else ''})"
                            for op, names in sorted(unsupported.items()))
        raise ModelError(f"model {name or g.name} uses operators vkocr cannot run: {listing}")
    inputs = [i.name for i in g.input if i.name not in constants]
    metadata = {p.key: p.value for p in model.metadata_props}
    return Graph(nodes, inputs, [o.name for o in g.output], constants, metadata, name or g.name)
