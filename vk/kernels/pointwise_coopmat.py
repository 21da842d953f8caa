"""1×1 convolutions in fp16 storage on cooperative matrices, each subgroup loading its fragments straight from
memory (shaders/pointwise_coopmat.comp): which convolutions it takes, with which tile, and the launch.

conv2d_coopmat.comp stages its operands in shared memory behind a barrier per step, converting as it goes (fp32
as hi + lo pairs): it serves every convolution and storage, but its registers leave one workgroup per
multiprocessor, and on the H100 it ran det's 1×1 convolutions at 13-17 TFLOP/s. A 1×1 convolution of NCHW in
fp16 storage needs neither the conversion nor an im2col: the weights are the A matrix and the input the B
matrix as they lie in memory. `Conv2d.record` (vk/kernels/conv.py) asks `fragment_tile()` first for every
pointwise convolution; a tile means it records this kernel. On an H100 (one subgroup of 32 × 32 per
workgroup, benchmarks/2026-12-06-h100-fragments-session33.json) it ran det's 1×1 convolutions 1.1-1.9× faster
than the kernels before it, but for the deep ones on small maps that conv2d_coopmat.comp's TALL tile takes,
which keep it; in fp16 det 1×3×736×1024 went 10 % faster with all of them (before that exception), rec
16×3×48×320 7.5 %, rec and cls at batch 1 and 16 about 1 %.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from vkocr.engine.coopmat import switched_off
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv_coopmat import TALL, coopmat_shape, pick_coopmat_tile
from vkocr.engine.kernels.launch import check_groups, subgroup_threads
from vkocr.engine.memory import BufferView
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder

POINTWISE_COOPMAT = KernelDef("pointwise_coopmat", ("r", "r", "r", "w", "r"), 76, precision="fp16")
# coopMatLoad asks that a fragment's rows start on 16-byte boundaries: 8 halves. Every tensor starts on one
# (vk/device.py aligns arenas and tensors to at least 16 bytes), so the weights' rows do where K is a multiple
# of 8, and the input's where N is (where it is not, the kernel copies the input's fragments through shared
# memory: a guard on N's remainder would split the shape classes of rec's widths eightfold).
ALIGN_HALVES = 8


@dataclass(frozen=True)
class FragmentTile:
    """A workgroup of sg_m × sg_n subgroups, each owning fm × fn (1 or 2 each) accumulators of the device's TM × TN."""

    sg_m: int = 2
    sg_n: int = 2
    fm: int = 2
    fn: int = 2

    def __post_init__(self) -> None:
        if self.fm not in (1, 2) or self.fn not in (1, 2) or self.sg_m < 1 or self.sg_n < 1:
            raise KernelArgumentError(f"pointwise_coopmat: no tile {self}")

    def block(self, mnk: tuple[int, int, int]) -> tuple[int, int]:
        """One subgroup's rows and columns."""
        return self.fm * mnk[0], self.fn * mnk[1]

    def groups(self, mnk: tuple[int, int, int], m: int, n: Any, batches: Any) -> tuple[Any, Any, Any]:
        """Workgroups for the GEMM M × N repeated `batches` times (N and batches may be symbolic)."""
        rm, rn = self.block(mnk)
        bm, bn = self.sg_m * rm, self.sg_n * rn
        return (n + bn - 1) // bn, (m + bm - 1) // bm, batches


# Unasked, the kernel takes only convolutions that make this many workgroups: each subgroup walks all of K on
# its own, one global load's latency a step, so a few dozen of them leave the GPU waiting. In session 35's models
# on an H100 the fp16 1×1 convolutions of 51-96 workgroups ran 1.3-2.2× slower here than fp32 ones on the SIMT
# GEMM (rec 1×3×48×320's 384 -> 192 at 6×80 plus residual: 29.1 against 15.7 µs; det's 384 -> 96 at 23×32: 26.1
# against 20.3), those of 180 alike, those of 192 and more faster (rec's 384 -> 768 at 3×80: 23.7 against 27.6).
# (A guard on N · images: shapes either side of it are classes of their own.)
FRAG_MIN_GROUPS = 128

# One subgroup of 32 × 32 per workgroup: on the H100 the fastest tile on 8 of det's 10 kinds of 1×1 convolution,
# against workgroups of 4 or 8 subgroups (scripts/sweep_conv_tiles.py)
SINGLE = FragmentTile(sg_m=1, sg_n=1)


def fragment_tile(device: object, precision: str, m: int, k: int, n: Any, *, pointwise: bool, batches: Any = 1,
                  want: bool | None = None, tile: FragmentTile | None = None
                  ) -> tuple[tuple[int, int, int], FragmentTile] | None:
    """(TM, TN, TK) and the tile that a convolution of M = Cout/group rows, K = Cin/group and N output pixels
    (may be symbolic: the comparisons guard the shape class) runs on, or None for another kernel: not pointwise,
    not fp16 storage, a device without matrices (or VKOCR_COOPMAT=0), K not a multiple of TK and 8, or M, N
    smaller than a subgroup's block; unasked also where conv2d_coopmat.comp would take the GEMM (N × `batches`)
    with its TALL tile, which ran those faster on the H100 (det's 384- and 768-deep ones at 23×32: 16-34 µs against
    21-40), or where the tile makes fewer than FRAG_MIN_GROUPS workgroups. `want`: False never; True asks
    (KernelArgumentError where it cannot); `tile` forces one (sweeps, tests)."""
    if want is False:
        return None
    shape: tuple[int, int, int] | None = getattr(device, "coopmat_shape", None)
    why = ("not a 1×1 convolution of stride 1 without padding" if not pointwise
           else f"{precision} storage, not fp16" if precision != "fp16"
           else "no cooperative matrix" if shape is None or switched_off() else "")
    if not why and shape is not None:
        tm, tn, tk = shape
        chosen = tile or (SINGLE if m >= 2 * tm else replace(SINGLE, fm=1))
        rm, rn = chosen.block(shape)
        why = (f"K = {k} is not a multiple of {tk} and {ALIGN_HALVES}" if k % tk or k % ALIGN_HALVES
               else f"M = {m} < {rm} rows" if m < rm
               else f"N = {n} < {rn} columns" if n < rn else "")
        if not why and want is None and tile is None:
            staged = coopmat_shape(device, precision, m, k, pointwise=True, n=n, batches=batches)
            if staged is not None and pick_coopmat_tile(m, staged, pointwise=True, n=n, batches=batches) == TALL:
                return None
            gx, gy, gz = chosen.groups(shape, m, n, batches)
            if gx * gy * gz < FRAG_MIN_GROUPS:
                return None
        if not why:
            return shape, chosen
    if want:
        raise KernelArgumentError(f"pointwise_coopmat cannot take M {m}, K {k}, N {n}: {why}")
    return None


def record_pointwise_coopmat(rec: Recorder, mnk: tuple[int, int, int], tile: FragmentTile, push: bytes,
                             views: Sequence[BufferView], m: int, n: Any, batches: Any, *, post_affine: bool,
                             residual: bool) -> None:
    """One dispatch of pointwise_coopmat.comp for the GEMM M × N (N may be symbolic) repeated over `batches` =
    images · groups; `push` is conv2d's push constants, `views` its five bindings (x, w, bias, out, residual);
    `residual`: the fifth is added in the epilogue."""
    threads = subgroup_threads(rec, tile.sg_m * tile.sg_n, "pointwise_coopmat")
    groups = tile.groups(mnk, m, n, batches)
    check_groups(rec, groups, "pointwise_coopmat")
    constants = (threads, 1, 1, *mnk, tile.sg_m, tile.sg_n, int(tile.fm == 2), int(tile.fn == 2), int(post_affine),
                 int(residual))
    rec.dispatch(rec.device.pipeline(POINTWISE_COOPMAT, constants), views, push, groups, label="pointwise_coopmat")
