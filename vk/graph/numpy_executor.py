"""Run a specialised graph with the NumPy ops: the reference for tests, and the explicit CPU fallback."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from vkocr.engine.graph.opset import OPS
from vkocr.engine.graph.specialize import Specialized


def run_numpy(
    spec: Specialized,
    feeds: dict[str, np.ndarray],
    *,
    keep: Callable[[str], bool] | None = None,
) -> dict[str, np.ndarray]:
    """The graph outputs (and every value for which `keep(name)` is true) for these inputs."""
    g = spec.graph
    values: dict[str, np.ndarray] = dict(g.constants)
    for name in g.inputs:
        values[name] = np.ascontiguousarray(feeds[name], dtype=np.float32).reshape(np.shape(feeds[name]))
    users: dict[str, int] = {}
    for node in g.nodes:
        for name in node.inputs:
            users[name] = users.get(name, 0) + 1
    wanted = set(g.outputs)
    kept: dict[str, np.ndarray] = {}
    for node in g.nodes:
        args = [values[name] if name else None for name in node.inputs]
        for out, value in zip(node.outputs, OPS[node.op].run(node, args)):  # type: ignore[arg-type]  # None: an omitted optional input
            values[out] = value
            if keep is not None and keep(out):
                kept[out] = value
        for name in node.inputs:  # free what no later node reads (det activations are large)
            users[name] -= 1
            if users[name] == 0 and name not in wanted and name not in g.constants:
                values.pop(name, None)
    return {**kept, **{name: values[name] for name in g.outputs}}
