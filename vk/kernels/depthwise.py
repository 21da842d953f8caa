"""Depthwise 2-D convolution (group == Cin == Cout), bias, fused activation: shaders/conv2d_depthwise.comp."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import MAX_GROUPS_X, activation_id, pack, require_shape, storage
from vkocr.engine.kernels.spatial import (
    conv_out_len,
    four_pads,
    pair,
    require_group_count,
    require_nchw,
    require_positive_output,
)
from vkocr.engine.pipeline import KernelDef, dispatch_groups
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

DEPTHWISE = KernelDef("conv2d_depthwise", ("r", "r", "r", "w"), 40)


@dataclass(frozen=True)
class Tiling:
    """Outputs per invocation (rows, cols) and the workgroup shape (x: column blocks, y: row blocks, z: channel
    planes)."""

    rows: int
    cols: int
    local: tuple[int, int, int]


def choose_tiling(kernel_w: int, stride_w: int) -> Tiling:
    """Register blocking, measured on an H200 (1×128×160×160 3×3, 1×128×80×80 5×5, stride 1 and 2) and on an H100
    (det's and rec 16's maps, benchmarks/2026-12-07-h100-depthwise-session41.json):
    stride 1, kernel ≤ 3: 3 rows × 2 columns in workgroups of 16 column blocks × 1 row block × 4 planes. A
    workgroup 4 row blocks high ran rec's maps, 12, 6 and 3 rows high, mostly empty (6 rows: 8 of 16 rows in use;
    3: 3 of 16): rec 16's 3×3 at 6×80 took 17.4 µs in fp16 where this takes 8.8, at 3×80 20.6 against 8.3, and
    det's maps run as fast or faster;
    stride 1, larger kernels: 4 × 4 in 8 × 8 workgroups (more reuse of the wider window);
    stride 2: 2 × 2, as strided windows overlap less."""
    if stride_w > 1:
        return Tiling(2, 2, (16, 4, 1))
    if kernel_w <= 3:
        return Tiling(3, 2, (16, 1, 4))
    return Tiling(4, 4, (8, 8, 1))


class DepthwiseConv2d:
    """record_conv2d_depthwise in two parts: what the weights and attributes decide, checked once here, and
    `record()`, what each input shape adds (a model prepares each depthwise Conv node once)."""

    def __init__(
        self,
        w_shape: Sequence[int],
        *,
        has_bias: bool = False,
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        activation: str = "none",
        alpha: float = 0.0,
        beta: float = 0.0,
        post_affine: tuple[float, float] | None = None,
    ) -> None:
        if len(w_shape) != 4 or int(w_shape[1]) != 1:
            raise KernelArgumentError(f"depthwise conv weights must be (C, 1, kh, kw), got {tuple(w_shape)}")
        c, kh, kw = int(w_shape[0]), int(w_shape[2]), int(w_shape[3])
        if c < 1 or kh < 1 or kw < 1:
            raise KernelArgumentError(f"depthwise conv kernel must be non-empty, got {tuple(w_shape)}")
        (sh, sw), (dh, dw) = pair(strides, "strides"), pair(dilations, "dilations")
        pt, pl, pb, pr = four_pads(pads)
        act = activation_id(activation)
        self.w_shape = (c, 1, kh, kw)
        self.has_bias = has_bias
        self._window = (kh, sh, dh, pt + pb, kw, sw, dw, pl + pr)
        self._pads = (pt, pl)
        self.tiling = choose_tiling(kw, sw)
        self._local = self.tiling.local
        self._constants = (*self._local, kh, kw, sh, sw, dh, dw, self.tiling.rows, self.tiling.cols,
                           int(has_bias), act, float(alpha), float(beta), int(post_affine is not None))
        scale, shift = post_affine if post_affine is not None else (1.0, 0.0)
        self._push_tail = pack("2f", float(scale), float(shift))

    def record(self, rec: Recorder, x: Tensor, w: Tensor, out: Tensor, b: Tensor | None = None, *,
               residual: Tensor | None = None) -> None:
        """For input x (N, C, H, W). Every tensor stores float32, or every one float16 (weights and bias
        too; accumulating in float32 all the same). No residual: passes.fuse_residual leaves depthwise convs
        their own Add."""
        if residual is not None:
            raise KernelArgumentError("conv2d_depthwise adds no residual")
        kernel = storage(DEPTHWISE, x, w, out, b)
        n, c, h, wd = require_nchw(x, "depthwise conv input")
        if tuple(w.shape) != self.w_shape or c != self.w_shape[0]:
            raise KernelArgumentError(f"depthwise conv weights must be ({c}, 1, kh, kw) for {c} channels, "
                                      f"prepared for {self.w_shape}, given {tuple(w.shape)}")
        if (b is not None) != self.has_bias:
            raise KernelArgumentError(f"depthwise conv prepared with bias {self.has_bias}, given {b is not None}")
        if b is not None:
            require_shape(b, (c,), "depthwise conv bias")
        kh, sh, dh, pad_h, kw, sw, dw, pad_w = self._window
        oh, ow = conv_out_len(h, kh, sh, dh, pad_h), conv_out_len(wd, kw, sw, dw, pad_w)
        out_shape = (n, c, oh, ow)
        require_positive_output(out_shape, "depthwise conv")
        require_shape(out, out_shape, "depthwise conv output")
        tiling = self.tiling
        groups = dispatch_groups((-(-ow // tiling.cols), -(-oh // tiling.rows), n * c), self._local)
        # each axis on its own: max() would compare symbolic counts with each other
        if groups[0] > MAX_GROUPS_X or groups[1] > MAX_GROUPS_X or groups[2] > MAX_GROUPS_X:
            require_group_count(max(groups), "depthwise conv")
        pipeline = rec.device.pipeline(kernel, self._constants)
        push = pack("IIiiiiii", n * c, c, h, wd, oh, ow, *self._pads) + self._push_tail
        bias_view = (b if b is not None else w).view
        rec.dispatch(pipeline, [x.view, w.view, bias_view, out.view], push, groups, label="conv2d_depthwise")


def record_conv2d_depthwise(
    rec: Recorder,
    x: Tensor,
    w: Tensor,
    out: Tensor,
    b: Tensor | None = None,
    *,
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    activation: str = "none",
    alpha: float = 0.0,
    beta: float = 0.0,
    post_affine: tuple[float, float] | None = None,
) -> None:
    """out = act(depthwise_conv(x, w) + b) (· scale + shift when `post_affine` = (scale, shift), in one fma):
    x (N, C, H, W), w (C, 1, kh, kw), b (C,), pads (top, left, bottom, right)."""
    storage(DEPTHWISE, x, w, out, b)
    n, c, h, wd = require_nchw(x, "depthwise conv input")
    if len(w.shape) != 4 or tuple(w.shape[:2]) != (c, 1):
        raise KernelArgumentError(f"depthwise conv weights must be ({c}, 1, kh, kw) for {c} channels, "
                                  f"got {w.shape}")
    DepthwiseConv2d(w.shape, has_bias=b is not None, strides=strides, pads=pads, dilations=dilations,
                    activation=activation, alpha=alpha, beta=beta, post_affine=post_affine).record(rec, x, w, out, b)
