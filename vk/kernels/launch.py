"""Small helpers every kernel wrapper shares: grid sizes, push-constant packing, activation ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from vkocr.engine import symbolic
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.tensor import Tensor

if TYPE_CHECKING:
    from vkocr.engine.recorder import Recorder

FLOAT32 = np.dtype("<f4")
FLOAT16 = np.dtype("<f2")
# storage precision of a kernel's tensors → the SPIR-V variant that runs (KernelDef.at)
PRECISIONS = {FLOAT32: "fp32", FLOAT16: "fp16"}
FLAT_LOCAL = 256  # workgroup size of one-dimensional kernels
MAX_GROUPS_X = 65535  # the minimum maxComputeWorkGroupCount[0] every device guarantees

# Ids shared with shaders/include/activation.glsl.
ACTIVATION_IDS = {"none": 0, "relu": 1, "clip": 2, "hardsigmoid": 3, "hardswish": 4, "sigmoid": 5, "leakyrelu": 6,
                  "gelu": 7, "silu": 8}


def flat_groups(n: int, local: int = FLAT_LOCAL) -> tuple[int, int, int]:
    """Groups for n invocations of a 1-D kernel, folded into 2-D when n needs more than 65535 groups."""
    groups = -(-n // local) if n > 0 else 1  # (not max(1, ...): a symbolic count would be guarded against 1)
    if groups <= MAX_GROUPS_X:
        return groups, 1, 1
    return MAX_GROUPS_X, -(-groups // MAX_GROUPS_X), 1


def power_of_two_at_least(n: int, low: int) -> int:
    """The least power of two ≥ n and ≥ low (a power of two itself), found by comparisons: guards of the shape
    class where n is symbolic, so a class holds every n of one answer."""
    size = low
    while size < n:
        size *= 2
    return size


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy.broadcast_shapes for two shapes, in plain Python (NumPy's costs ~8 µs a call, and a plan asks it
    for every elementwise node); ValueError when they do not broadcast."""
    if len(a) < len(b):
        a = (1,) * (len(b) - len(a)) + tuple(a)
    elif len(b) < len(a):
        b = (1,) * (len(a) - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ValueError(f"shapes {tuple(a)} and {tuple(b)} do not broadcast")
    return tuple(out)


def pack(fmt: str, *values: float) -> bytes:
    """Little-endian push constants; `I` = uint, `i` = int, `f` = float. Under a trace, a `symbolic.Packed`
    where a value is a symbolic dimension: it joins with bytes and pads as bytes do, and the recorder keeps it
    for the compiled program to pack (typed as bytes until Recorder.dispatch's `push` names both)."""
    return cast(bytes, symbolic.pack("<" + fmt, values))


def conv2d_push_parts(group: Any, cin_g: Any, cout_g: Any, strides: tuple[int, int], dilations: tuple[int, int],
                      pads: tuple[Any, Any], has_bias: bool, act: int, alpha: float, beta: float, scale: float,
                      shift: float) -> tuple[bytes, bytes]:
    """conv2d.comp's push constants (which pointwise_staged.comp and the other matrix kernels take too) but the
    four sizes that go between the two parts: what a convolution's weights and attributes decide, packed once."""
    return (pack("3I", group, cin_g, cout_g),
            pack("6I2I4f", *strides, *dilations, *pads, int(has_bias), act, float(alpha), float(beta), float(scale),
                 float(shift)))


def conv2d_push(parts: tuple[bytes, bytes], h: Any, w: Any, oh: Any, ow: Any) -> bytes:
    """conv2d.comp's push constants from `conv2d_push_parts` and the input's and output's spatial sizes."""
    return parts[0] + pack("4I", h, w, oh, ow) + parts[1]


def padded(values: Sequence[int], length: int, fill: int = 0) -> list[int]:
    """Pad an array field of a push-constant block to its declared length."""
    if len(values) > length:
        raise KernelArgumentError(f"rank {len(values)} exceeds the kernel limit of {length}")
    return [*values, *([fill] * (length - len(values)))]


def activation_id(kind: str) -> int:
    if kind not in ACTIVATION_IDS:
        raise KernelArgumentError(f"unknown activation {kind!r}; known: {', '.join(ACTIVATION_IDS)}")
    return ACTIVATION_IDS[kind]


def require_float32(*tensors: Tensor) -> None:
    for t in tensors:
        if t.dtype is not FLOAT32 and t.dtype != FLOAT32:
            raise KernelArgumentError(f"kernel needs float32 tensors, got {t.dtype}")


def storage(kernel: KernelDef, *tensors: Tensor | None) -> KernelDef:
    """`kernel` compiled for the one storage dtype its tensors share (float32 or float16; None entries are
    absent optional operands); KernelArgumentError for a mix or another dtype."""
    dtype = next(t.dtype for t in tensors if t is not None)
    precision = PRECISIONS.get(dtype)
    if precision is None:
        raise KernelArgumentError(f"{kernel.shader}: tensors of {dtype}; kernels store float32 or float16")
    for t in tensors:
        if t is not None and t.dtype != dtype:
            raise KernelArgumentError(f"{kernel.shader}: tensors of {dtype} and {t.dtype}; a kernel's tensors "
                                      "share one storage dtype (a cast converts between them)")
    return kernel.at(precision)


def require_shape(t: Tensor, shape: tuple[int, ...], what: str) -> None:
    if tuple(t.shape) != tuple(shape):
        raise KernelArgumentError(f"{what}: expected shape {shape}, got {t.shape}")


def subgroup_threads(rec: Recorder, subgroups: int, what: str) -> int:
    """The invocations of a workgroup of `subgroups` subgroups of the device's size (cooperative-matrix kernels
    size theirs so); KernelArgumentError naming `what` past the device's limit."""
    info = rec.device.info
    threads = subgroups * info.subgroup_size
    if threads > info.max_workgroup_invocations:
        raise KernelArgumentError(f"{what}: {threads} invocations per workgroup, the device allows "
                                  f"{info.max_workgroup_invocations}")
    return int(threads)


def check_groups(rec: Recorder, groups: tuple[int, int, int], what: str) -> None:
    """KernelArgumentError naming `what` where a dispatch needs more workgroups than the device allows."""
    limit = rec.device.info.max_workgroup_count
    if groups[0] > limit[0] or groups[1] > limit[1] or groups[2] > limit[2]:
        raise KernelArgumentError(f"{what}: needs workgroups {groups}, device allows {tuple(limit)}")
