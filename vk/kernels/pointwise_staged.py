"""1×1 convolutions in fp16 storage on cooperative matrices, both operands staged in shared memory sixteen bytes
per load and store (shaders/pointwise_staged.comp): which convolutions it takes, with which tile, and the launch.

conv2d_coopmat.comp stages its tiles one element per load and store, converting each through fp32, and on the
H100 ran rec 16's 1×1 convolutions at 22-30 TFLOP/s, a few percent of the matrix units' rate, as did the
fragment kernel (pointwise_coopmat.comp), which loads its fragments straight from memory. In fp16 storage a
1×1 convolution's operands need neither conversion nor im2col, so this kernel copies them as they lie, eight
halves at a time: a sixteenth of the other's load and store instructions per step at rec's tiles. It runs only
where asked (`Conv2d.record`'s `coopmat_tile` given a StagedTile: tests, sweeps) until measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vkocr.engine.coopmat import switched_off
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv_coopmat import CoopmatTile
from vkocr.engine.kernels.launch import check_groups, subgroup_threads
from vkocr.engine.memory import BufferView
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder

POINTWISE_STAGED = KernelDef("pointwise_staged", ("r", "r", "r", "w", "r"), 76, precision="fp16")
VEC_HALVES = 8  # halves per 16-byte load and store


@dataclass(frozen=True)
class StagedTile(CoopmatTile):
    """conv2d_coopmat.comp's tile (sg_m × sg_n subgroups of fm × fn accumulators, ksteps·TK deep per step) for
    pointwise_staged.comp, whose shared tiles take the same bytes as conv2d_coopmat.comp's fp16 ones."""


# 8 subgroups, 64 × 128 outputs, 32 deep per step: conv2d_coopmat.comp's WIDE
WIDE = StagedTile(sg_m=2, sg_n=4, fm=2, fn=2, ksteps=2)


def staged_tile(device: object, precision: str, m: int, k: int, *, pointwise: bool, tile: StagedTile | None = None
                ) -> tuple[tuple[int, int, int], StagedTile]:
    """(TM, TN, TK) and the tile that a 1×1 convolution of M = Cout/group rows and K = Cin/group runs on;
    KernelArgumentError where it cannot: not pointwise, not fp16 storage, a device without matrices (or
    VKOCR_COOPMAT=0), K or the matrices' TN and TK not multiples of 8, or a tile past the device's shared
    memory."""
    shape: tuple[int, int, int] | None = getattr(device, "coopmat_shape", None)
    chosen = tile or WIDE
    why = ("not a 1×1 convolution of stride 1 without padding" if not pointwise
           else f"{precision} storage, not fp16" if precision != "fp16"
           else "no cooperative matrix" if shape is None or switched_off()
           else f"K = {k} is not a multiple of {VEC_HALVES}" if k % VEC_HALVES
           else f"the matrices' shape {shape} is not in steps of {VEC_HALVES}"
           if shape[1] % VEC_HALVES or shape[2] % VEC_HALVES else "")
    info = getattr(device, "info", None)
    if not why and shape is not None and info is not None and chosen.shared_bytes(shape) > info.max_shared_memory_bytes:
        why = f"the tile needs {chosen.shared_bytes(shape)} B of shared memory, the device has " \
              f"{info.max_shared_memory_bytes}"
    if why or shape is None:
        raise KernelArgumentError(f"pointwise_staged cannot take M {m}, K {k}: {why}")
    return shape, chosen


def record_pointwise_staged(rec: Recorder, mnk: tuple[int, int, int], tile: StagedTile, push: bytes,
                            views: Sequence[BufferView], m: int, n: Any, batches: Any, *, post_affine: bool,
                            residual: bool) -> None:
    """One dispatch of pointwise_staged.comp for the GEMM M × N (N may be symbolic) repeated over `batches` =
    images · groups; `push` is conv2d's push constants, `views` its five bindings (x, w, bias, out, residual);
    `residual`: the fifth is added in the epilogue."""
    threads = subgroup_threads(rec, tile.sg_m * tile.sg_n, "pointwise_staged")
    groups = tile.groups(mnk, m, n, batches)
    check_groups(rec, groups, "pointwise_staged")
    constants = (threads, 1, 1, *mnk, tile.sg_m, tile.sg_n, tile.fm, tile.fn, tile.ksteps, int(post_affine),
                 int(residual))
    rec.dispatch(rec.device.pipeline(POINTWISE_STAGED, constants), views, push, groups, label="pointwise_staged")
