"""ONNX Conv (group 1) with few output channels, computed directly rather than as a GEMM:
shaders/conv2d_direct.comp. vk/kernels/conv.py decides when, by the rule below (DIRECT_MAX_WEIGHTS,
DIRECT_MIN_GROUPS)."""

from __future__ import annotations

from dataclasses import dataclass

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import check_groups, pack
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

CONV2D_DIRECT = KernelDef("conv2d_direct", ("r", "r", "r", "w", "r"), 56)  # x, w, bias, out, residual
CHANNELS_PER_INVOCATION = 8  # two vec4 accumulators per output column (the shader's lo and hi)
DIRECT_MAX_COUT = 64  # one workgroup covers every output channel: at most 8 blocks of 8 in z
COLUMNS_PER_INVOCATION = 2  # the shader's TW
LOCAL_XY = (16, 4)  # invocations per workgroup along output columns and rows (times the channel blocks in z)
# Unasked, the direct kernel takes a k×k convolution whose weights are this small (Cout·Cin·KH·KW elements) and
# that makes DIRECT_MIN_GROUPS workgroups. On the H100 it ran the stems of PP-OCRv6's det and rec (3 -> 24/48 at
# 3×3 stride 2, 24 -> 12 and 12 -> 24 at 2×2) 1.15-1.5× faster than the GEMM's best tile (the 3-channel ones
# 1.35-1.45× with one column per invocation: a refinement not taken). It ran deeper ones slower, up to 2.3×
# (48 -> 24 at 3×3 and at 2×2, 24 -> 48 at 2×2, 96 -> 24/48 at 3×3), and on small maps each of its few workgroups
# walked all of K alone (rec 1's 96 -> 48: 0.27 against 0.03 ms). scripts/sweep_conv_tiles.py,
# benchmarks/2026-12-05-h100-sweep-direct.json; an H200 sweep of the first version showed the same split.
DIRECT_MAX_WEIGHTS = 2048
DIRECT_MIN_GROUPS = 64
WEIGHT_BYTES = 16384  # shared memory for one chunk of input channels' weights (lavapipe allows 32 KiB in all)


@dataclass(frozen=True)
class DirectLayout:
    """What the weights' shape decides: channel blocks per workgroup, input channels per shared chunk."""

    blocks: int  # CZ: blocks of 8 output channels in one workgroup
    ci_chunk: int

    @classmethod
    def of(cls, cout: int, cin: int, taps: int) -> DirectLayout | None:
        """None where the kernel cannot take these weights: more than DIRECT_MAX_COUT output channels, or one
        input channel's weights larger than WEIGHT_BYTES (a kernel of more than 64 taps at 64 channels)."""
        blocks = -(-cout // CHANNELS_PER_INVOCATION)
        per_channel = taps * blocks * CHANNELS_PER_INVOCATION * 4  # bytes of one input channel's weights
        if cout > DIRECT_MAX_COUT or per_channel > WEIGHT_BYTES:
            return None
        return cls(blocks, min(cin, WEIGHT_BYTES // per_channel))


def direct_groups(n: int, oh: int, ow: int) -> tuple[int, int, int]:
    """Workgroups for N images of an Hout × Wout output (every output channel in each)."""
    lx, ly = LOCAL_XY
    return -(-ow // (lx * COLUMNS_PER_INVOCATION)), -(-oh // ly), n


def record_conv2d_direct(rec: Recorder, kernel: KernelDef, layout: DirectLayout, window: tuple[int, ...],
                         post_affine: bool, x: Tensor, w: Tensor, out: Tensor, b: Tensor | None,
                         residual: Tensor | None, epilogue: bytes) -> None:
    """One dispatch: `kernel` is CONV2D_DIRECT at the tensors' storage precision; window = (kh, kw, sh, sw, dh,
    dw, pad_top, pad_left); `epilogue`: the packed (has_bias, act, act_alpha, act_beta, post_scale, post_shift).
    The caller (vk/kernels/conv.py) has checked every shape."""
    kh, kw, sh, sw, dh, dw, pad_top, pad_left = window
    n, cin, h, wd = x.shape
    _, cout, oh, ow = out.shape
    lx, ly = LOCAL_XY
    groups = direct_groups(n, oh, ow)
    check_groups(rec, groups, "conv2d_direct")
    if lx * ly * layout.blocks > rec.device.info.max_workgroup_invocations:
        raise KernelArgumentError(f"conv2d_direct: a workgroup of {lx}×{ly}×{layout.blocks} invocations, device "
                                  f"allows {rec.device.info.max_workgroup_invocations}")
    constants = (lx, ly, layout.blocks, kh, kw, sh, sw, dh, dw, COLUMNS_PER_INVOCATION, layout.ci_chunk,
                 int(post_affine), int(residual is not None))
    pipeline = rec.device.pipeline(kernel, constants)
    push = pack("8I", cin, cout, h, wd, oh, ow, pad_top, pad_left) + epilogue
    views = [x.view, w.view, (b if b is not None else w).view, out.view,
             (residual if residual is not None else w).view]
    rec.dispatch(pipeline, views, push, groups, label="conv2d_direct")
