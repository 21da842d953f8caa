"""Convolutions on cooperative matrices (shaders/conv2d_coopmat.comp): which convolutions take them, with which
tile, and the launch.

`Conv2d.record` (vk/kernels/conv.py) asks `coopmat_shape()`; a shape means it records this kernel, None the SIMT
kernel (conv2d.comp) exactly as before. The kernel shares conv2d.comp's push constants and its constants 8..11
(pointwise, KH, KW, post-affine), so the prepared node serves both.

The chain is coopmat → fp16 → fp32. The matrices multiply fp16 inputs with fp32 sums. Tensors stored in fp16 go
in as they are. Tensors stored in fp32 go in as hi + lo fp16 pairs, three products each (the shader's SPLIT):
~21 bits of every input (lo scaled out of fp16's subnormals, which NVIDIA flushes), ~1e-7 of relative error
against NumPy on lavapipe, where one fp16 product gives ~3e-4. Unasked (AUTO_PRECISIONS), only pointwise
convolutions take the path: those at least AUTO_MIN_K deep whose tile makes AUTO_MIN_GROUPS workgroups, or with
VKOCR_COOPMAT=1 (vk/coopmat.py `switched_on`) every one at least MIN_K deep. On the H100 the SIMT kernel ran
every k×k convolution faster. `coopmat=True` asks for it (scripts/check_coopmat.py, benchmarks).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from vkocr.engine.coopmat import switched_off, switched_on
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import check_groups, subgroup_threads
from vkocr.engine.memory import BufferView
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder

CONV2D_COOPMAT = KernelDef("conv2d_coopmat", ("r", "r", "r", "w", "r"), 76)  # x, w, bias, out, residual
AUTO_PRECISIONS = ("fp16", "fp32")  # storage precisions whose convolutions take the matrices unasked
SUBGROUPS = 4  # subgroups per workgroup (128 invocations on NVIDIA)
MIN_M = 16  # output channels per group below which the SIMT kernel serves (depthwise convs never reach this)
MIN_K = 16  # input channels per group × kernel taps
# Unasked, without VKOCR_COOPMAT=1: pointwise convolutions this deep whose tile makes this many workgroups. On the
# H100 (scripts/sweep_conv_tiles.py, benchmarks/2026-12-05-h100-sweep-conv-tiles.json) the matrices ran those
# 15-35 % faster than the best SIMT tile (det's 192..768-channel 1×1 convolutions, rec 16's), and shallower or
# smaller ones slower: det's 48..96-channel ones at 184×256 (0.088 against 0.034 ms), rec 1's at 3×80.
AUTO_MIN_K = 192
AUTO_MIN_GROUPS = 64


@dataclass(frozen=True)
class CoopmatTile:
    """A workgroup of sg_m × sg_n subgroups, each owning fm × fn accumulators of the device's TM × TN, BK =
    ksteps·TK deep per shared-memory step."""

    sg_m: int
    sg_n: int
    fm: int
    fn: int
    ksteps: int = 2

    def dims(self, mnk: tuple[int, int, int]) -> tuple[int, int, int]:
        """(BM, BN, BK) for the cooperative-matrix shape (TM, TN, TK)."""
        tm, tn, tk = mnk
        return self.sg_m * self.fm * tm, self.sg_n * self.fn * tn, self.ksteps * tk

    def shared_bytes(self, mnk: tuple[int, int, int], split: bool = False) -> int:
        """What conv2d_coopmat.comp declares: two buffers of fp16 A and B tiles (rows padded by 8; a hi and a lo
        tile each when `split`), one fp32 TM × TN staging matrix per subgroup."""
        bm, bn, bk = self.dims(mnk)
        parts = 2 if split else 1
        return 2 * parts * (2 * bm * (bk + 8) + 2 * bk * (bn + 8)) + 4 * self.sg_m * self.sg_n * mnk[0] * mnk[1]

    def groups(self, mnk: tuple[int, int, int], m: int, n: int, batches: int) -> tuple[int, int, int]:
        """Workgroups for the GEMM M × N repeated `batches` times (N may be symbolic)."""
        bm, bn, _ = self.dims(mnk)
        return (n + bn - 1) // bn, (m + bm - 1) // bm, batches


# By output channels per group (M): few rows make wide tiles, so a workgroup still covers 128 output pixels.
THIN = CoopmatTile(sg_m=1, sg_n=SUBGROUPS, fm=1, fn=2)    # BM = TM (16), BN = 8·TN (128)
NARROW = CoopmatTile(sg_m=1, sg_n=SUBGROUPS, fm=2, fn=2)  # BM = 2·TM (32), BN = 8·TN
SQUARE = CoopmatTile(sg_m=2, sg_n=2, fm=2, fn=4)          # BM = 4·TM (64), BN = 8·TN
# Pointwise convolutions with more rows: 8 subgroups (256 invocations on NVIDIA). On the H100 it ran PP-OCRv6's
# 1×1 convolutions 1.1-1.6x faster than the SIMT kernel, where SQUARE and THIN ran them slower (all its 3×3 ones
# too: benchmarks/2026-12-05-h100-coopmat-tiles.json).
WIDE = CoopmatTile(sg_m=2, sg_n=SUBGROUPS, fm=2, fn=2)  # BM = 4·TM (64), BN = 8·TN
# ... and where WIDE makes fewer than AUTO_MIN_GROUPS workgroups, half its accumulators per subgroup: twice the
# workgroups, each twice as deep a step. On the H100 det's 768 -> 384 at 23×32 (36 workgroups of WIDE: the SIMT
# kernel so far, 0.045 ms) took 0.028 ms on it in fp32 and 0.023 in fp16, where WIDE took 0.044 and 0.037. Where
# WIDE makes enough, TALL ran det's 384-deep ones 18 % slower (benchmarks/2026-12-06-h100-sweep-det-pointwise-
# session31.json).
TALL = CoopmatTile(sg_m=4, sg_n=2, fm=1, fn=2, ksteps=4)  # BM = 4·TM (64), BN = 4·TN (64)


def enough_groups(tile: CoopmatTile, mnk: tuple[int, int, int], m: int, n: int, batches: int) -> bool:
    """Whether `tile` makes AUTO_MIN_GROUPS workgroups for the GEMM M × N × `batches` (N may be symbolic)."""
    gx, gy, gz = tile.groups(mnk, m, n, batches)
    return bool(gx * gy * gz >= AUTO_MIN_GROUPS)


def pick_coopmat_tile(m: int, mnk: tuple[int, int, int], split: bool = False, pointwise: bool = False,
                      n: int | None = None, batches: int = 1) -> CoopmatTile:
    """The tile for M = `m` rows (and, where `n` is given, N = `n` columns × `batches`); `split` (fp32 inputs as
    hi + lo pairs) holds twice the tiles: half as deep."""
    tm = mnk[0]
    tile = THIN if m <= tm else NARROW if m <= 2 * tm else WIDE if pointwise else SQUARE
    if (tile is WIDE and n is not None and not enough_groups(WIDE, mnk, m, n, batches)
            and enough_groups(TALL, mnk, m, n, batches)):
        tile = TALL
    return dataclasses.replace(tile, ksteps=tile.ksteps // 2) if split else tile


def coopmat_shape(device: object, precision: str, m: int, k: int, *, want: bool | None = None,
                  pointwise: bool = False, n: int = 0, batches: int = 1) -> tuple[int, int, int] | None:
    """The (TM, TN, TK) a convolution of M = Cout/group rows and K = Cin/group·KH·KW runs on, or None for the
    SIMT kernel. `want`: None decides (the device has matrices, the storage precision is one of
    AUTO_PRECISIONS, a `pointwise` convolution, M ≥ MIN_M, and either K ≥ AUTO_MIN_K with AUTO_MIN_GROUPS
    workgroups of its tile for N = `n` output pixels × `batches`, or VKOCR_COOPMAT=1 and K ≥ MIN_K: the SIMT
    kernel ran every k×k one faster), False never, True wherever the device has them and the switch is not off
    (KernelArgumentError where it has none). M and K come from the weights: never symbolic; N may be (a guard
    of the shape class)."""
    if want is False:
        return None
    shape: tuple[int, int, int] | None = getattr(device, "coopmat_shape", None)
    if shape is None or switched_off():
        if want:
            why = getattr(device, "coopmat_why_not", "") or "no cooperative matrix"
            raise KernelArgumentError(f"conv2d: cooperative matrices asked for, and the device has none ({why})")
        return None
    if want is None and (precision not in AUTO_PRECISIONS or not pointwise or m < MIN_M or k < MIN_K):
        return None
    split = precision == "fp32"
    unasked = want is None and not switched_on()
    if unasked and k < AUTO_MIN_K:  # before the tile, whose workgroups guard the shape class
        return None
    tile = pick_coopmat_tile(m, shape, split, pointwise, n, batches)
    if unasked and not enough_groups(tile, shape, m, n, batches):
        return None
    info = getattr(device, "info", None)
    if info is not None and tile.shared_bytes(shape, split) > info.max_shared_memory_bytes:
        if want:
            raise KernelArgumentError(f"conv2d: the cooperative-matrix tile needs {tile.shared_bytes(shape, split)} "
                                      f"B of shared memory, the device has {info.max_shared_memory_bytes}")
        return None
    return shape


def record_conv2d_coopmat(rec: Recorder, kernel: KernelDef, mnk: tuple[int, int, int],
                          conv_constants: tuple[int, ...], push: bytes, views: Sequence[BufferView], m: int, n: int,
                          batches: int, tile: CoopmatTile | None = None, *, residual: bool = False) -> None:
    """One dispatch of conv2d_coopmat.comp (`kernel`: CONV2D_COOPMAT at the tensors' storage precision) for the
    GEMM M × N (N may be symbolic) repeated over `batches` = images · groups; `conv_constants` are conv2d's
    constants 8..11, `push` its push constants, `views` its five bindings; `residual`: the fifth is added in the
    epilogue; `tile` forces a tile (tests)."""
    split = kernel.precision == "fp32"  # fp32 inputs keep ~21 bits through hi + lo pairs (the shader's SPLIT)
    tile = tile or pick_coopmat_tile(m, mnk, split, pointwise=bool(conv_constants[0]), n=n, batches=batches)
    threads = subgroup_threads(rec, tile.sg_m * tile.sg_n, "conv2d_coopmat")
    groups = tile.groups(mnk, m, n, batches)
    check_groups(rec, groups, "conv2d_coopmat")
    constants = (threads, 1, 1, *mnk, tile.sg_m, tile.sg_n, *conv_constants, tile.fm, tile.fn, tile.ksteps,
                 int(residual), int(split))
    pipeline = rec.device.pipeline(kernel, constants)
    rec.dispatch(pipeline, views, push, groups, label="conv2d_coopmat")
