"""ONNX ConvTranspose (2-D, NCHW, groups) with bias and a fused activation: shaders/conv_transpose.comp."""

from __future__ import annotations

from collections.abc import Sequence

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import activation_id, flat_groups, pack, require_shape, storage
from vkocr.engine.kernels.spatial import four_pads, pair, require_nchw, require_positive_output
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.symbolic import dim
from vkocr.engine.tensor import Tensor

CONV_TRANSPOSE = KernelDef("conv_transpose", ("r", "r", "r", "w"), 48)
FLAT_LOCAL = 128
OUT_CHANNEL_BLOCK = 4  # output channels per invocation: each input load feeds this many accumulators


def conv_transpose_output_shape(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    *,
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    group: int = 1,
    output_padding: Sequence[int] = (0, 0),
) -> tuple[int, int, int, int]:
    """ONNX, per spatial axis: stride*(in-1) + output_padding + (k-1)*dilation + 1 - pad_begin - pad_end."""
    if len(x_shape) != 4 or len(w_shape) != 4 or 0 in x_shape or 0 in w_shape:
        raise KernelArgumentError(f"conv transpose needs non-empty NCHW input and 4-D weights, "
                                  f"got {x_shape}, {w_shape}")
    n, cin, h, wd = dim(x_shape[0]), dim(x_shape[1]), dim(x_shape[2]), dim(x_shape[3])
    cin_w, cog, kh, kw = (int(s) for s in w_shape)
    if group < 1 or cin % group != 0 or cin_w != cin:
        raise KernelArgumentError(f"conv transpose: input {tuple(x_shape)} / weights {tuple(w_shape)} "
                                  f"inconsistent with group={group} (weights are (Cin, Cout/group, kh, kw))")
    (sh, sw), (dh, dw) = pair(strides, "strides"), pair(dilations, "dilations")
    oph, opw = pair(output_padding, "output_padding", minimum=0)
    pt, pl, pb, pr = four_pads(pads)
    shape = (n, cog * group, sh * (h - 1) + oph + (kh - 1) * dh + 1 - pt - pb,
             sw * (wd - 1) + opw + (kw - 1) * dw + 1 - pl - pr)
    require_positive_output(shape, "conv transpose")
    return shape


def record_conv_transpose2d(
    rec: Recorder,
    x: Tensor,
    w: Tensor,
    out: Tensor,
    b: Tensor | None = None,
    *,
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    group: int = 1,
    output_padding: Sequence[int] = (0, 0),
    activation: str = "none",
    alpha: float = 0.0,
    beta: float = 0.0,
) -> None:
    """out = act(conv_transpose(x, w) + b): x (N, Cin, H, W), w (Cin, Cout/group, kh, kw), b (Cout,); every
    tensor float32, or every one float16 (accumulating in float32)."""
    kernel = storage(CONV_TRANSPOSE, x, w, out, b)
    n, cin, h, wd = require_nchw(x, "conv transpose input")
    out_shape = conv_transpose_output_shape(x.shape, w.shape, strides=strides, pads=pads, dilations=dilations,
                                            group=group, output_padding=output_padding)
    require_shape(out, out_shape, "conv transpose output")
    cout, oh, ow = out_shape[1:]
    if b is not None:
        require_shape(b, (cout,), "conv transpose bias")
    act = activation_id(activation)
    (sh, sw), (dh, dw) = pair(strides, "strides"), pair(dilations, "dilations")
    pt, pl = four_pads(pads)[:2]
    kh, kw = int(w.shape[2]), int(w.shape[3])

    group_out = cout // group
    ocb = min(OUT_CHANNEL_BLOCK, group_out)
    blocks_per_group = -(-group_out // ocb)
    constants = (FLAT_LOCAL, 1, 1, kh, kw, sh, sw, dh, dw, ocb, int(b is not None), act,
                 float(alpha), float(beta))
    pipeline = rec.device.pipeline(kernel, constants)
    total = n * group * blocks_per_group * oh * ow
    push = pack("IIIiiiiIIIii", total, cin, cout, h, wd, oh, ow, cin // group, group_out, blocks_per_group,
                pt, pl)
    bias_view = (b if b is not None else w).view
    rec.dispatch(pipeline, [x.view, w.view, bias_view, out.view], push, flat_groups(total, FLAT_LOCAL),
                 label="conv_transpose")
