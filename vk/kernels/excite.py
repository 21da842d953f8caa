"""The excitation of a squeeze-and-excitation block in one dispatch: shaders/excite.comp.

An SE block scales each channel of x by a gate worked out from x's channel means s: two 1×1 convolutions on the
1×1 map s, then a Mul (or the GatedAdd x + x·g that passes.fuse_gate makes). The means come from their own
dispatch (GlobalAveragePool or ReduceMean); the rest is this one, where gemv.comp ran each convolution and
binary.comp the product, each behind a barrier. Every workgroup works out the two small products for itself
(they are a few thousand multiply-adds) in gemv.comp's order, so the answer is the three nodes' own. With
`upsample`, the output is also an FPN's upsample-and-add of a smaller map (map_fusion.fuse_excite_upsample_add).
"""

from __future__ import annotations

from dataclasses import dataclass

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.gemv import THREADS as GEMV_THREADS
from vkocr.engine.kernels.gemv import Epilogue, GemvShape
from vkocr.engine.kernels.launch import activation_id, check_groups, pack, require_shape, storage
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

EXCITE = KernelDef("excite", ("r", "r", "r", "r", "r", "r", "w", "r"), 48)  # x, s, w1, b1, w2, b2, out, u
THREADS = 256
MAX_HIDDEN = 1024  # excite.comp's MAX_HIDDEN: the hidden width it holds
# Only blocks of at most this many weights per product (C · C1) fuse: every workgroup repeats the products. On
# an H100 (benchmarks/2026-12-06-h100-excite-session29.json) det's 192 -> 48 -> 192 blocks (9216) ran faster
# fused, its 384 -> 96 -> 384 one (36864) at 2.5× the time of the three dispatches it replaced.
MAX_FUSED_WEIGHTS = 9216
# The block a workgroup scales: (pixels per invocation, channels), by the size of the batch's maps and the
# products' weights. Measured on det's and rec's SE blocks on an H100, the workgroups that repeat the products
# should number some tens to a few hundred: 4416 of them (det's 96 -> 24 -> 96 block at 184×256, 256 pixels × 4
# channels) took 58 µs where 276 (1024 × 16) took 28, and 6 (det's same block at 23×32, 1024 × 16) took 14 where
# 72 (256 × 4) took 10.
LARGE_MAP = 4096  # N·H·W from which a workgroup takes 1024 pixels (4 per invocation), 256 below
MORE_CHANNELS_FROM = 2304  # C·C1 from which a workgroup takes 16 channels, 4 below (on small maps: above it)
MAX_UPSAMPLE = 64  # the largest factor of the upsampled addend (an FPN's are 2)


def fuses(c: int, c1: int) -> bool:
    """Whether an SE block of C channels and C1 hidden ones runs as one Excite (shape_fusion.fuse_excite asks)."""
    return c * c1 <= MAX_FUSED_WEIGHTS and c1 <= MAX_HIDDEN


def lanes(rows: int, k: int) -> int:
    """gemv.comp's lanes per row for a 1×1 convolution of `rows` output channels over `k` input channels: the
    same lanes sum the same products in the same order."""
    return GEMV_THREADS // GemvShape(rows=rows, k=k, row_stride=k, k_stride=1).rows_per_group()


def block(c: int, c1: int, n: int, h: int, w: int) -> tuple[int, int]:
    """(pixels per invocation, channels per workgroup) for N images of an H × W map (sizes may be symbolic: the
    comparison is a guard of the shape class)."""
    if n * h * w >= LARGE_MAP:
        return 4, 16 if c * c1 >= MORE_CHANNELS_FROM else 4
    return 1, 16 if c * c1 > MORE_CHANNELS_FROM else 4


@dataclass(frozen=True)
class Excite:
    """out = x · g (or x + x · g with `gated_add`), g = second(W2 · first(W1 · s + b1) + b2) per image, for
    w1 (C1, C, 1, 1) and w2 (C, C1, 1, 1): what the weights and attributes decide, checked once. With `upsample`
    > 1, out = nearest_upsample(u, upsample) + that (u: the smaller map of an FPN's upsample-and-add)."""

    c: int
    c1: int
    first: Epilogue
    second: Epilogue
    has_b1: bool
    has_b2: bool
    gated_add: bool
    upsample: int = 1

    @classmethod
    def of(cls, w1_shape: tuple[int, ...], w2_shape: tuple[int, ...], first: Epilogue, second: Epilogue, *,
           has_b1: bool, has_b2: bool, gated_add: bool, upsample: int = 1) -> Excite:
        if len(w1_shape) != 4 or len(w2_shape) != 4 or w1_shape[2:] != (1, 1) or w2_shape[2:] != (1, 1):
            raise KernelArgumentError(f"excite takes 1×1 weights, not {tuple(w1_shape)} and {tuple(w2_shape)}")
        c1, c = int(w1_shape[0]), int(w1_shape[1])
        if tuple(w2_shape) != (c, c1, 1, 1):
            raise KernelArgumentError(f"excite: w2 {tuple(w2_shape)} does not undo w1 {tuple(w1_shape)}")
        if not 1 <= c1 <= MAX_HIDDEN:  # (any C · C1 runs; fuses() keeps the slow ones apart)
            raise KernelArgumentError(f"excite holds at most {MAX_HIDDEN} hidden channels, not {c1}")
        for e in (first, second):
            if e.post_affine is not None or e.alpha != 1.0 or e.beta != 1.0:
                raise KernelArgumentError("excite's products end in a bias and an activation, nothing else")
        if not 1 <= upsample <= MAX_UPSAMPLE:
            raise KernelArgumentError(f"excite upsamples its addend by 1..{MAX_UPSAMPLE}, not {upsample}")
        return cls(c, c1, first, second, has_b1, has_b2, gated_add, upsample)

    def record(self, rec: Recorder, x: Tensor, s: Tensor, w1: Tensor, b1: Tensor | None, w2: Tensor,
               b2: Tensor | None, out: Tensor, u: Tensor | None = None) -> None:
        """x (N, C, H, W), s (N, C, 1, 1), out like x, u (N, C, H / upsample, W / upsample) where upsample > 1;
        every tensor float32, or every one float16."""
        kernel = storage(EXCITE, x, s, w1, b1, w2, b2, out, u)
        if len(x.shape) != 4 or x.shape[1] != self.c:
            raise KernelArgumentError(f"excite: x {tuple(x.shape)} has not {self.c} channels in NCHW")
        n, _, h, w = x.shape
        require_shape(s, (n, self.c, 1, 1), "excite squeezed input")
        require_shape(w1, (self.c1, self.c, 1, 1), "excite w1")
        require_shape(w2, (self.c, self.c1, 1, 1), "excite w2")
        require_shape(out, tuple(x.shape), "excite output")
        if (b1 is not None) != self.has_b1 or (b2 is not None) != self.has_b2:
            raise KernelArgumentError("excite: biases given unlike those prepared")
        if b1 is not None:
            require_shape(b1, (self.c1,), "excite b1")
        if b2 is not None:
            require_shape(b2, (self.c,), "excite b2")
        up = self.upsample
        if (u is not None) != (up > 1):
            raise KernelArgumentError(f"excite upsampling by {up} takes {'an' if up > 1 else 'no'} addend to upsample")
        if u is not None:
            require_shape(u, (n, self.c, h // up, w // up), "excite's addend to upsample")
            if h % up != 0 or w % up != 0:
                raise KernelArgumentError(f"excite: a {h}×{w} map is no upsampling of u by {up}")
        per_invocation, channels = block(self.c, self.c1, n, h, w)
        groups = (-(-(h * w) // (THREADS * per_invocation)), -(-self.c // channels), n)
        check_groups(rec, groups, "excite")
        constants = (THREADS, 1, 1, lanes(self.c1, self.c), lanes(self.c, self.c1), channels, int(self.gated_add),
                     per_invocation, up)
        first, second = self.first, self.second
        push = pack("5I2f2I2fI", self.c, self.c1, h * w, int(self.has_b1), activation_id(first.activation),
                    first.act_alpha, first.act_beta, int(self.has_b2), activation_id(second.activation),
                    second.act_alpha, second.act_beta, w)
        views = [x.view, s.view, w1.view, (b1 if b1 is not None else w1).view, w2.view,
                 (b2 if b2 is not None else w2).view, out.view, (u if u is not None else x).view]
        rec.dispatch(rec.device.pipeline(kernel, constants), views, push, groups, label="excite")
