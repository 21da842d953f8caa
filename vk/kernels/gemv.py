"""Matrix-vector products, a whole workgroup reducing over K: shaders/gemv.comp.

The convolutions and matrix products whose GEMM has one output column or one output row (a 1×1 convolution on a
1×1 map, a classifier's [1, K] @ [K, N]) come here from vk/kernels/conv.py and vk/kernels/matmul.py: the tiled
GEMM core would run them on a few workgroups walking K one tile after another.
"""

from __future__ import annotations

from dataclasses import dataclass

from vkocr.engine.kernels.launch import activation_id, check_groups, pack, storage
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

GEMV = KernelDef("gemv", ("r", "r", "r", "w", "r"), 64)  # matrix, vector, bias, out, residual
THREADS = 256  # invocations per workgroup: ROWS rows × THREADS / ROWS lanes
DEEP_K = 256  # from this depth a row gets 64 lanes
SHALLOW_K = 32  # below this depth 4 lanes a row (64 rows a workgroup), 16 lanes between


@dataclass(frozen=True)
class Epilogue:
    """What happens to a row's sum before its one rounding on store, in this order: alpha · sum (+ beta ·
    bias), the activation (an ACTIVATION_IDS name with its alpha and beta), `post_affine` = (scale, shift) in
    one fma, the residual add. A conv's is alpha = beta = 1 (exact); a Gemm's has its alpha and beta."""

    activation: str = "none"
    act_alpha: float = 0.0
    act_beta: float = 0.0
    alpha: float = 1.0
    beta: float = 1.0
    post_affine: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        activation_id(self.activation)  # KernelArgumentError for an unknown one, before anything is recorded


@dataclass(frozen=True)
class GemvShape:
    """y[z, r] = Σ_k A[z·batch_a + r·row_stride + k·k_stride] · x[z·batch_x + k·x_stride], r < rows, z <
    batches; the bias is read at r·bias_stride (0: one value for every row). Sizes may be symbolic."""

    rows: int
    k: int
    row_stride: int
    k_stride: int
    x_stride: int = 1
    batches: int = 1
    batch_a: int = 0
    batch_x: int = 0
    bias_stride: int = 1

    def row_fast(self) -> bool:
        """Whether consecutive invocations should take consecutive rows (A stored row index fastest)."""
        return self.row_stride == 1 and self.k_stride != 1

    def rows_per_group(self) -> int:
        """ROWS of gemv.comp: all 256 lanes on K for one row; rows stored fastest, enough rows to read whole
        runs of them; K stored fastest, 64 lanes on a deep K and more rows where K is shallow."""
        if self.rows == 1:
            return 1
        if self.row_fast():
            return 4 if self.rows <= 4 else 16 if self.rows <= 16 else 64
        return 4 if self.k >= DEEP_K else 16 if self.k >= SHALLOW_K else 64

    def groups(self, rows_per_group: int) -> tuple[int, int, int]:
        return -(-self.rows // rows_per_group), 1, self.batches


def record_gemv(rec: Recorder, matrix: Tensor, vector: Tensor, out: Tensor, shape: GemvShape,
                epilogue: Epilogue = Epilogue(), bias: Tensor | None = None, residual: Tensor | None = None, *,
                label: str = "gemv") -> None:
    """out[z, r] = epilogue(Σ_k A[z, r, k] · x[z, k]) as `shape` addresses `matrix` and `vector`; out (and
    `residual`) hold batches × rows elements, row fastest. Callers check shapes; every tensor float32, or every
    one float16 (accumulating in float32 all the same)."""
    kernel = storage(GEMV, matrix, vector, out, bias, residual)
    rows_per_group = shape.rows_per_group()
    groups = shape.groups(rows_per_group)
    check_groups(rec, groups, label)
    constants = (THREADS, 1, 1, rows_per_group, int(shape.row_fast()), int(epilogue.post_affine is not None),
                 int(residual is not None))
    scale, shift = epilogue.post_affine if epilogue.post_affine is not None else (1.0, 0.0)
    push = pack("9I2fI4f", shape.rows, shape.k, shape.row_stride, shape.k_stride, shape.x_stride, shape.batch_a,
                shape.batch_x, int(bias is not None), shape.bias_stride, float(epilogue.alpha),
                float(epilogue.beta), activation_id(epilogue.activation), float(epilogue.act_alpha),
                float(epilogue.act_beta), float(scale), float(shift))
    views = [matrix.view, vector.view, (bias if bias is not None else matrix).view, out.view,
             (residual if residual is not None else matrix).view]
    rec.dispatch(rec.device.pipeline(kernel, constants), views, push, groups, label=label)
