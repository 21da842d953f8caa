"""`vkocr calibrate`: a model set's precision plans (which nodes may store fp16), chosen by measurement.

1. The calibration images go through the CPU backend's pipeline, and every input each model receives is kept:
   det's prepared pages, cls's and rec's crop batches, exactly as serving makes them.
2. The fp32 model runs those inputs on the device; a node whose values come within 16× of fp16's largest
   (65504) stays fp32 (vk/graph/calibration.py).
3. The proposed plan runs the same inputs, and its outputs are judged by what the pipeline decides from them:
   det's bitmap (map > det_thresh), cls's label where fp32 is sure of it, rec's character at every time step
   where fp32's top two differ by more than a close call. While a decision changes, more nodes stay fp32,
   from the output backwards (rounding compounds towards the output), doubling each time.

What comes out is one PrecisionPlan per role, written as JSON beside the package's other model-set data
(agent/ocr/precision_plans/) and inside bundles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vkocr.agent.ocr.ort_stages import OrtStages
from vkocr.engine.graph.calibration import HEADROOM, NodeRange, propose, value_ranges
from vkocr.engine.graph.model import Model, runtime_nodes
from vkocr.engine.graph.precision import FP32, PrecisionPlan

DET_THRESH = 0.3  # the bitmap threshold both model sets use (OcrOptions.det_thresh)
CLOSE_CALL = 1e-3  # top-1 minus top-2 below this is a coin toss in fp32 already: not held against fp16
SURE_CLS = 0.05  # cls labels are compared where fp32's two scores differ by more than this
MAX_BITMAP_FLIPS = 1e-4  # share of det's bitmap pixels allowed to flip (a pixel on a text edge)


class RecordingStages(OrtStages):
    """The CPU backend, keeping a copy of every model input by role."""

    def __init__(self, model_paths: Mapping[str, Path], threads: int = 0) -> None:
        super().__init__(model_paths, threads)
        self.inputs: dict[str, list[np.ndarray]] = {role: [] for role in model_paths}

    def run_model(self, role: str, x: np.ndarray) -> np.ndarray:
        self.inputs[role].append(np.array(x, np.float32, copy=True))
        return super().run_model(role, x)


@dataclass
class RoleReport:
    """What calibrating one model found."""

    role: str
    inputs: int
    nodes: int  # nodes that compute (views excluded)
    out_of_range: list[str] = field(default_factory=list)  # kept fp32 by their values' range
    kept_for_answers: int = 0  # kept fp32, from the output backwards, so the decisions stay fp32's
    decisions: int = 0  # decisions compared (bitmap pixels, labels, time steps)
    changed: int = 0  # of which the final plan changes
    largest: list[NodeRange] = field(default_factory=list)  # the five largest ranges
    plan: PrecisionPlan = FP32


def changed_decisions(role: str, ref: np.ndarray, got: np.ndarray) -> tuple[int, int]:
    """(decisions compared, decisions changed) between fp32's output `ref` and another plan's `got`."""
    if role == "det":
        flips = int(np.count_nonzero((ref > DET_THRESH) != (got > DET_THRESH)))
        return ref.size, 0 if flips <= MAX_BITMAP_FLIPS * ref.size else flips
    classes = ref.reshape(-1, ref.shape[-1])
    other = got.reshape(-1, got.shape[-1])
    top2 = np.sort(classes, axis=-1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    judged = margin > (SURE_CLS if role == "cls" else CLOSE_CALL)
    changed = np.argmax(classes, -1) != np.argmax(other, -1)
    return int(judged.sum()), int((changed & judged).sum())


def outputs(model: Model, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.array(model.run(x), copy=True) for x in inputs]


def calibrate_role(role: str, path: Path, device: Any, inputs: Sequence[np.ndarray], *,
                   headroom: float = HEADROOM, progress: Callable[[str], None] = lambda _: None) -> RoleReport:
    """The precision plan of one model from its recorded inputs (on `device`, an open engine Device)."""
    with Model.load(path, device, shape_classes=False) as fp32:
        progress(f"{role}: ranges over {len(inputs)} inputs")
        ranges = value_ranges(fp32, inputs)
        reference = outputs(fp32, inputs)
        order = [n.name for n in runtime_nodes(fp32.graph) if n.name in ranges]  # graph order, as the plans ran
    candidate = propose(ranges, headroom=headroom)
    report = RoleReport(role, len(inputs), len(order), sorted(candidate.fp32_nodes & set(order)),
                        largest=sorted(ranges.values(), key=lambda r: -r.max_abs)[:5])
    keep = 0
    while True:
        plan = candidate.with_fp32(order[len(order) - keep:] if keep else ())
        with Model.load(path, device, shape_classes=False, precision=plan) as model:
            got = outputs(model, inputs)
        judged = changed = 0
        for ref, out in zip(reference, got):
            j, c = changed_decisions(role, ref, out)
            judged, changed = judged + j, changed + c
        progress(f"{role}: last {keep} nodes kept fp32: {changed} of {judged} decisions change")
        if changed == 0 or keep >= len(order):
            break
        keep = min(len(order), max(1, keep * 2))
    report.kept_for_answers, report.decisions, report.changed, report.plan = keep, judged, changed, plan
    return report
