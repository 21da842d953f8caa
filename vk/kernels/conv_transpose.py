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


CONV_TRANSPOSE_PAIR = KernelDef("conv_transpose_pair", ("r", "r", "r", "r", "r", "w"), 16)
MAX_PAIR_MIDDLE = 64  # middle channels an invocation holds in registers (conv_transpose_pair.comp's C1)
MAX_PAIR_STAGED = 16384  # bytes of the first's weights a workgroup stages: Vulkan's least shared memory


def pair_fuses(w1_shape: Sequence[int], w2_shape: Sequence[int]) -> bool:
    """Whether conv_transpose_pair.comp takes ConvTransposes with these weights (each kernel equal to its stride,
    no padding, dilation, output padding or groups: the caller's to check): the second reads the first's channels,
    the middle ones fit an invocation's registers and the first's weights a workgroup's shared memory."""
    if len(w1_shape) != 4 or len(w2_shape) != 4 or int(w2_shape[0]) != int(w1_shape[1]):
        return False
    cin, c1, k1h, k1w = (int(s) for s in w1_shape)
    return 1 <= c1 <= MAX_PAIR_MIDDLE and cin * k1h * k1w * -(-c1 // 4) * 16 <= MAX_PAIR_STAGED


def record_conv_transpose_pair(
    rec: Recorder,
    x: Tensor,
    w1: Tensor,
    b1: Tensor | None,
    w2: Tensor,
    b2: Tensor | None,
    out: Tensor,
    *,
    activations: Sequence[tuple[str, float, float]] = (("none", 0.0, 0.0), ("none", 0.0, 0.0)),
) -> None:
    """out = act2(conv_transpose(act1(conv_transpose(x, w1) + b1), w2) + b2) for two ConvTransposes whose strides
    equal their kernels (no padding, dilation, output padding or groups), without storing the middle map:
    x (N, Cin, H, W), w1 (Cin, C1, K1H, K1W), w2 (C1, C2, K2H, K2W); every tensor float32, or every one float16
    (the middle rounded to float16 as the first would have stored it). Cin is a constant of the pipeline."""
    kernel = storage(CONV_TRANSPOSE_PAIR, x, w1, b1, w2, b2, out)
    n, channels, h, wd = require_nchw(x, "conv transpose pair input")
    cin = int(w1.shape[0])  # the weights' (a constant of the pipeline), never the input's (traced with shapes)
    if not pair_fuses(w1.shape, w2.shape) or channels != cin:
        raise KernelArgumentError(f"conv transpose pair: input {tuple(x.shape)}, weights {tuple(w1.shape)} and "
                                  f"{tuple(w2.shape)} do not chain (Cin, C1, k, k) → (C1, C2, k, k) with "
                                  f"C1 ≤ {MAX_PAIR_MIDDLE} and the first's weights in {MAX_PAIR_STAGED} bytes as vec4s")
    c1, k1h, k1w = (int(s) for s in w1.shape[1:])
    c2, k2h, k2w = (int(s) for s in w2.shape[1:])
    for b, c, which in ((b1, c1, "first"), (b2, c2, "second")):
        if b is not None:
            require_shape(b, (c,), f"conv transpose pair: the {which} bias")
    require_shape(out, (n, c2, h * k1h * k2h, wd * k1w * k2w), "conv transpose pair output")
    (act1, alpha1, beta1), (act2, alpha2, beta2) = activations
    constants = (FLAT_LOCAL, 1, 1, k1h, k1w, k2h, k2w, c1, int(b1 is not None), activation_id(act1), float(alpha1),
                 float(beta1), int(b2 is not None), activation_id(act2), float(alpha2), float(beta2), cin)
    pipeline = rec.device.pipeline(kernel, constants)
    total = n * h * k1h * wd * k1w
    push = pack("IIII", total, c2, h, wd)
    views = [x.view, w1.view, (b1 if b1 is not None else w1).view, w2.view, (b2 if b2 is not None else w2).view,
             out.view]
    rec.dispatch(pipeline, views, push, flat_groups(total, FLAT_LOCAL), label="conv_transpose_pair")
