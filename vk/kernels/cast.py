"""Conversion between storage precisions: shaders/cast.comp, where a plan's fp32 and fp16 nodes meet."""

from __future__ import annotations

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import FLAT_LOCAL, FLOAT16, FLOAT32, PRECISIONS, flat_groups, pack
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

CAST = KernelDef("cast", ("r", "w"), 4)  # the variant is the precision it writes


def record_cast(rec: Recorder, x: Tensor, out: Tensor) -> None:
    """out = x in out's dtype: float32 → float16 rounds to nearest even (±inf beyond 65504), float16 → float32
    is exact."""
    pair = (x.dtype, out.dtype)
    if pair not in ((FLOAT32, FLOAT16), (FLOAT16, FLOAT32)):
        raise KernelArgumentError(f"cast: {x.dtype} → {out.dtype}; only float32 ↔ float16 converts")
    if tuple(x.shape) != tuple(out.shape):
        raise KernelArgumentError(f"cast: shapes {x.shape} and {out.shape} differ")
    pipeline = rec.device.pipeline(CAST.at(PRECISIONS[out.dtype]), (FLAT_LOCAL, 1, 1))
    rec.dispatch(pipeline, [x.view, out.view], pack("I", x.numel), flat_groups(x.numel), label="cast")
