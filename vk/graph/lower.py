"""Lowering: each IR node of a specialised graph → the kernel record calls that compute it.

A node's inputs reach the lowering in two forms. Runtime values and constant operands (weights, the 3.0 of an
Add) are device tensors in `ins`; inputs that only steer the computation (a Slice's bounds, a Clip's limits, a
Resize's scales, a Reshape's target) are read on the host from `NodeConstants.values` and never uploaded.
`host_inputs()` says which is which; `device_constants()` names every array a node needs on the device,
including ones derived from its parameters (a standalone BatchNormalization's scale and shift), so a model can
upload them once, at load.

Views (Reshape, Squeeze, Unsqueeze, Flatten, Identity, View, float→float Cast) record nothing: the plan gives
the output the input's bytes. Everything else is one or a few dispatches.

A model records each node again for every new input shape, so what does not depend on the shape is worked out
once: `prepare()` gives a node's `Emit`, which records it for any input shape. Rules with a `prepare` hook (Conv,
the most common node) check and pack their attributes and weights there; the others record from scratch.

The rules register themselves in `RULES` (vk/graph/lower_registry.py) by group: convolution and pooling
(lower_windows.py), elementwise (lower_elementwise.py), views and layout (lower_layout.py), matrix products and
normalisation (lower_matrix.py). This module imports them all, so `RULES` taken from here is complete; it holds
what the plan asks of a node: whether it lowers, its host inputs and device constants, its recording.
"""

from __future__ import annotations

import numpy as np

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.graph import lower_elementwise, lower_layout, lower_matrix, lower_windows  # noqa: F401  # their rules
from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.lower_registry import RULES as RULES
from vkocr.engine.graph.lower_registry import Emit, NodeConstants, Values, fail
from vkocr.engine.graph.opset_layout import VIEW_OPS
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

FLOAT32 = np.dtype(np.float32)
ONNX_FLOAT = 1  # TensorProto.FLOAT: the only Cast target a plan runs (as a view)


def check_lowerable(node: Node) -> None:
    """Raise LoweringError when no kernel sequence exists for this node, whatever its shapes."""
    if node.op not in RULES:
        raise fail(node, f"vkocr has no Vulkan lowering for {node.op} on runtime data")
    if node.op == "Cast" and int(node.attrs.get("to", 0)) != ONNX_FLOAT:
        raise fail(node, f"Cast to ONNX type {node.attrs.get('to')} at runtime: only float → float runs")
    if node.op == "MaxPool" and len([o for o in node.outputs if o]) > 1:
        raise fail(node, "MaxPool with an Indices output is not supported")
    if node.op == "Gelu" and node.attrs.get("approximate", "none") != "none":
        raise fail(node, f"Gelu approximate={node.attrs['approximate']!r} is not supported")
    if node.op in ("MaxPool", "AveragePool") and any(d != 1 for d in node.attrs.get("dilations", (1, 1))):
        raise fail(node, f"pooling dilations {node.attrs['dilations']} are not supported")


def is_view(node: Node) -> bool:
    """True when the output is the input's bytes with another shape: the plan aliases instead of copying."""
    return node.op in VIEW_OPS or node.op in ("View", "Cast")


def host_inputs(node: Node, values: Values) -> frozenset[int]:
    """Positions of the inputs read on the host (never uploaded)."""
    check_lowerable(node)
    return RULES[node.op].host_inputs(node, values)


def device_constants(node: Node, values: Values, dtype: np.dtype = FLOAT32) -> dict[str, np.ndarray]:
    """Every array this node reads on the device, in its storage `dtype` (float32 or float16), by key: constant
    operands under their value name, derived ones under "<node name>/<what>". `values[i]` is input i's constant
    value or None."""
    host = host_inputs(node, values)
    needed: dict[str, np.ndarray] = {}
    for i, (name, value) in enumerate(zip(node.inputs, values)):
        if name and value is not None and i not in host:
            if np.asarray(value).dtype.kind != "f":
                raise fail(node, f"constant operand {name} of dtype {np.asarray(value).dtype} (kernels need float32)")
            needed[name] = np.ascontiguousarray(value, dtype=dtype)
    derive = RULES[node.op].derive
    if derive is not None:
        require_host_constants(node, values, host)
        for what, array in derive(node, values).items():
            needed[derived_key(node, what)] = np.ascontiguousarray(array, dtype=dtype)
    return needed


def derived_key(node: Node, what: str) -> str:
    return f"{node.name}/{what}"


def require_host_constants(node: Node, values: Values, host: frozenset[int]) -> None:
    """Inputs read on the host must be constants once the input shape is known (a Slice's bounds, …)."""
    missing = [node.inputs[i] for i in sorted(host) if i < len(node.inputs) and node.inputs[i] and values[i] is None]
    if missing:
        raise fail(node, f"inputs {missing} must be constants for this input shape")


def record_node(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                consts: NodeConstants) -> None:
    """Record the dispatches of one node; LoweringError (naming the node) when its arguments do not fit."""
    require_host_constants(node, consts.values, host_inputs(node, consts.values))
    record_checked(rec, node, ins, outs, consts)


def record_checked(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                   consts: NodeConstants) -> None:
    """record_node for a caller that has already checked the node's host constants."""
    record_emit(rec, node, prepare(node, [None] * len(ins), consts), ins, outs)


def prepare(node: Node, static: list[Tensor | None], consts: NodeConstants) -> Emit:
    """The recording of `node` for any input shape, given its constant device tensors (`static`: None where an
    input is a runtime value) and host constants; LoweringError (naming the node) for bad attributes."""
    rule = RULES[node.op]
    if rule.prepare is not None:
        try:
            emit = rule.prepare(node, static, consts)
        except KernelArgumentError as exc:
            raise fail(node, str(exc)) from exc
        except (ValueError, KeyError, IndexError) as exc:
            raise fail(node, f"{type(exc).__name__}: {exc}") from exc
        if emit is not None:
            return emit
    record = rule.record
    return lambda rec, ins, outs: record(rec, node, ins, outs, consts)


def record_emit(rec: Recorder, node: Node, emit: Emit, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    """Run a prepared recording; its argument errors become LoweringErrors naming the node."""
    try:
        emit(rec, ins, outs)
    except KernelArgumentError as exc:
        raise fail(node, str(exc)) from exc
    except (ValueError, KeyError, IndexError) as exc:  # bad attributes surface from the opset helpers
        raise fail(node, f"{type(exc).__name__}: {exc}") from exc
