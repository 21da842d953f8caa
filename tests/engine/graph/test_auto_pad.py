"""auto_pad (SAME_UPPER, SAME_LOWER, VALID) on Conv, MaxPool and AveragePool, resolved per input shape: the NumPy
executor and a plan on the real driver against onnxruntime, on fresh random inputs (PP-OCRv6's stem pools and
convolves 2x2 at stride 1 with SAME_UPPER: one row and column of padding, at the end)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.engine.kernels.harness import fresh_rng
from vkocr.engine.device import Device
from vkocr.engine.errors import ShapeError
from vkocr.engine.graph.compare import rel_err
from vkocr.engine.graph.model import Model
from vkocr.engine.graph.opset_windows import same_pads
from vkocr.engine.graph.plan import Plan

# op, kernel, strides, dilations, auto_pad, input (N, C, H, W)
CASES = [
    ("MaxPool", (2, 2), (1, 1), (1, 1), "SAME_UPPER", (1, 5, 9, 12)),
    ("MaxPool", (2, 2), (1, 1), (1, 1), "SAME_LOWER", (1, 3, 7, 6)),
    ("MaxPool", (3, 3), (2, 2), (1, 1), "SAME_UPPER", (2, 4, 10, 11)),
    ("MaxPool", (3, 2), (3, 2), (1, 1), "VALID", (1, 2, 10, 9)),
    ("AveragePool", (2, 2), (1, 1), (1, 1), "SAME_UPPER", (1, 5, 9, 12)),
    ("AveragePool", (3, 3), (2, 3), (1, 1), "SAME_LOWER", (1, 3, 11, 13)),
    ("Conv", (2, 2), (1, 1), (1, 1), "SAME_UPPER", (1, 6, 9, 12)),
    ("Conv", (2, 2), (1, 1), (1, 1), "SAME_LOWER", (1, 6, 7, 5)),
    ("Conv", (3, 3), (2, 2), (1, 1), "SAME_UPPER", (1, 4, 10, 13)),
    ("Conv", (4, 3), (3, 2), (1, 1), "SAME_LOWER", (2, 3, 11, 10)),
    ("Conv", (3, 3), (1, 1), (1, 1), "VALID", (1, 4, 8, 9)),
]


def case_model(rng: np.random.Generator, op: str, kernel: tuple[int, int], strides: tuple[int, int],
               dilations: tuple[int, int], auto_pad: str, shape: tuple[int, ...]) -> onnx.ModelProto:
    attrs: dict[str, Any] = {"kernel_shape": list(kernel), "strides": list(strides), "auto_pad": auto_pad}
    inits = []
    inputs = ["x"]
    if op == "Conv":
        attrs["dilations"] = list(dilations)
        w, b = rng.uniform(-1, 1, (7, shape[1], *kernel)), rng.uniform(-1, 1, 7)
        inits = [numpy_helper.from_array(w.astype(np.float32), "w"), numpy_helper.from_array(b.astype(np.float32), "b")]
        inputs += ["w", "b"]
    node = helper.make_node(op, inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "auto_pad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def onnxruntime_y(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]  # type: ignore[no-any-return]  # onnxruntime is untyped


def test_same_pads() -> None:
    assert same_pads("SAME_UPPER", (9, 12), (2, 2), (1, 1)) == (0, 0, 1, 1)
    assert same_pads("SAME_LOWER", (9, 12), (2, 2), (1, 1)) == (1, 1, 0, 0)
    assert same_pads("SAME_UPPER", (10, 11), (3, 3), (2, 2)) == (0, 1, 1, 1)  # 5 outputs need 1 and 2 more
    assert same_pads("SAME_UPPER", (4, 4), (1, 1), (3, 3)) == (0, 0, 0, 0)  # never negative


@pytest.mark.parametrize("backend", ["vulkan", "numpy"])
@pytest.mark.parametrize(("op", "kernel", "strides", "dilations", "auto_pad", "shape"), CASES,
                         ids=[f"{c[0]}-{c[4]}-k{c[1][0]}{c[1][1]}s{c[2][0]}{c[2][1]}d{c[3][0]}" for c in CASES])
def test_auto_pad_matches_onnxruntime(device: Device, backend: str, op: str, kernel: tuple[int, int],
                                      strides: tuple[int, int], dilations: tuple[int, int], auto_pad: str,
                                      shape: tuple[int, ...]) -> None:
    rng, seed = fresh_rng()
    model = case_model(rng, op, kernel, strides, dilations, auto_pad, shape)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    ref = onnxruntime_y(model, x)
    with Model.load(model, device if backend == "vulkan" else None) as m:
        if isinstance(plan := m.plan(shape), Plan):
            plan.fill_arena(np.nan)
        got = plan.run(x)["y"]
    assert got.shape == ref.shape, f"{op} {auto_pad}: shape {got.shape} != {ref.shape}"
    err = rel_err(got, ref)
    assert err <= 1e-5, f"{op} {auto_pad} on {backend}: rel error {err:.3g}; seed {seed}"


@pytest.mark.parametrize("op", ["ConvTranspose", "Conv"])
def test_same_that_nothing_defines_is_refused(op: str) -> None:
    """ConvTranspose's SAME sizes the output from the input (another rule), and onnxruntime refuses SAME with
    dilations: both refused, never padded as a plain conv."""
    w = numpy_helper.from_array(np.ones((2, 2, 2, 2), np.float32), "w")
    attrs = {"strides": [2, 2]} if op == "ConvTranspose" else {"dilations": [2, 2]}
    node = helper.make_node(op, ["x", "w"], ["y"], auto_pad="SAME_UPPER", **attrs)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 2, 4, 4))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    with Model.load(model, None) as m, pytest.raises(ShapeError, match="auto_pad"):
        m.plan((1, 2, 4, 4))
