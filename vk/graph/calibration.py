"""Calibrating a precision plan: how large each node's values get on real inputs, and which nodes must therefore
store fp32.

fp16 holds magnitudes up to 65504. A node whose output, on real inputs, comes within `headroom` (16×) of that
stays fp32: an input a little brighter or busier than the calibration set must not overflow to inf (TensorRT's
fp16 collapsed PP-OCRv4 server det that way). The ranges come from the fp32 model itself, on the device (every
value read back) or on the NumPy executor. What the answers say decides the rest (agent/ocr/calibration.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from vkocr.engine.errors import ModelError
from vkocr.engine.graph import passes
from vkocr.engine.graph.lower import is_view
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.numpy_executor import run_numpy
from vkocr.engine.graph.precision import PrecisionPlan
from vkocr.engine.graph.specialize import specialize

FP16_MAX = 65504.0
HEADROOM = 16.0


@dataclass(frozen=True)
class NodeRange:
    """The largest |value| a node wrote over the calibration inputs, and whether fp16 holds it with headroom."""

    node: str
    op: str
    max_abs: float

    def fits(self, headroom: float = HEADROOM) -> bool:
        return bool(np.isfinite(self.max_abs)) and self.max_abs * headroom <= FP16_MAX


def value_ranges(model: Model, inputs: Iterable[np.ndarray]) -> dict[str, NodeRange]:
    """max |output| of every node that computes (views excluded: they hold their source's values), by node
    name, over `inputs`, run in fp32: on the model's device, every value read back, or on the NumPy executor.
    Every node of the optimised graph is measured, also those a per-shape pass would fuse (an SE block's gate, an
    attention's scores, which a fused kernel stores in the node's precision all the same): asked for, a value
    is never fused away (plan_recipe.specialize_for)."""
    if model.precision.mixed:
        raise ModelError("ranges are measured on the fp32 model: load it with the default precision")
    ranges: dict[str, NodeRange] = {}
    for x in inputs:
        spec = passes.as_views(specialize(model.graph, {model.input.name: tuple(x.shape)}))  # no fusion
        computed = {n.outputs[0]: n for n in spec.graph.nodes if not is_view(n) and n.outputs and n.outputs[0]}
        if model.device is None:
            values = run_numpy(spec, {model.input.name: x}, keep=computed.__contains__)
        else:
            values = model.plan(x.shape, extra_outputs=sorted(computed)).run(x)
        for name, node in computed.items():
            peak = float(np.max(np.abs(values[name]))) if np.size(values[name]) else 0.0
            known = ranges.get(node.name)
            if known is None or peak > known.max_abs or not np.isfinite(peak):
                ranges[node.name] = NodeRange(node.name, node.op, peak)
    return ranges


def propose(ranges: dict[str, NodeRange], *, default: str = "fp16", headroom: float = HEADROOM,
            keep_fp32: Iterable[str] = ()) -> PrecisionPlan:
    """A plan storing `default` everywhere except the nodes whose range does not fit with `headroom`, and
    `keep_fp32`. The nodes are every node of the optimised graph (value_ranges). Where a per-shape pass fuses
    nodes, an Add folded into a conv's epilogue takes the conv's precision; an SE block's excitation and an
    attention fuse only where their nodes share one precision, so a node kept fp32 keeps its block apart."""
    unsafe = {name for name, measured in ranges.items() if not measured.fits(headroom)}
    return PrecisionPlan(default, frozenset(unsafe | set(keep_fp32)))
