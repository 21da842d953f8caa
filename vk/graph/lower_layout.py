"""Lowering rules of views and layout: the views (which record nothing: the plan aliases their output to
their input), the fp32 ↔ fp16 storage cast, Concat, Slice, Transpose and Resize.
"""

from __future__ import annotations

from vkocr.engine.graph.ir import Node
from vkocr.engine.graph.lower_registry import (
    STORAGE_CAST,
    NodeConstants,
    Values,
    all_but_first,
    fail,
    lowers,
    operand,
)
from vkocr.engine.graph.opset_layout import VIEW_OPS, resize_args, resize_modes, slice_args, transpose_perm
from vkocr.engine.kernels.cast import record_cast
from vkocr.engine.kernels.layout import record_concat, record_copy, record_slice, record_transpose
from vkocr.engine.kernels.resize import record_resize
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor


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
    pool = node.attrs.get("pool_first")  # map_fusion.fuse_pool_concat's
    pooled = None if pool is None else (*pool["kernel_shape"], *pool["pads"][:2])
    record_concat(rec, parts, outs[0], int(node.attrs["axis"]), pool_first=pooled,
                  upsample=node.attrs.get("upsample"))  # map_fusion.fuse_upsample_concat's


@lowers("Slice", host_inputs=all_but_first)
def _slice(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    record_slice(rec, operand(node, ins, 0), outs[0], *slice_args(node, consts.values))


@lowers("Transpose")
def _transpose(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor],
               consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    record_transpose(rec, x, outs[0], transpose_perm(node, len(x.shape)))


def resize_host_inputs(node: Node, values: Values) -> frozenset[int]:
    """roi, scales and sizes; a fifth input (passes.fuse_resize_add's addend) lives on the device."""
    return frozenset(range(1, min(len(node.inputs), 4)))


@lowers("Resize", host_inputs=resize_host_inputs)
def _resize(rec: Recorder, node: Node, ins: list[Tensor | None], outs: list[Tensor], consts: NodeConstants) -> None:
    x = operand(node, ins, 0)
    addend = operand(node, ins, 4) if len(ins) > 4 else None
    _, scales = resize_args(node, x.shape, consts.values)
    if scales is not None and (len(scales) != 4 or scales[0] != 1.0 or scales[1] != 1.0):
        raise fail(node, f"Resize scales {scales}: only H and W of NCHW are resized")
    record_resize(rec, x, outs[0], scales=None if scales is None else scales[2:], addend=addend,
                  **resize_modes(node))
