"""1×1 convolutions on cooperative matrices, both operands staged in shared memory sixteen bytes per load
(shaders/pointwise_staged.comp): which convolutions it takes, with which tile, and the launch; and which products
by 2-D weights (ONNX Gemm, MatMul: vk/kernels/matmul.py records them) it takes, as 1×1 convolutions of a 1 × N map.

conv2d_coopmat.comp stages its tiles one element per load and store, converting each through fp32, and on the
H100 ran rec 16's 1×1 convolutions at 22-30 TFLOP/s, a few percent of the matrix units' rate, as did the
fragment kernel (pointwise_coopmat.comp), which loads its fragments straight from memory. A 1×1 convolution's
operands need no im2col, so this kernel copies them 16 bytes at a time: in fp16 storage eight halves as they lie
(a sixteenth of the other's load and store instructions per step at rec's tiles), in fp32 four floats split into
hi + lo halves as conv2d_coopmat.comp's SPLIT splits them. `Conv2d.record` asks `auto_staged_tile()` first for
every pointwise convolution (a StagedTile as its `coopmat_tile` forces one: tests, sweeps).

On an H100 (scripts/sweep_conv_tiles.py --pointwise, session 37) its fp16 SQUARE tile ran every 1×1 convolution
of det and rec 16 at least 192 deep 1.25-2.4× faster than the kernel chosen before (rec 16's 384 -> 768 at 3×80:
76.4 -> 31.9 µs; det's 768 -> 384 at 23×32: 23.5 -> 15.9), shallower ones 0.45× (48 deep) to 1.4×; in fp32 its
TALL tile 16 deep ran those at least 192 deep 1.1-1.3× faster (rec 16's 768 -> 384: 87.0 -> 75.6 µs) but for the
deep ones on small maps that conv2d_coopmat.comp's TALL tile takes (det's 768 -> 384 at 23×32: 39.0 against 29.0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vkocr.engine.coopmat import switched_off
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv_coopmat import WIDE as CONV_WIDE
from vkocr.engine.kernels.conv_coopmat import CoopmatTile, enough_groups
from vkocr.engine.kernels.launch import check_groups, conv2d_push, conv2d_push_parts, subgroup_threads
from vkocr.engine.memory import BufferView
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder

POINTWISE_STAGED = KernelDef("pointwise_staged", ("r", "r", "r", "w", "r"), 76)  # x, w, bias, out, residual
K_STEP = 8  # K's multiple: a weights row starts on 16 bytes, and a load's k are in range together


@dataclass(frozen=True)
class StagedTile(CoopmatTile):
    """conv2d_coopmat.comp's tile (sg_m × sg_n subgroups of fm × fn accumulators, ksteps·TK deep per step) for
    pointwise_staged.comp, whose shared tiles take the bytes conv2d_coopmat.comp's take (hi and lo in fp32)."""


# 8 subgroups, 64 × 128 outputs, 32 deep per step: conv2d_coopmat.comp's WIDE
WIDE = StagedTile(sg_m=2, sg_n=4, fm=2, fn=2, ksteps=2)
# Unasked: 4 subgroups, 64 × 64 outputs, 32 deep, in fp16 storage; 8 subgroups, 128 × 64, 16 deep (fp32's hi and lo
# tiles), in fp32 storage; for convolutions at least STAGED_MIN_K deep (the H100 figures above)
SQUARE = StagedTile(sg_m=2, sg_n=2, fm=2, fn=2, ksteps=2)
TALL_16 = StagedTile(sg_m=4, sg_n=2, fm=2, fn=2, ksteps=1)
# From 192 deep. At 96 deep the sweep's isolated timings favoured it (in fp16 SQUARE ran det's 96 -> 48 at
# 184×256 in 18.5 µs against the fragment kernel's 24.4, in fp32 TALL_16 det's 96 -> 192 at 92×128 in 24.4 against
# the SIMT kernel's 30.1: benchmarks/2026-12-07-h100-sweep-staged-session37.json), but in the models it did not:
# det in fp32 took 36 µs more with them there, rec 16 45, and in fp16 det and rec 16 changed by no more than the
# noise (benchmarks/2026-12-07-h100-models-k96-session38.json).
STAGED_MIN_K = 192
# ONNX Gemm and MatMul by 2-D weights (vk/kernels/matmul.py) at least this many output columns wide, in fp16
# storage: the recognisers' CTC heads and SVTR's projections. PP-OCRv6's 120 -> 18 710 classes at rec 16 ran in
# 0.106 ms against gemm.comp's 0.134 on an H100; in fp32 in 0.136 against 0.128, so fp32 stays there
# (scripts/check_coopmat.py, session 38). Its eight 120- to 360-wide products took 4-10 µs less each in the model,
# at one line (40 rows) as at 16 (640): rec 16 in fp16 1.777 -> 1.728 ms, one line 0.885 -> 0.843 (scripts/
# ab_models.py, benchmarks/2026-12-07-h100-ab-session41.json).
GEMM_MIN_N = 96


def staged_tile(device: object, precision: str, m: int, k: int, *, pointwise: bool, tile: StagedTile | None = None
                ) -> tuple[tuple[int, int, int], StagedTile]:
    """(TM, TN, TK) and the tile that a 1×1 convolution of M = Cout/group rows and K = Cin/group runs on in
    `precision` storage; KernelArgumentError where it cannot: not pointwise, a device without matrices (or
    VKOCR_COOPMAT=0), K or the matrices' TN and TK not multiples of 8, or a tile past the device's shared
    memory."""
    shape: tuple[int, int, int] | None = getattr(device, "coopmat_shape", None)
    chosen = tile or WIDE
    why = ("not a 1×1 convolution of stride 1 without padding" if not pointwise
           else f"no {precision} storage" if precision not in ("fp16", "fp32")
           else "no cooperative matrix" if shape is None or switched_off()
           else f"K = {k} is not a multiple of {K_STEP}" if k % K_STEP
           else f"the matrices' shape {shape} is not in steps of {K_STEP}"
           if shape[1] % K_STEP or shape[2] % K_STEP else "")
    info = getattr(device, "info", None)
    needs = chosen.shared_bytes(shape, split=precision == "fp32") if shape is not None else 0
    if not why and info is not None and needs > info.max_shared_memory_bytes:
        why = f"the tile needs {needs} B of shared memory, the device has {info.max_shared_memory_bytes}"
    if why or shape is None:
        raise KernelArgumentError(f"pointwise_staged cannot take M {m}, K {k}: {why}")
    return shape, chosen


def auto_staged_tile(device: object, precision: str, m: int, k: int, n: Any, batches: Any
                     ) -> tuple[tuple[int, int, int], StagedTile] | None:
    """What `Conv2d.record` runs a 1×1 convolution (M = Cout/group, K = Cin/group, N output pixels × `batches`;
    N may be symbolic: the comparison guards the shape class) on unasked: SQUARE in fp16 storage and TALL_16 in
    fp32 where K ≥ STAGED_MIN_K and staged_tile() takes it, in fp32 not where conv2d_coopmat.comp would take
    the GEMM with its TALL tile (too few workgroups of WIDE); None for the other kernels."""
    if k < STAGED_MIN_K or precision not in ("fp16", "fp32"):
        return None
    tile = SQUARE if precision == "fp16" else TALL_16
    try:
        shape, tile = staged_tile(device, precision, m, k, pointwise=True, tile=tile)
    except KernelArgumentError:
        return None
    if precision == "fp32" and not enough_groups(CONV_WIDE, shape, m, n, batches):
        return None
    return shape, tile


def auto_gemm_tile(device: object, precision: str, n: int, k: int) -> tuple[tuple[int, int, int], StagedTile] | None:
    """The tile an ONNX Gemm (no transposes, alpha = beta = 1, C absent or one per column) or a MatMul by 2-D
    weights of N output columns and depth K runs on unasked (SQUARE, in fp16 storage), or None for gemm.comp:
    fp32 storage, N below GEMM_MIN_N or what staged_tile() refuses. N and K come from the weights (the rows,
    which may be symbolic, decide nothing)."""
    if n < GEMM_MIN_N or precision != "fp16":
        return None
    try:
        return staged_tile(device, precision, 0, k, pointwise=True, tile=SQUARE)
    except KernelArgumentError:
        return None


def gemm_push(m: Any, n: int, k: int, has_bias: bool, act: int, act_alpha: float, act_beta: float) -> bytes:
    """conv2d's push constants for the GEMM (M × K) · (K × N) as a 1×1 convolution of one image: K input
    channels, M output channels, a 1 × N map (M may be symbolic)."""
    parts = conv2d_push_parts(1, k, m, (1, 1), (1, 1), (0, 0), has_bias, act, act_alpha, act_beta, 1.0, 0.0)
    return conv2d_push(parts, 1, n, 1, n)


def record_pointwise_staged(rec: Recorder, kernel: KernelDef, mnk: tuple[int, int, int], tile: StagedTile,
                            push: bytes, views: Sequence[BufferView], m: int, n: Any, batches: Any, *,
                            post_affine: bool, residual: bool, bias_columns: bool = False) -> None:
    """One dispatch of pointwise_staged.comp (`kernel`: POINTWISE_STAGED at the tensors' storage precision) for
    the GEMM M × N (N may be symbolic) repeated over `batches` = images · groups; `push` is conv2d's push
    constants, `views` its five bindings (x, w, bias, out, residual); `residual`: the fifth is added in the
    epilogue; `bias_columns`: the bias is one per output column (a GEMM's), not per row."""
    threads = subgroup_threads(rec, tile.sg_m * tile.sg_n, "pointwise_staged")
    groups = tile.groups(mnk, m, n, batches)
    check_groups(rec, groups, "pointwise_staged")
    constants = (threads, 1, 1, *mnk, tile.sg_m, tile.sg_n, tile.fm, tile.fn, tile.ksteps, int(post_affine),
                 int(residual), int(bias_columns))
    rec.dispatch(rec.device.pipeline(kernel, constants), views, push, groups, label="pointwise_staged")
