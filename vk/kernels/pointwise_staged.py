"""1×1 convolutions on cooperative matrices, both operands staged in shared memory sixteen bytes per load
(shaders/pointwise_staged.comp): which convolutions it takes, with which tile, and the launch.

conv2d_coopmat.comp stages its tiles one element per load and store, converting each through fp32, and on the
H100 ran rec 16's 1×1 convolutions at 22-30 TFLOP/s, a few percent of the matrix units' rate, as did the
fragment kernel (pointwise_coopmat.comp), which loads its fragments straight from memory. A 1×1 convolution's
operands need no im2col, so this kernel copies them 16 bytes at a time: in fp16 storage eight halves as they lie
(a sixteenth of the other's load and store instructions per step at rec's tiles), in fp32 four floats split into
hi + lo halves as conv2d_coopmat.comp's SPLIT splits them. It runs only where asked (`Conv2d.record`'s
`coopmat_tile` given a StagedTile: tests, sweeps) until measured.
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

POINTWISE_STAGED = KernelDef("pointwise_staged", ("r", "r", "r", "w", "r"), 76)  # x, w, bias, out, residual
K_STEP = 8  # K's multiple: a weights row starts on 16 bytes, and a load's k are in range together


@dataclass(frozen=True)
class StagedTile(CoopmatTile):
    """conv2d_coopmat.comp's tile (sg_m × sg_n subgroups of fm × fn accumulators, ksteps·TK deep per step) for
    pointwise_staged.comp, whose shared tiles take the bytes conv2d_coopmat.comp's take (hi and lo in fp32)."""


# 8 subgroups, 64 × 128 outputs, 32 deep per step: conv2d_coopmat.comp's WIDE
WIDE = StagedTile(sg_m=2, sg_n=4, fm=2, fn=2, ksteps=2)


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


def record_pointwise_staged(rec: Recorder, kernel: KernelDef, mnk: tuple[int, int, int], tile: StagedTile,
                            push: bytes, views: Sequence[BufferView], m: int, n: Any, batches: Any, *,
                            post_affine: bool, residual: bool) -> None:
    """One dispatch of pointwise_staged.comp (`kernel`: POINTWISE_STAGED at the tensors' storage precision) for
    the GEMM M × N (N may be symbolic) repeated over `batches` = images · groups; `push` is conv2d's push
    constants, `views` its five bindings (x, w, bias, out, residual); `residual`: the fifth is added in the
    epilogue."""
    threads = subgroup_threads(rec, tile.sg_m * tile.sg_n, "pointwise_staged")
    groups = tile.groups(mnk, m, n, batches)
    check_groups(rec, groups, "pointwise_staged")
    constants = (threads, 1, 1, *mnk, tile.sg_m, tile.sg_n, tile.fm, tile.fn, tile.ksteps, int(post_affine),
                 int(residual))
    rec.dispatch(rec.device.pipeline(kernel, constants), views, push, groups, label="pointwise_staged")
