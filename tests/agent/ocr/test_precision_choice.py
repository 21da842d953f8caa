"""Which storage precision serves and why (agent/ocr/precision.py), calibration's decision rules
(agent/ocr/calibration.py) and the plan's file format (vk/graph/precision.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng
from vkocr.agent.errors import OptionsError
from vkocr.agent.ocr import precision as choice
from vkocr.agent.ocr.calibration import changed_decisions
from vkocr.engine.errors import ModelError
from vkocr.engine.graph.calibration import NodeRange, propose
from vkocr.engine.graph.precision import PrecisionPlan

GATED = json.dumps({"models": {"det": {"default": "fp16", "fp32_nodes": ["head"]},
                               "cls": {"default": "fp16", "fp32_nodes": []},
                               "rec": {"default": "fp16", "fp32_nodes": ["ctc"]}},
                    "gate": {"passed": True, "lines": 100, "lines_identical": 100}})


@pytest.fixture
def shipped(monkeypatch: pytest.MonkeyPatch) -> dict[str, choice.ShippedPlans | None]:
    """The plans file each model set ships, replaced for the test."""
    plans: dict[str, choice.ShippedPlans | None] = {}
    monkeypatch.setattr(choice, "shipped_plans", lambda name: plans.get(name))
    return plans


def pick(setting: str, *, storage: bool = True, quirks: frozenset[str] = frozenset(),
         model_set: str | None = "set", cpu_driver: bool = False) -> choice.PrecisionChoice:
    return choice.choose_precision(setting, fp16_storage=storage, workarounds=quirks, model_set=model_set,
                                   device_name="GPU", cpu_driver=cpu_driver)


def test_auto_serves_fp16_only_with_storage_no_quirk_and_a_gated_plan(shipped: dict) -> None:
    assert pick("auto").precision == "fp32" and "no calibrated" in pick("auto").reason
    shipped["set"] = choice.parse_plans(GATED)
    served = pick("auto")
    assert served.precision == "fp16" and served.plans["det"].fp32_nodes == {"head"} and "gate" in served.reason
    assert pick("auto", storage=False).precision == "fp32" and "16-bit storage" in pick("auto", storage=False).reason
    assert pick("auto", quirks=frozenset({choice.FP16_QUIRK})).precision == "fp32"
    on_lavapipe = pick("auto", cpu_driver=True)
    assert on_lavapipe.precision == "fp32" and "CPU implementation" in on_lavapipe.reason
    assert pick("fp16", cpu_driver=True).precision == "fp16"  # asked for, it serves all the same
    shipped["set"] = choice.parse_plans(GATED.replace('"passed": true', '"passed": false'))
    assert pick("auto").precision == "fp32" and "did not pass" in pick("auto").reason


def test_fp16_asked_for_is_refused_where_it_cannot_run_and_uniform_without_a_plan(shipped: dict) -> None:
    with pytest.raises(OptionsError, match="16-bit storage"):
        pick("fp16", storage=False)
    with pytest.raises(OptionsError, match="quirks"):
        pick("fp16", quirks=frozenset({choice.FP16_QUIRK}))
    uniform = pick("fp16")
    assert uniform.precision == "fp16" and all(p == PrecisionPlan("fp16") for p in uniform.plans.values())
    assert pick("fp32", storage=False).plans["rec"] == PrecisionPlan("fp32")
    with pytest.raises(OptionsError, match="expected one of"):
        pick("bf16")


def test_a_plan_survives_its_file_and_a_broken_file_is_refused() -> None:
    plan = PrecisionPlan("fp16", frozenset({"a", "b"}))
    assert PrecisionPlan.from_json(plan.to_json()) == plan
    for text in ["{", "[]", '{"default": "fp16"}', '{"default": "fp16", "fp32_nodes": [1]}',
                 '{"default": "int8", "fp32_nodes": []}']:
        with pytest.raises(ModelError):
            PrecisionPlan.from_json(text)


def test_propose_keeps_fp32_what_leaves_no_headroom() -> None:
    ranges = {"small": NodeRange("small", "Conv", 100.0), "large": NodeRange("large", "Conv", 5000.0),
              "broken": NodeRange("broken", "Conv", float("inf"))}
    plan = propose(ranges)
    assert plan.default == "fp16" and plan.fp32_nodes == {"large", "broken"}
    assert propose(ranges, headroom=10.0).fp32_nodes == {"broken"}
    assert propose(ranges, keep_fp32=["small"]).fp32_nodes == {"small", "large", "broken"}
    assert not NodeRange("n", "Conv", float("inf")).fits()


def test_decisions_compared_are_the_pipeline_s_own() -> None:
    rng, seed = fresh_rng()
    det = rng.uniform(0, 1, (1, 1, 64, 80)).astype(np.float32)
    moved = det.copy()
    edge = np.abs(det - 0.3) < 0.02  # pixels on the threshold's edge flip when nudged across it
    moved[edge] = 0.6 - det[edge]
    judged, changed = changed_decisions("det", det, moved)
    assert judged == det.size and changed == int(((det > 0.3) != (moved > 0.3)).sum()) > 0, seed
    assert changed_decisions("det", det, det + 1e-7)[1] == 0
    logits = rng.uniform(0, 1, (2, 40, 30)).astype(np.float32)
    logits[0, 3, 5] = 2.0  # a sure step…
    flipped = logits.copy()
    flipped[0, 3, 6] = 3.0  # …whose top class changes
    judged, changed = changed_decisions("rec", logits, flipped)
    assert judged == 80 - int(((np.sort(logits, -1)[..., -1] - np.sort(logits, -1)[..., -2]) <= 1e-3).sum())
    assert changed == 1, seed
