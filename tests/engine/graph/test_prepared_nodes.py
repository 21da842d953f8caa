"""A node prepared once (lower.prepare) records, at any later input shape, exactly what recording it from
scratch gives at that shape: the same pipelines, push constants, workgroup counts and bindings, command for
command. Conv nodes of every kind a model holds (dense, grouped, depthwise, pointwise, strided, dilated, with
and without bias, fused activation and post-affine), on the real driver."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng
from vkocr.engine.device import Device
from vkocr.engine.errors import LoweringError
from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.lower import prepare, record_emit, record_node
from vkocr.engine.graph.lower_registry import NodeConstants
from vkocr.engine.graph.opset import OPS
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

# attrs, weight shape (Cout, Cin/group, kh, kw), bias
CONVS: list[tuple[dict[str, Any], tuple[int, int, int, int], bool]] = [
    ({"pads": [1, 1, 1, 1]}, (8, 6, 3, 3), True),
    ({"strides": [2, 2], "pads": [1, 0, 1, 2], "activation": "hardswish"}, (8, 6, 3, 3), False),
    ({"group": 2, "dilations": [2, 1], "pads": [2, 1, 2, 1], "activation": "relu"}, (8, 3, 3, 3), True),
    ({"group": 6, "pads": [2, 2, 2, 2], "post_scale": 0.5, "post_shift": 0.25}, (6, 1, 5, 5), True),
    ({"group": 6, "strides": [2, 1], "pads": [1, 1, 1, 1], "activation": "leakyrelu", "act_alpha": 0.1},
     (6, 1, 3, 3), False),
    ({}, (4, 6, 1, 1), True),
]
SHAPES = [(1, 6, 12, 20), (2, 6, 9, 7), (1, 6, 33, 16)]


def commands(rec: Recorder) -> list[tuple[Any, ...]]:
    """Every recorded dispatch as comparable values (pipeline identity, bindings, push bytes, groups)."""
    return [(id(op.pipeline), tuple(op.views), op.push, op.groups) for op in rec._ops if hasattr(op, "pipeline")]


@pytest.mark.parametrize("attrs, w_shape, bias", CONVS)
def test_a_prepared_conv_records_what_a_fresh_recording_does(device: Device, attrs: dict[str, Any],
                                                             w_shape: tuple[int, int, int, int], bias: bool) -> None:
    rng, seed = fresh_rng()
    inputs = ["x", "w", "b"] if bias else ["x", "w"]
    node = Node("Conv", "conv", inputs, ["y"], {"kernel_shape": list(w_shape[2:]), **attrs})
    w = device.tensor(w_shape, np.float32)
    device.write(w, rng.standard_normal(w_shape).astype(np.float32))
    b = device.tensor((w_shape[0],), np.float32) if bias else None
    consts = NodeConstants([None, None, None][:len(inputs)])
    emit = prepare(node, [None, w, b][:len(inputs)], consts)
    held: list[Tensor] = [w, *([b] if b is not None else [])]
    try:
        for shape in SHAPES:
            x = device.tensor(shape, np.float32)
            (y_shape,) = OPS["Conv"].infer(node, [shape, w_shape, *([(w_shape[0],)] if bias else [])], [])
            y = device.tensor(tuple(y_shape), np.float32)
            held += [x, y]
            ins: list[Tensor | None] = [x, w, *([b] if b is not None else [])]
            with Recorder(device) as prepared, Recorder(device) as fresh:
                record_emit(prepared, node, emit, ins, [y])
                record_node(fresh, node, ins, [y], consts)
                assert commands(prepared) and commands(prepared) == commands(fresh), f"shape {shape}; seed {seed}"
        wrong = device.tensor((1, 5, 8, 8), np.float32)  # channels the weights do not take
        held.append(wrong)
        with Recorder(device) as rec, pytest.raises(LoweringError, match="conv"):
            record_emit(rec, node, emit, [wrong, w, *([b] if b is not None else [])], [y])
    finally:
        for t in held:
            device.free(t)
