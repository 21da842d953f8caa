"""ONNX MatMul and Gemm on the tiled GEMM core: shaders/gemm.comp over shaders/include/gemm_tile.glsl; products
with one output row or one output column as matrix-vector products: shaders/gemv.comp."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.elementwise import broadcast_strides
from vkocr.engine.kernels.gemv import Epilogue, GemvShape, record_gemv
from vkocr.engine.kernels.launch import (
    activation_id,
    broadcast_shape,
    check_groups,
    pack,
    padded,
    require_shape,
    storage,
)
from vkocr.engine.kernels.pointwise_staged import (
    POINTWISE_STAGED,
    StagedTile,
    auto_gemm_tile,
    gemm_push,
    record_pointwise_staged,
    staged_tile,
)
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

GEMM = KernelDef("gemm", ("r", "r", "r", "w", "r"), 112)
MAX_BATCH_RANK = 4


@dataclass(frozen=True)
class GemmTile:
    """One tile configuration of gemm_tile.glsl: a BM × BN output tile per workgroup, BK deep per step,
    TM × TN outputs per thread; `slices` > 1 splits K between that many slices of the workgroup."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    slices: int = 1

    def __post_init__(self) -> None:
        # what gemm_tile.glsl can hold in its named registers, and lavapipe's 32 KiB of shared memory
        assert self.tm in (4, 8) and self.tn in (4, 8), self
        assert self.bm % (4 * self.tm) == 0 and self.bn % (4 * self.tn) == 0, self
        assert self.slices == 1 or self.tm == self.tn == 4, self  # a slice hands over one mat4
        for elements in (self.bm * self.bk, self.bk * self.bn):
            assert elements % self.threads == 0 and elements // self.threads <= 8, self
        assert self.shared_bytes <= 32768, self

    @property
    def threads(self) -> int:
        """Invocations per slice."""
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def shared_bytes(self) -> int:
        """Double-buffered A and B tiles per slice (rows padded by a vec4), and the slices' hand-over."""
        tiles = 2 * self.bk * (self.bm + 4 + self.bn + 4) * 4 * self.slices
        return tiles + ((self.slices - 1) * self.threads * 4 + 1) * 16

    def constants(self) -> tuple[int, ...]:
        """Specialization constants 0..7: workgroup size (every slice's invocations), then BM, BN, BK, TM, TN."""
        return (self.threads * self.slices, 1, 1, self.bm, self.bn, self.bk, self.tm, self.tn)

    def groups(self, m: int, n: int, batches: int) -> tuple[int, int, int]:
        return -(-n // self.bn), -(-m // self.bm), batches


# large: the classic 128×128×8 SGEMM tile, 8×8 per thread (17 KiB of shared memory), for big problems.
# wide: 64×128×8, 4×8 per thread, for 33..96 output rows (convs with 48..96 output channels).
# small: 64×64×16, 4×4 per thread, four times large's workgroups, for problems too small to fill a GPU.
# thin: 32×128×8, 4×4 per thread, for ≤ 32 output rows (narrow convs, GEMV-like products).
# sliced: 32×32×8, 4×4 per thread, K split between 4 slices of 64 invocations: for outputs too small to fill a
#   GPU with any other tile and a deep K (7×7 and 14×14 feature maps of 256..1280 channels, a classifier's
#   head), where a workgroup walking all of K one tile after another waits out each tile's load latency.
TILES = {
    "large": GemmTile(128, 128, 8, 8, 8),
    "wide": GemmTile(64, 128, 8, 4, 8),
    "small": GemmTile(64, 64, 16, 4, 4),
    "thin": GemmTile(32, 128, 8, 4, 4),
    "sliced": GemmTile(32, 32, 8, 4, 4, slices=4),
}
# A big tile only pays while it still gives most multiprocessors of a big GPU a workgroup (132 on an H200):
# on an H200 large beat wide from about 100 large workgroups up (1280³, a 128-channel 3×3 conv at 120×120).
MIN_GROUPS = 96
# ... and only over a K deep enough for its 64 sums per invocation to outweigh storing them: on an H100 the CTC
# head's product (rows × 120 @ 120 × 18,710) ran 30-36 % faster on wide than on large at 240 and 480 rows, 14 %
# at 640 (scripts/time_rec_head.py, session 34).
LARGE_MIN_K = 128
# The sliced tile, measured on an H100: faster where the fallback tile made 8..24 workgroups (the page-orientation
# model's 14×14 and 7×7 convolutions 20 → 12 µs, rec at 1×3×48×320 1.40 → 1.13 ms), slower at 72 (det's 1×1
# convolutions at 23×32 with 384..768 channels, 47 → 69 µs): there the work, not the latency, decides.
SLICED_MAX_GROUPS = 32
SLICED_MIN_K = 128  # below this the sliced tile's slices walk too little of K to pay for their hand-over


def pick_tile(m: int, n: int, batches: int, tile: str | GemmTile | None = None, k: int = 0,
              most_groups: bool = False) -> GemmTile:
    """The tile config for an M × N output repeated `batches` times, K = `k` deep; `tile` forces one by name
    (or is one: scripts/sweep_conv_tiles.py).

    ≤ 32 rows: thin. Otherwise the biggest tile that wastes little on edges (M, N > 96 for large, N > 96 for
    wide) and still makes MIN_GROUPS workgroups, large only over a K deeper than LARGE_MIN_K (or unknown: 0);
    small when neither does. Where thin or small makes fewer than
    SLICED_MAX_GROUPS workgroups and K is at least SLICED_MIN_K deep: sliced. `most_groups`: thin first, wherever
    it makes MIN_GROUPS workgroups (vk/kernels/conv.py asks it for shallow pointwise convolutions).
    """
    if isinstance(tile, GemmTile):
        return tile
    if tile is not None:
        if tile not in TILES:
            raise KernelArgumentError(f"unknown tile config {tile!r}; known: {', '.join(TILES)}")
        return TILES[tile]

    def enough(name: str, groups: int = MIN_GROUPS) -> bool:
        gx, gy, gz = TILES[name].groups(m, n, batches)
        return gx * gy * gz >= groups

    if most_groups and enough("thin"):
        return TILES["thin"]
    if m > 96 and n > 96 and (k == 0 or k > LARGE_MIN_K) and enough("large"):
        return TILES["large"]
    if m > 32 and n > 96 and enough("wide"):
        return TILES["wide"]
    fallback = "thin" if m <= 32 else "small"
    if k >= SLICED_MIN_K and not enough(fallback, SLICED_MAX_GROUPS):
        return TILES["sliced"]
    return TILES[fallback]


def _record(
    rec: Recorder,
    operands: tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None],
    mnk: tuple[int, int, int],
    strides: tuple[int, ...],
    batch: tuple[list[int], list[int], list[int]],
    epilogue: tuple[int, float, float, int, float, float],
    tile: GemmTile,
    label: str,
) -> None:
    """One gemm.comp dispatch. strides = (a_m, a_k, b_k, b_n, c_m, c_n); batch = merged (shape, a, b) strides;
    epilogue = (has_c, alpha, beta, activation id, act_alpha, act_beta)."""
    m, n, k = mnk
    a_k, b_n = strides[1], strides[3]
    shape, batch_a, batch_b = batch
    if len(shape) > MAX_BATCH_RANK:
        raise KernelArgumentError(f"{label}: {len(shape)} batch dims after merging, at most {MAX_BATCH_RANK}")
    groups = tile.groups(m, n, math.prod(shape))
    check_groups(rec, groups, label)
    # spec constants 8, 9: fetch along the contiguous axis of A and B so that warps read coalesced
    residual = operands[4]
    pipeline = rec.device.pipeline(storage(GEMM, *operands),
                                   (*tile.constants(), int(a_k == 1), int(b_n == 1), int(residual is not None)))
    has_c, alpha, beta, act, act_alpha, act_beta = epilogue
    push = pack(
        "3I6II2fI2fI4I4I4I", m, n, k, *strides, has_c, alpha, beta, act, act_alpha, act_beta,
        len(shape), *padded(shape, 4, 1), *padded(batch_a, 4), *padded(batch_b, 4),
    )
    views = [v.view for v in operands[:4]] + [(residual if residual is not None else operands[0]).view]
    rec.dispatch(pipeline, views, push, groups, label=label)


def as_gemv(a: Tensor, b: Tensor, mnk: tuple[int, int, int], strides: tuple[int, ...],
            batch: tuple[int, int, int] = (1, 0, 0)) -> tuple[Tensor, Tensor, GemvShape] | None:
    """(matrix, vector, shape) of gemv.comp for a product with one output column (A · b) or one output row
    (bᵀ · B, B read through its strides as the matrix), else None. strides = (a_m, a_k, b_k, b_n, c_m, c_n);
    batch = (count, A's and B's element strides per batch)."""
    m, n, k = mnk
    a_m, a_k, b_k, b_n, c_m, c_n = strides
    count, batch_a, batch_b = batch
    if n == 1:
        return a, b, GemvShape(rows=m, k=k, row_stride=a_m, k_stride=a_k, x_stride=b_k, batches=count,
                               batch_a=batch_a, batch_x=batch_b, bias_stride=c_m)
    if m == 1:
        return b, a, GemvShape(rows=n, k=k, row_stride=b_n, k_stride=b_k, x_stride=a_k, batches=count,
                               batch_a=batch_b, batch_x=batch_a, bias_stride=c_n)
    return None


def matmul_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[int, ...]:
    """numpy.matmul's output shape for ≥ 2-D operands; KernelArgumentError if they do not fit."""
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise KernelArgumentError(f"matmul needs ≥ 2-D operands, got {a_shape} and {b_shape}")
    if a_shape[-1] != b_shape[-2]:
        raise KernelArgumentError(f"matmul: inner dims differ: {a_shape} @ {b_shape}")
    try:
        batch = broadcast_shape(a_shape[:-2], b_shape[:-2])
    except ValueError as exc:
        raise KernelArgumentError(f"matmul: batch dims of {a_shape} and {b_shape} do not broadcast") from exc
    return (*batch, a_shape[-2], b_shape[-1])


def record_matmul(rec: Recorder, a: Tensor, b: Tensor, out: Tensor, *, tile: str | GemmTile | None = None) -> None:
    """out = a @ b (numpy.matmul) for ≥ 2-D tensors, all float32 or all float16 (accumulating in float32),
    batch dims broadcast; `tile` forces a config of the GEMM, which otherwise leaves a product with one output row
    or column (and at most one batch dim after merging) to gemv.comp."""
    storage(GEMM, a, b, out)
    require_shape(out, matmul_shape(a.shape, b.shape), "matmul output")
    if out.numel == 0:
        return
    m, k = a.shape[-2:]
    n = b.shape[-1]
    shape, st_a, st_b = broadcast_strides(a.shape[:-2], b.shape[:-2])
    batch = (shape, [s * m * k for s in st_a], [s * k * n for s in st_b])
    strides = (k, 1, n, 1, 0, 0)
    # (more than one batch dim after merging stays the GEMM's, which broadcasts them all)
    gemv = as_gemv(a, b, (m, n, k), strides, (shape[0], batch[1][0], batch[2][0])) if len(shape) == 1 else None
    if gemv is not None and tile is None:
        matrix, vector, gemv_shape = gemv
        record_gemv(rec, matrix, vector, out, gemv_shape, label="matmul")
        return
    chosen = pick_tile(m, n, math.prod(shape), tile, k)
    _record(rec, (a, b, a, out, None), (m, n, k), strides, batch, (0, 1.0, 0.0, 0, 0.0, 0.0), chosen, "matmul")


def _staged(rec: Recorder, a: Tensor, b: Tensor, out: Tensor, c: Tensor | None, residual: Tensor | None,
            mnk: tuple[int, int, int], tile: str | StagedTile | None, *, plain: bool,
            act: tuple[int, float, float]) -> bool:
    """Record the GEMM on pointwise_staged.comp where `tile` is a StagedTile (KernelArgumentError where it cannot
    take it) or, unasked, where `auto_gemm_tile` gives one; whether it did. `plain`: no transposes, alpha = beta
    = 1, C absent or one per column."""
    m, n, k = mnk
    kernel = storage(POINTWISE_STAGED, a, b, out, c, residual)
    if isinstance(tile, StagedTile):
        if not plain:
            raise KernelArgumentError("pointwise_staged takes a Gemm without transposes, alpha and beta of 1 and C "
                                      "absent or one per column")
        found: tuple[tuple[int, int, int], StagedTile] | None = staged_tile(rec.device, kernel.precision, 0, k,
                                                                           pointwise=True, tile=tile)
    else:
        found = auto_gemm_tile(rec.device, kernel.precision, n, k) if tile is None and plain else None
    if found is None:
        return False
    views = [b.view, a.view, (c if c is not None else a).view, out.view, (residual if residual is not None else a).view]
    record_pointwise_staged(rec, kernel, *found, gemm_push(m, n, k, c is not None, *act), views, m, n, 1,
                            post_affine=False, residual=residual is not None, bias_columns=True)
    return True


def c_strides(c_shape: tuple[int, ...], m: int, n: int) -> tuple[int, int]:
    """Element strides of C along m and n when it is broadcast (unidirectionally) to (M, N)."""
    if len(c_shape) > 2:
        raise KernelArgumentError(f"gemm: C must be at most 2-D, got {c_shape}")
    cm, cn = (1, 1, *c_shape)[-2:]
    if cm not in (1, m) or cn not in (1, n):
        raise KernelArgumentError(f"gemm: C {c_shape} does not broadcast to ({m}, {n})")
    return (cn if cm != 1 else 0), (1 if cn != 1 else 0)


def record_gemm(
    rec: Recorder,
    a: Tensor,
    b: Tensor,
    out: Tensor,
    c: Tensor | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: bool = False,
    trans_b: bool = False,
    activation: str = "none",
    act_alpha: float = 0.0,
    act_beta: float = 0.0,
    tile: str | StagedTile | None = None,
    residual: Tensor | None = None,
) -> None:
    """ONNX Gemm: out = act(alpha · A' · B' + beta · C) (+ residual, of out's shape: an Add folded in), A' = aᵀ
    if trans_a (likewise B'), C broadcast to (M, N); the transposes are strides, never copies. `tile` forces a
    tile config (see TILES) of the GEMM, or a StagedTile pointwise_staged.comp's, which otherwise takes the
    products `auto_gemm_tile` gives it (wide ones on cooperative matrices: no transposes, alpha = beta = 1, C
    absent or one per column) and leaves a product with one output row or column to gemv.comp. Every tensor
    float32, or every one float16 (C too; accumulating and the epilogue in float32)."""
    storage(GEMM, a, b, out, c, residual)
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise KernelArgumentError(f"gemm needs 2-D operands, got {a.shape} and {b.shape}")
    m, k = a.shape[::-1] if trans_a else a.shape
    k_b, n = b.shape[::-1] if trans_b else b.shape
    if k != k_b:
        raise KernelArgumentError(f"gemm: inner dims differ: A' is ({m}, {k}), B' is ({k_b}, {n})")
    require_shape(out, (m, n), "gemm output")
    if residual is not None:
        require_shape(residual, (m, n), "gemm residual")
    c_m, c_n = c_strides(c.shape, m, n) if c is not None else (0, 0)
    act = activation_id(activation)
    if out.numel == 0:
        return
    a_m, a_k = (1, m) if trans_a else (k, 1)
    b_k, b_n = (1, k) if trans_b else (n, 1)
    strides = (a_m, a_k, b_k, b_n, c_m, c_n)
    if _staged(rec, a, b, out, c, residual, (m, n, k), tile, plain=not trans_a and not trans_b and alpha == 1.0
               and beta == 1.0 and (c is None or (c_m, c_n) == (0, 1)), act=(act, act_alpha, act_beta)):
        return
    assert not isinstance(tile, StagedTile)  # _staged recorded it or raised
    gemv = as_gemv(a, b, (m, n, k), strides) if tile is None else None
    if gemv is not None:
        matrix, vector, shape = gemv
        record_gemv(rec, matrix, vector, out, shape, Epilogue(activation, float(act_alpha), float(act_beta),
                                                               float(alpha), float(beta)), c, residual,
                    label="gemm")
        return
    epilogue = (int(c is not None), float(alpha), float(beta), act, float(act_alpha), float(act_beta))
    operands = (a, b, c if c is not None else a, out, residual)
    _record(rec, operands, (m, n, k), strides, ([1], [0], [0]), epilogue, pick_tile(m, n, 1, tile, k), "gemm")
