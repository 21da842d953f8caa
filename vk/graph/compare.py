"""Layer-by-layer comparison with onnxruntime: which node's output first diverges beyond tolerance.

onnxruntime is a test/debug dependency, imported only here and only when a comparison runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vkocr.engine.errors import EngineError


@dataclass(frozen=True)
class LayerDiff:
    node: str
    op: str
    value: str
    rel_err: float


def rel_err(ours: np.ndarray, ref: np.ndarray) -> float:
    ref64 = np.asarray(ref, np.float64)
    diff = float(np.linalg.norm(np.asarray(ours, np.float64) - ref64))
    return diff / max(float(np.linalg.norm(ref64)), 1e-30)


def onnxruntime_values(model_path: str | Path, feeds: dict[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    """Run onnxruntime on the CPU with `names` added to the graph outputs; returns those values."""
    try:
        import onnx
        import onnxruntime as ort
    except ImportError as exc:
        raise EngineError("debug compare needs onnxruntime: pip install onnxruntime") from exc
    model = onnx.load(str(model_path))
    existing = {o.name for o in model.graph.output}
    for name in names:
        if name not in existing:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep every value
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    outputs = session.run(names, feeds)
    return dict(zip(names, outputs))


def compare_layers(
    nodes: list[tuple[str, str, str]],
    ours: Callable[[list[str]], dict[str, np.ndarray]],
    reference: Callable[[list[str]], dict[str, np.ndarray]],
    tolerance: float = 1e-4,
) -> tuple[list[LayerDiff], LayerDiff | None]:
    """Every (node, op, value) compared; the first one over `tolerance` (or None)."""
    names = [value for _, _, value in nodes]
    got, ref = ours(names), reference(names)
    diffs = [LayerDiff(n, op, v, rel_err(got[v], ref[v])) for n, op, v in nodes if v in got and v in ref]
    first = next((d for d in diffs if not d.rel_err <= tolerance), None)
    return diffs, first
