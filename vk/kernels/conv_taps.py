"""k×k convolutions of few output channels on cooperative matrices, one tap at a time
(shaders/conv2d_taps.comp): which convolutions take them, with which tile, and the launch.

The GEMM is output pixels × output channels. A workgroup stages a window of the input (every channel of a chunk,
laid out channel fastest) in shared memory once; each of the KH·KW taps then reads its pixels × channels matrix
from that window at a fixed stride. So every staged value serves every tap, where conv2d_coopmat.comp's im2col
fetches it KH·KW times and locates each element by arithmetic. fp32 storage runs as hi + lo fp16 pairs, like
conv2d_coopmat.comp.

`Conv2d.record` (vk/kernels/conv.py) asks `choose_taps_tile()`; a tile means it records this kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vkocr.engine.coopmat import switched_off
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import check_groups, pack, subgroup_threads
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

CONV2D_TAPS = KernelDef("conv2d_taps", ("r", "r", "r", "w", "r"), 56)  # x, w, bias, out, residual
MAX_COUT = 64  # every output channel in one workgroup
MAX_ACCUMULATED = 12 * 16 * 16  # fp32 accumulator elements per subgroup (SPLIT's lo ones counted): 96 registers
# per invocation on NVIDIA (twelve 16 × 16 matrices); rec's 2×2 24 -> 48 ran fastest with all twelve on the H200
# (fp32, 8 rows × 2 column blocks × 3 channel blocks: 0.037 ms against 0.048 for conv2d.comp)
MIN_CIN = 8  # below this the chunk of TK channels is mostly zeros (a 3-channel stem: conv2d_direct.comp)
AUTO_PRECISIONS = ("fp16", "fp32")
# (rows, fp), the widest that fits first: the most reuse of the window. Unasked only the 8-row tiles: on the H200
# (scripts/sweep_conv_tiles.py --kxk, benchmarks/2026-12-06-h200-sweep-taps-session28.json) they beat conv2d.comp
# wherever they fit (det's 3×3 96 -> 24 head: 0.124 against 0.170 ms in fp32, 0.077 in fp16), the 4- and 2-row
# ones lost to it.
TILE_SHAPES = ((8, 2), (8, 1), (4, 2), (4, 1), (2, 1))
AUTO_ROWS = 8
# Unasked, only a launch of this many workgroups (Conv2d.record checks, per input shape): on an H100 rec's 2×2
# convolutions at batch 1 made 15 and ran slower than conv2d.comp (0.025 against 0.014 ms), at batch 16 they
# made 240 and det's head 184, both faster (benchmarks/2026-12-06-h100-models-taps-schedule-session28.json).
AUTO_MIN_GROUPS = 128


@dataclass(frozen=True)
class TapsTile:
    """`rows` subgroups, one output row each, with fp blocks of TM output columns and fn blocks of TN output
    channels."""

    rows: int
    fp: int
    fn: int

    def shared_bytes(self, mnk: tuple[int, int, int], window: tuple[int, ...], split: bool) -> int:
        """What conv2d_taps.comp declares for window = (kh, kw, sh, sw, dh, dw): the input window and the chunk's
        weights in fp16 (twice with `split`), one fp32 TM × TN staging matrix per subgroup."""
        tm, tn, tk = mnk
        kh, kw, sh, sw, dh, dw = window
        rows_in = (self.rows - 1) * sh + (kh - 1) * dh + 1
        cols_in = (self.fp * tm - 1) * sw + (kw - 1) * dw + 1
        parts = 2 if split else 1
        return 2 * parts * (rows_in * cols_in * tk + kh * kw * tk * self.fn * tn) + 4 * self.rows * tm * tn

    def groups(self, mnk: tuple[int, int, int], n: int, oh: int, ow: int) -> tuple[int, int, int]:
        """Workgroups for N images of an Hout × Wout output (sizes may be symbolic)."""
        return -(-ow // (self.fp * mnk[0])), -(-oh // self.rows), n


def choose_taps_tile(device: object, precision: str, cout: int, cin: int, window: tuple[int, ...], *,
                     want: bool | None = None) -> TapsTile | None:
    """The tile a convolution of group 1 with `cout` output and `cin` input channels and window = (kh, kw, sh, sw,
    dh, dw) runs with on this kernel, or None for another kernel. `want`: None decides (the device has matrices
    and VKOCR_COOPMAT is not 0, the storage precision is one of AUTO_PRECISIONS, a k×k kernel, MIN_CIN ≤ cin and
    cout ≤ MAX_COUT, and a tile of AUTO_ROWS rows fits), False never, True wherever the kernel can take it
    (KernelArgumentError where it cannot). Every argument comes from the weights: never symbolic."""
    if want is False:
        return None
    mnk: tuple[int, int, int] | None = getattr(device, "coopmat_shape", None)

    def refuse(why: str) -> None:
        if want:
            raise KernelArgumentError(f"conv2d_taps: {why}")

    if switched_off():
        refuse("cooperative matrices are switched off (VKOCR_COOPMAT=0)")
        return None
    if mnk is None:
        refuse(f"the device has no cooperative matrix ({getattr(device, 'coopmat_why_not', '') or 'none listed'})")
        return None
    if want is None and (precision not in AUTO_PRECISIONS or window[0] * window[1] == 1 or cin < MIN_CIN):
        return None
    tm, tn, tk = mnk
    if tk % 8:
        refuse(f"the matrices' K of {tk} is not a multiple of 8: the input window is staged 8 halves at a time")
        return None
    fn = -(-cout // tn)
    if fn * tn > MAX_COUT:
        refuse(f"{cout} output channels, the kernel holds at most {MAX_COUT} in a workgroup")
        return None
    split = precision == "fp32"
    info = getattr(device, "info", None)
    limit = getattr(info, "max_shared_memory_bytes", 32768)
    threads = getattr(info, "max_workgroup_invocations", 1024) // getattr(info, "subgroup_size", 32)
    for rows, fp in TILE_SHAPES:
        tile = TapsTile(rows, fp, fn)
        if (rows <= threads and fp * fn * tm * tn * (2 if split else 1) <= MAX_ACCUMULATED
                and tile.shared_bytes(mnk, window, split) <= limit):
            return tile if want or rows == AUTO_ROWS else None
    refuse(f"no tile of {fn} channel blocks fits {MAX_ACCUMULATED} accumulated elements and {limit} B of shared "
           "memory")
    return None


def enough_groups(tile: TapsTile, mnk: tuple[int, int, int] | None, n: int, oh: int, ow: int) -> bool:
    """Whether `tile` launches AUTO_MIN_GROUPS workgroups for N images of an Hout × Wout output, as the kernel
    needs to take a convolution unasked (sizes may be symbolic: a guard of the shape class)."""
    return mnk is not None and math.prod(tile.groups(mnk, n, oh, ow)) >= AUTO_MIN_GROUPS


def record_conv2d_taps(rec: Recorder, kernel: KernelDef, tile: TapsTile, window: tuple[int, ...],
                       pads: tuple[int, int], post_affine: bool, x: Tensor, w: Tensor, out: Tensor,
                       b: Tensor | None, residual: Tensor | None, epilogue: bytes) -> None:
    """One dispatch: `kernel` is CONV2D_TAPS at the tensors' storage precision; window = (kh, kw, sh, sw, dh, dw);
    pads = (top, left); `epilogue`: the packed (has_bias, act, act_alpha, act_beta, post_scale, post_shift), as
    conv2d_direct.comp takes them. The caller (vk/kernels/conv.py) has checked every shape."""
    mnk = rec.device.coopmat_shape
    if mnk is None:  # taps_tile gave a tile: the device has matrices
        raise KernelArgumentError("conv2d_taps: the device has no cooperative matrix")
    n, cin, h, wd = x.shape
    _, cout, oh, ow = out.shape
    info = rec.device.info
    threads = subgroup_threads(rec, tile.rows, "conv2d_taps")
    split = kernel.precision == "fp32"
    window_shared = tile.shared_bytes(mnk, window, split)
    if window_shared > info.max_shared_memory_bytes:  # a forced tile: a pipeline past the limit loses the device
        raise KernelArgumentError(f"conv2d_taps: the tile {tile} needs {window_shared} B of shared memory, the device "
                                  f"has {info.max_shared_memory_bytes}")
    groups = tile.groups(mnk, n, oh, ow)
    check_groups(rec, groups, "conv2d_taps")
    constants = (threads, 1, 1, *mnk, tile.rows, tile.fp, tile.fn, *window, int(post_affine), int(residual is not None),
                 int(split))
    pipeline = rec.device.pipeline(kernel, constants)
    push = pack("8I", cin, cout, h, wd, oh, ow, *pads) + epilogue
    views = [x.view, w.view, (b if b is not None else w).view, out.view,
             (residual if residual is not None else w).view]
    rec.dispatch(pipeline, views, push, groups, label="conv2d_taps")
