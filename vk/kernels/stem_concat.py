"""A CNN stem's pooled branch and its two 2×2 convolutions in one dispatch: shaders/stem_concat.comp.

PP-HGNetV2's stem (PP-OCRv5/v6 det and rec) runs, between its first and last convolutions, two 2×2 convolutions
padded below and to the right (ONNX auto_pad SAME_UPPER) and joins their result with a 2×2 max-pool of their
input padded alike: Concat(MaxPool(x), Conv(Conv(x))). Three dispatches (the pool rides in the Concat:
map_fusion.fuse_pool_concat) wrote the middle map, the second convolution's map and the joined one, and read x
twice; here one writes the joined map alone. map_fusion.fuse_stem_concat decides where (`fuses`).
"""

from __future__ import annotations

from collections.abc import Sequence

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import activation_id, check_groups, pack, require_shape, storage
from vkocr.engine.kernels.spatial import require_nchw
from vkocr.engine.pipeline import KernelDef, dispatch_groups
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

STEM_CONCAT = KernelDef("stem_concat", ("r", "r", "r", "r", "r", "w"), 8)  # x, w1, b1, w2, b2, out
TILE = (32, 4)  # output columns × rows per workgroup (the shader's TW × TH)
LOCAL = (TILE[0] + 1, TILE[1] + 1, 1)  # an invocation per position of the middle map's tile, one beyond
MAX_MIDDLE = 16  # the middle map's channels: one mat4 of accumulators per position
MAX_SECOND = 32  # the second convolution's: two
MAX_INPUT = 64
# Shared memory the shader declares at most: Vulkan's least maxComputeSharedMemorySize, so that every device
# takes what the graph pass fused (PP-OCRv6 det's 24 -> 12 -> 24 needs 12.5 KiB; its rec's 48 -> 24 does not fuse)
MAX_SHARED = 16384


def shared_bytes(c0: int, c1: int, c2: int) -> int:
    """What stem_concat.comp declares for C0 input, C1 middle and C2 output channels: the larger weights layout
    (vec4s of output channels per input channel and tap) and the middle map's tile, one row and column beyond."""
    return 16 * weight_vecs(c0, c1, c2) + 4 * c1 * LOCAL[0] * LOCAL[1]


def weight_vecs(c0: int, c1: int, c2: int) -> int:
    return max(c0 * 4 * -(-c1 // 4), c1 * 4 * -(-c2 // 4))


def fuses(w1_shape: Sequence[int], w2_shape: Sequence[int]) -> bool:
    """Whether stem_concat.comp takes 2×2 convolutions with these weights, (C1, C0, 2, 2) then (C2, C1, 2, 2):
    the accumulators' limits and MAX_SHARED."""
    if len(w1_shape) != 4 or len(w2_shape) != 4 or tuple(w1_shape[2:]) != (2, 2) or tuple(w2_shape[2:]) != (2, 2):
        return False
    c1, c0 = int(w1_shape[0]), int(w1_shape[1])
    c2 = int(w2_shape[0])
    return (int(w2_shape[1]) == c1 and 1 <= c0 <= MAX_INPUT and 1 <= c1 <= MAX_MIDDLE and 1 <= c2 <= MAX_SECOND
            and shared_bytes(c0, c1, c2) <= MAX_SHARED)


def record_stem_concat(
    rec: Recorder,
    x: Tensor,
    w1: Tensor,
    b1: Tensor | None,
    w2: Tensor,
    b2: Tensor | None,
    out: Tensor,
    *,
    activations: Sequence[tuple[str, float, float]] = (("none", 0.0, 0.0), ("none", 0.0, 0.0)),
) -> None:
    """out = concat(maxpool(x), act2(conv(act1(conv(x, w1) + b1), w2) + b2)) on channels, each convolution 2×2 at
    stride 1 and the pool 2×2 at stride 1, all three padded by one row and column below and to the right (zeros
    for the convolutions; the pool's padding never wins): x (N, C0, H, W), w1 (C1, C0, 2, 2), w2 (C2, C1, 2, 2),
    out (N, C0 + C2, H, W); every tensor float32, or every one float16 (the middle map rounded as a convolution
    would have stored it). The channel counts are constants of the pipeline."""
    kernel = storage(STEM_CONCAT, x, w1, b1, w2, b2, out)
    n, channels, h, w = require_nchw(x, "stem concat input")
    c1, c0 = int(w1.shape[0]), int(w1.shape[1])  # the weights' (constants of the pipeline), never the input's
    c2 = int(w2.shape[0])
    if not fuses(w1.shape, w2.shape) or channels != c0:
        raise KernelArgumentError(f"stem concat: input {tuple(x.shape)}, weights {tuple(w1.shape)} and "
                                  f"{tuple(w2.shape)} do not chain (C1, C0, 2, 2) → (C2, C1, 2, 2) with C0 ≤ "
                                  f"{MAX_INPUT}, C1 ≤ {MAX_MIDDLE}, C2 ≤ {MAX_SECOND} in {MAX_SHARED} bytes of "
                                  "shared memory")
    for b, c, which in ((b1, c1, "first"), (b2, c2, "second")):
        if b is not None:
            require_shape(b, (c,), f"stem concat: the {which} bias")
    require_shape(out, (n, c0 + c2, h, w), "stem concat output")
    (act1, alpha1, beta1), (act2, alpha2, beta2) = activations
    constants = (*LOCAL, c0, c1, c2, weight_vecs(c0, c1, c2), int(b1 is not None), activation_id(act1),
                 float(alpha1), float(beta1), int(b2 is not None), activation_id(act2), float(alpha2), float(beta2))
    groups = dispatch_groups((w, h, n), (*TILE, 1))
    check_groups(rec, groups, "stem concat")
    views = [x.view, w1.view, (b1 if b1 is not None else w1).view, w2.view, (b2 if b2 is not None else w2).view,
             out.view]
    rec.dispatch(rec.device.pipeline(kernel, constants), views, pack("II", h, w), groups, label="stem_concat")
