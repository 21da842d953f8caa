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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from vkocr.engine.errors import KernelArgumentError, LoweringError
from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.opset_elementwise import UNARY_OP_TYPES, unary_params
from vkocr.engine.graph.opset_layout import VIEW_OPS, resize_args, resize_modes, slice_args, transpose_perm
from vkocr.engine.graph.opset_matrix import reduce_axes, softmax_axis
from vkocr.engine.graph.opset_windows import conv_attrs, conv_transpose_attrs, pool_attrs, post_affine
from vkocr.engine.kernels.cast import record_cast
from vkocr.engine.kernels.conv import Conv2d
from vkocr.engine.kernels.conv_transpose import record_conv_transpose2d
from vkocr.engine.kernels.depthwise import DepthwiseConv2d, record_conv2d_depthwise
from vkocr.engine.kernels.elementwise import record_binary, record_unary
from vkocr.engine.kernels.layout import record_concat, record_copy, record_slice, record_transpose
from vkocr.engine.kernels.matmul import record_gemm, record_matmul
from vkocr.engine.kernels.pool import record_average_pool2d, record_global_average_pool, record_max_pool2d
from vkocr.engine.kernels.reduce import record_layer_norm, record_reduce_mean, record_softmax
from vkocr.engine.kernels.resize import record_resize
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

FLOAT32 = np.dtype(np.float32)
ONNX_FLOAT = 1  # TensorProto.FLOAT: the only Cast target a plan runs (as a view)
STORAGE_CAST = "StorageCast"  # fp32 ↔ fp16 where a plan's precisions meet (vk/graph/precision.py)


@dataclass(frozen=True)
class NodeConstants:
    """What a node reads besides its device tensors: the host value of each constant input (None for runtime
    values and absent inputs), and the device constants derived from its parameters, by short name."""

    values: Sequence[np.ndarray | None]
    derived: Mapping[str, Tensor] = field(default_factory=dict)


Values = Sequence[np.ndarray | None]
Record = Callable[[Recorder, Node, list[Tensor | None], list[Tensor], NodeConstants], None]
Emit = Callable[[Recorder, list[Tensor | None], list[Tensor]], None]  # one node's recording, for any input shape
# a rule's once-per-node work, from the node's constant device tensors (None where an input is a runtime value);
# None: the node needs its input shapes for that, so it records from scratch every time
Prepare = Callable[[Node, list[Tensor | None], NodeConstants], Emit | None]
HostInputs = Callable[[Node, Values], frozenset[int]]
Derive = Callable[[Node, Values], dict[str, np.ndarray]]


def no_host_inputs(node: Node, values: Values) -> frozenset[int]:
    return frozenset()


def all_but_first(node: Node, values: Values) -> frozenset[int]:
    return frozenset(range(1, len(node.inputs)))


@dataclass(frozen=True)
class Rule:
    record: Record
    host_inputs: HostInputs = no_host_inputs
    derive: Derive | None = None
    prepare: Prepare | None = None


RULES: dict[str, Rule] = {}


def lowers(*ops: str, host_inputs: HostInputs = no_host_inputs, derive: Derive | None = None,
           prepare: Prepare | None = None) -> Callable[[Record], Record]:
    """Register `record` as the lowering of these op types."""

    def register(record: Record) -> Record:
        for name in ops:
            RULES[name] = Rule(record, host_inputs, derive, prepare)
        return record

    return register


# -- what a node needs -----------------------------------------------------------------------------------------


def fail(node: Node, reason: str) -> LoweringError:
    return LoweringError(f"node {node.name} ({node.op}): {reason}")


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


# -- helpers ------------------------------------------------------------------------------------------------------


def operand(node: Node, ins: list[Tensor | None], i: int) -> Tensor:
    t = ins[i] if i < len(ins) else None
    if t is None:
        raise fail(node, f"input {i} must be a device tensor")
    return t


def optional(ins: list[Tensor | None], i: int) -> Tensor | None:
    return ins[i] if i < len(ins) else None


def reshaped(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """The same bytes with another (equal-size) shape: free, no copy."""
    if math.prod(shape) != t.numel:
        raise KernelArgumentError(f"cannot view {t.shape} as {shape}")
    return Tensor(t.alloc, shape, t.dtype)


def activation(node: Node) -> tuple[str, float, float]:
    """The activation a pass fused into this node: (kind, alpha, beta)."""
    a = node.attrs
    return str(a.get("activation", "none")), float(a.get("act_alpha", 0.0)), float(a.get("act_beta", 0.0))


def scalar(value: np.ndarray | None) -> float | None:
    """The number in a one-element constant (float or integer), else None."""
    if value is None or np.size(value) != 1 or np.asarray(value).dtype.kind not in "fiu":
        return None
    return float(np.asarray(value).reshape(-1)[0])


# -- convolution and pooling -----------------------------------------------------------------------------------


def conv_kernel(node: Node, w: Tensor, has_bias: bool, x_shape: Sequence[int] | None) -> Conv2d | DepthwiseConv2d:
    """The kernel of a Conv node with weights `w`: the depthwise one where each channel is its own group. Pads
    come from the attributes (`x_shape` resolves auto_pad SAME; None where it is not SAME)."""
    attrs = conv_attrs(node, x_shape, w.shape[2:])
    kind, alpha, beta = activation(node)
    post = post_affine(node)
    group = attrs["group"]
    if len(w.shape) == 4 and w.shape[1] == 1 and w.shape[0] == group:  # Cin = group · 1 = Cout
        return DepthwiseConv2d(w.shape, has_bias=has_bias, strides=attrs["strides"], pads=attrs["pads"],
                               dilations=attrs["dilations"], activation=kind, alpha=alpha, beta=beta,
                               post_affine=post)
    return Conv2d(w.shape, has_bias=has_bias, **attrs, activation=kind, alpha=alpha, beta=beta, post_affine=post)


def _prepare_conv(node: Node, static: list[Tensor | None], consts: NodeConstants) -> Emit | None:
    w = static[1] if len(static) > 1 else None
    if w is None or node.attrs.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        return None  # weights computed at runtime, or pads that follow the input shape
    kernel = conv_kernel(node, w, optional(static, 2) is not None, None)
    residual = has_residual(node)

    def emit(rec: Recorder, ins: list[Tensor | None], outs: list[Tensor]) -> None:
        r = operand(node, ins, 3) if residual else None
        kernel.record(rec, operand(node, ins, 0), operand(node, ins, 1), outs[0], optional(ins, 2), residual=r)

    return emit


def has_residual(node: Node) -> bool:
    """A Conv that passes.fuse_residual gave a fourth input: added to its output in the epilogue."""
    return len(node.inputs) > 3 and bool(node.inputs[3])


@lowers("Conv", prepare=_prepare_conv)
def _conv(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    x, w, b = operand(node, ins, 0), operand(node, ins, 1), optional(ins, 2)
    r = operand(node, ins, 3) if has_residual(node) else None
    conv_kernel(node, w, b is not None, x.shape).record(rec, x, w, outs[0], b, residual=r)


@lowers("ConvTranspose")
def _conv_transpose(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                    consts: NodeConstants) -> None:
    if "output_shape" in node.attrs:
        raise fail(node, "ConvTranspose output_shape is not supported")
    kind, alpha, beta = activation(node)
    record_conv_transpose2d(rec, operand(node, ins, 0), operand(node, ins, 1), outs[0], optional(ins, 2),
                            **conv_transpose_attrs(node), activation=kind, alpha=alpha, beta=beta)


def _batchnorm_affine(node: Node, values: Values) -> dict[str, np.ndarray]:
    """y = x * scale + shift per channel, from (gamma, beta, mean, var), computed in float64."""
    gamma, beta, mean, var = (np.asarray(v, np.float64).reshape(-1) for v in values[1:5])
    scale = gamma / np.sqrt(var + float(node.attrs.get("epsilon", 1e-5)))
    return {"scale": scale.reshape(-1, 1, 1, 1), "shift": beta - mean * scale}


@lowers("BatchNormalization", host_inputs=all_but_first, derive=_batchnorm_affine)
def _batchnorm(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
               consts: NodeConstants) -> None:
    """A BatchNormalization no conv absorbed: a 1×1 depthwise conv (scale as weight, shift as bias), one
    dispatch. Inputs other than NCHW are seen as (N, C, 1, rest), which keeps the long axis on the grid's x."""
    x = operand(node, ins, 0)
    if len(x.shape) < 2:
        raise fail(node, f"input of rank {len(x.shape)}: BatchNormalization needs (N, C, ...)")
    planes = x.shape if len(x.shape) == 4 else (x.shape[0], x.shape[1], 1, math.prod(x.shape[2:]))
    record_conv2d_depthwise(rec, reshaped(x, planes), consts.derived["scale"], reshaped(outs[0], planes),
                            consts.derived["shift"])


@lowers("MaxPool")
def _max_pool(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
              consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    record_max_pool2d(rec, x, outs[0], **pool_attrs(node, x.shape))


@lowers("AveragePool")
def _average_pool(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                  consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    record_average_pool2d(rec, x, outs[0], **pool_attrs(node, x.shape),
                          count_include_pad=bool(node.attrs.get("count_include_pad", 0)))


@lowers("GlobalAveragePool")
def _global_average_pool(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                         consts: NodeConstants) -> None:
    record_global_average_pool(rec, operand(node, ins, 0), outs[0])


# -- elementwise -------------------------------------------------------------------------------------------------


@lowers("Add", "Sub", "Mul", "Div", "GatedAdd")
def _binary(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    op = "gated_add" if node.op == "GatedAdd" else node.op.lower()  # x + x·s, one pass (passes.fuse_gate)
    record_binary(rec, op, operand(node, ins, 0), operand(node, ins, 1), outs[0])


def _squaring(node: Node, values: Values) -> frozenset[int]:
    """Pow by a constant 2 is x * x: GLSL pow() is undefined for negative bases, and variance needs them."""
    return frozenset({1}) if len(values) > 1 and scalar(values[1]) == 2.0 else frozenset()


@lowers("Pow", host_inputs=_squaring)
def _pow(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    if scalar(consts.values[1]) == 2.0 and tuple(outs[0].shape) == tuple(x.shape):
        record_binary(rec, "mul", x, x, outs[0])
    else:  # positive bases only (GLSL pow)
        record_binary(rec, "pow", x, operand(node, ins, 1), outs[0])


def _clip_limits(node: Node, values: Values) -> frozenset[int]:
    return frozenset({1, 2}) if node.op == "Clip" else frozenset()


@lowers(*UNARY_OP_TYPES, host_inputs=_clip_limits)
def _unary(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    name, alpha, beta = unary_params(node, consts.values)
    record_unary(rec, name, operand(node, ins, 0), outs[0], alpha, beta)


# -- views and layout ---------------------------------------------------------------------------------------------


@lowers(*VIEW_OPS, "View", "Cast", host_inputs=all_but_first)
def _view(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    """Nothing to do when the plan aliased the output to the input (it always does); a copy otherwise."""
    x = operand(node, ins, 0)
    if outs[0].view != x.view:
        record_copy(rec, x, outs[0])


@lowers(STORAGE_CAST)
def _storage_cast(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                  consts: NodeConstants) -> None:
    record_cast(rec, operand(node, ins, 0), outs[0])


@lowers("Concat")
def _concat(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    parts = [operand(node, ins, i) for i in range(len(ins))]
    record_concat(rec, parts, outs[0], int(node.attrs["axis"]))


@lowers("Slice", host_inputs=all_but_first)
def _slice(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    record_slice(rec, operand(node, ins, 0), outs[0], *slice_args(node, consts.values))


@lowers("Transpose")
def _transpose(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
               consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    record_transpose(rec, x, outs[0], transpose_perm(node, len(x.shape)))


@lowers("Resize", host_inputs=all_but_first)
def _resize(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    _, scales = resize_args(node, x.shape, consts.values)
    if scales is not None and (len(scales) != 4 or scales[0] != 1.0 or scales[1] != 1.0):
        raise fail(node, f"Resize scales {scales}: only H and W of NCHW are resized")
    record_resize(rec, x, outs[0], scales=None if scales is None else scales[2:], **resize_modes(node))


# -- matrix products and normalisation ---------------------------------------------------------------------------


@lowers("MatMul")
def _matmul(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    """A 2-D right operand (weights): one GEMM over all rows of a, bias and activation in its epilogue.
    Otherwise a batched matmul, then the bias add and the activation as their own passes."""
    a, b, bias, out = operand(node, ins, 0), operand(node, ins, 1), optional(ins, 2), outs[0]
    kind, alpha, beta = activation(node)
    if len(b.shape) == 2 and len(a.shape) >= 2:
        rows = math.prod(a.shape[:-1])
        record_gemm(rec, reshaped(a, (rows, a.shape[-1])), b, reshaped(out, (rows, b.shape[1])), bias,
                    activation=kind, act_alpha=alpha, act_beta=beta)
        return
    record_matmul(rec, a, b, out)
    if bias is not None:  # in place: each invocation reads and writes the same element
        record_binary(rec, "add", out, bias, out)
    if kind != "none":
        record_unary(rec, kind, out, out, alpha, beta)


@lowers("Softmax")
def _softmax(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    record_softmax(rec, x, outs[0], softmax_axis(node, len(x.shape)))


@lowers("ReduceMean")
def _reduce_mean(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                 consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    record_reduce_mean(rec, x, outs[0], reduce_axes(node, len(x.shape)), bool(node.attrs.get("keepdims", 1)))


@lowers("LayerNorm")
def _layer_norm(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
                consts: NodeConstants) -> None:
    record_layer_norm(rec, operand(node, ins, 0), operand(node, ins, 1), outs[0], optional(ins, 2),
                      axis=int(node.attrs.get("axis", -1)), epsilon=float(node.attrs.get("epsilon", 1e-5)))
