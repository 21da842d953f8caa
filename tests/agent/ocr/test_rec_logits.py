"""The recogniser on the GPU ends at its logits (agent/ocr/rec_logits.py): both model sets' rec models are cut
before their final softmax, and the epilogue's argmax from the logits gives, bit for bit, the classes and
probabilities that the whole model's softmax gives; graphs whose softmax cannot go are left whole."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng, poisoned, release, run
from vkocr.agent.ocr.model_sets import choose_models
from vkocr.agent.ocr.rec_logits import load_rec_logits, without_final_softmax
from vkocr.engine.device import Device
from vkocr.engine.graph.ir import Graph, Node
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.precision import FP32
from vkocr.engine.kernels.reduce import record_argmax
from vkocr.engine.ops.argmax import argmax_with_max


@pytest.mark.parametrize("model_set", ["ppocrv6-small", "ppocrv4"])
def test_the_argmax_of_the_logits_is_the_whole_models(device: Device, model_set: str) -> None:
    path = choose_models(model_set).paths["rec"]
    rng, seed = fresh_rng()
    x = rng.uniform(-1, 1, (2, 3, 48, 160)).astype(np.float32)
    cut, was_cut = load_rec_logits(path, device, FP32)
    with cut, Model.load(path, device) as whole:
        cut_plan, whole_plan = cut.plan(x.shape), whole.plan(x.shape)
        assert was_cut and cut_plan.dispatch_count == whole_plan.dispatch_count - 1
        assert "Softmax" not in cut_plan.spec.graph.op_counts() and whole.graph.nodes[-1].op == "Softmax"
        probs = whole_plan.run(x)[whole.output].copy()
        logits = cut_plan.run(x)[cut.output].copy()
    want_idx, want_val = argmax_with_max(probs, -1)
    t = device.upload(logits)
    idx, val = poisoned(device, want_idx.shape, np.int32), poisoned(device, want_val.shape)
    run(device, lambda rec: record_argmax(rec, t, idx, val, -1, softmax=True))
    got_idx, got_val = device.download(idx), device.download(val)
    release(device, t, idx, val)
    assert np.array_equal(got_idx, want_idx), f"{model_set}: classes differ; seed {seed}"
    assert np.array_equal(got_val.view(np.uint32), want_val.view(np.uint32)), \
        f"{model_set}: probabilities differ by up to {np.abs(got_val - want_val).max()}; seed {seed}"


def graph(*nodes: Node, output: str = "p") -> Graph:
    return Graph(list(nodes), ["x"], [output], {})


def test_only_a_final_softmax_over_the_last_axis_goes() -> None:
    matmul = Node("MatMul", "MatMul.0", ["x", "w"], ["logits"])
    last = Node("Softmax", "Softmax.0", ["logits"], ["p"], {"axis": 2})
    cut = without_final_softmax(graph(matmul, last), 3)
    assert cut is not None and cut.outputs == ["logits"] and cut.nodes == [matmul]
    assert without_final_softmax(graph(matmul, Node("Softmax", "s", ["logits"], ["p"])), None) is not None  # -1
    assert without_final_softmax(graph(matmul, last), None) is None  # axis 2 of an undeclared rank
    assert without_final_softmax(graph(matmul, last), 4) is None  # not the last axis
    assert without_final_softmax(graph(matmul, Node("Relu", "r", ["logits"], ["p"])), 3) is None
    reread = Node("Add", "Add.0", ["p", "p"], ["q"])
    assert without_final_softmax(graph(matmul, last, reread, output="p"), 3) is None  # p has another reader
