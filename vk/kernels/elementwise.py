"""Binary elementwise ops with ONNX broadcasting, and unary ops: shaders/binary.comp, shaders/unary.comp."""

from __future__ import annotations

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import (
    ACTIVATION_IDS,
    FLAT_LOCAL,
    broadcast_shape,
    flat_groups,
    pack,
    padded,
    require_shape,
    storage,
)
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

BINARY = KernelDef("binary", ("r", "r", "w"), 80)
BINARY_VEC4 = KernelDef("binary_vec4", ("r", "r", "w"), 4)
UNARY = KernelDef("unary", ("r", "w"), 4)
BINARY_IDS = {"add": 0, "sub": 1, "mul": 2, "div": 3, "pow": 4, "gated_add": 5}  # gated_add: a + a·b
UNARY_IDS = {**ACTIVATION_IDS, "sqrt": 16, "exp": 17, "tanh": 18, "neg": 19, "abs": 20, "reciprocal": 21,
             "erf": 22}
MAX_RANK = 6


def broadcast_strides(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[list[int], list[int], list[int]]:
    """Output shape and element strides of a and b (0 where broadcast), with adjacent axes merged.

    Merging keeps the rank (and the index arithmetic in the shader) small: (8,1,5,6)+(8,4,5,6) becomes
    (8,4,30) with strides (30,0,1) and (120,30,1).
    """
    try:
        out = list(broadcast_shape(a, b))
    except ValueError as exc:
        raise KernelArgumentError(f"shapes {a} and {b} do not broadcast") from exc
    rank = len(out)
    dims_a = [1] * (rank - len(a)) + list(a)
    dims_b = [1] * (rank - len(b)) + list(b)

    def contiguous(dims: list[int]) -> list[int]:
        strides, acc = [0] * rank, 1
        for d in range(rank - 1, -1, -1):
            strides[d] = acc if dims[d] != 1 or out[d] == 1 else 0
            acc *= dims[d]
        return strides

    sa, sb = contiguous(dims_a), contiguous(dims_b)
    shape: list[int] = []
    st_a: list[int] = []
    st_b: list[int] = []
    for d in range(rank):
        if out[d] == 1:
            continue
        # merge with the previous kept axis when both inputs stay contiguous across the boundary
        if shape and st_a[-1] == sa[d] * out[d] and st_b[-1] == sb[d] * out[d]:
            shape[-1] *= out[d]
            st_a[-1], st_b[-1] = sa[d], sb[d]
        else:
            shape.append(out[d])
            st_a.append(sa[d])
            st_b.append(sb[d])
    return shape or [1], st_a or [0], st_b or [0]


def record_binary(rec: Recorder, op: str, a: Tensor, b: Tensor, out: Tensor) -> None:
    """out = a OP b (add, sub, mul, div, pow) with numpy broadcasting; float32 or float16 storage, computed in
    float32."""
    if op not in BINARY_IDS:
        raise KernelArgumentError(f"unknown binary op {op!r}; known: {', '.join(BINARY_IDS)}")
    storage(BINARY, a, b, out)  # (both kernels: one dtype check)
    a_shape, b_shape = tuple(a.shape), tuple(b.shape)
    same = a_shape == b_shape
    try:
        expected = a_shape if same else broadcast_shape(a_shape, b_shape)
    except ValueError as exc:
        raise KernelArgumentError(f"shapes {a_shape} and {b_shape} do not broadcast") from exc
    require_shape(out, expected, f"{op} output")
    n = out.numel
    # memory-bound: 4 elements per load and store (16 bytes, 8 in float16). Counted in elements, so the vec4s
    # tile the tensors whatever the dtype; the views start at the device's storage alignment (≥ 16 bytes).
    if same and n % 4 == 0:
        pipeline = rec.device.pipeline(storage(BINARY_VEC4, a, b, out), (FLAT_LOCAL, 1, 1, BINARY_IDS[op]))
        rec.dispatch(pipeline, [a.view, b.view, out.view], pack("I", n // 4), flat_groups(n // 4), label=op)
        return
    shape, st_a, st_b = broadcast_strides(a_shape, b_shape)
    if len(shape) > MAX_RANK:
        raise KernelArgumentError(f"{op}: broadcast needs rank {len(shape)} > {MAX_RANK} after merging axes")
    pipeline = rec.device.pipeline(storage(BINARY, a, b, out), (FLAT_LOCAL, 1, 1, BINARY_IDS[op], 0 if same else 1))
    push = pack("II6I6I6I", n, len(shape), *padded(shape, 6, 1), *padded(st_a, 6), *padded(st_b, 6))
    rec.dispatch(pipeline, [a.view, b.view, out.view], push, flat_groups(n), label=op)


def record_unary(rec: Recorder, op: str, x: Tensor, out: Tensor, alpha: float = 0.0, beta: float = 0.0) -> None:
    """out = f(x); alpha/beta as in vkocr.engine.ops.activation (clip bounds, hardsigmoid slope/offset, leaky slope)."""
    if op not in UNARY_IDS:
        raise KernelArgumentError(f"unknown unary op {op!r}; known: {', '.join(UNARY_IDS)}")
    kernel = storage(UNARY, x, out)
    require_shape(out, x.shape, f"{op} output")
    pipeline = rec.device.pipeline(kernel, (FLAT_LOCAL, 1, 1, UNARY_IDS[op], float(alpha), float(beta)))
    rec.dispatch(pipeline, [x.view, out.view], pack("I", x.numel), flat_groups(x.numel), label=op)
