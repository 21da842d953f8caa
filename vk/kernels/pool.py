"""MaxPool / AveragePool (shaders/pool.comp) and GlobalAveragePool (shaders/global_avgpool.comp), 2-D NCHW."""

from __future__ import annotations

from collections.abc import Sequence

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import flat_groups, pack, require_shape, storage
from vkocr.engine.kernels.reduce import mean_local_size, row_groups
from vkocr.engine.kernels.spatial import four_pads, pair, require_nchw, require_positive_output
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.symbolic import dim
from vkocr.engine.tensor import Tensor

POOL = KernelDef("pool", ("r", "w"), 52)
GLOBAL_AVGPOOL = KernelDef("global_avgpool", ("r", "w"), 8)
FLAT_LOCAL = 128
MAX, AVERAGE = 0, 1


def pooled_len(size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, ceil_mode: bool) -> int:
    """ONNX pooled length; with ceil_mode a last window that would start inside the end padding is dropped."""
    span = size + pad_begin + pad_end - kernel
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def pool_output_shape(
    x_shape: Sequence[int], *, kernel: Sequence[int], strides: Sequence[int],
    pads: Sequence[int] = (0, 0, 0, 0), ceil_mode: bool = False,
) -> tuple[int, int, int, int]:
    """(N, C, OH, OW) of a 2-D pool; pads must be smaller than the kernel, as ONNX requires."""
    if len(x_shape) != 4:
        raise KernelArgumentError(f"pooling needs an NCHW input, got shape {tuple(x_shape)}")
    n, c, h, w = dim(x_shape[0]), dim(x_shape[1]), dim(x_shape[2]), dim(x_shape[3])
    (kh, kw), (sh, sw) = pair(kernel, "kernel_shape"), pair(strides, "strides")
    pt, pl, pb, pr = four_pads(pads)
    if pt >= kh or pb >= kh or pl >= kw or pr >= kw:  # (pads may be symbolic: each against the kernel)
        raise KernelArgumentError(f"pads {tuple(pads)} must be smaller than the kernel {(kh, kw)}")
    shape = (n, c, pooled_len(h, kh, sh, pt, pb, ceil_mode), pooled_len(w, kw, sw, pl, pr, ceil_mode))
    require_positive_output(shape, "pool")
    return shape


def _record_pool(
    rec: Recorder, mode: int, x: Tensor, out: Tensor, kernel: Sequence[int], strides: Sequence[int],
    pads: Sequence[int], ceil_mode: bool, count_include_pad: bool,
) -> None:
    pool = storage(POOL, x, out)
    _n, _c, h, w = require_nchw(x, "pool input")
    shape = pool_output_shape(x.shape, kernel=kernel, strides=strides, pads=pads, ceil_mode=ceil_mode)
    require_shape(out, shape, "pool output")
    (kh, kw), (sh, sw), pt_pl_pb_pr = pair(kernel, "kernel_shape"), pair(strides, "strides"), four_pads(pads)
    pipeline = rec.device.pipeline(pool, (FLAT_LOCAL, 1, 1, mode, int(count_include_pad)))
    push = pack("I12i", out.numel, h, w, shape[2], shape[3], kh, kw, sh, sw, *pt_pl_pb_pr)
    label = "max_pool" if mode == MAX else "average_pool"
    rec.dispatch(pipeline, [x.view, out.view], push, flat_groups(out.numel, FLAT_LOCAL), label=label)


def record_max_pool2d(rec: Recorder, x: Tensor, out: Tensor, *, kernel: Sequence[int], strides: Sequence[int],
                      pads: Sequence[int] = (0, 0, 0, 0), ceil_mode: bool = False) -> None:
    """ONNX MaxPool (no dilation, no indices output); pads (top, left, bottom, right)."""
    _record_pool(rec, MAX, x, out, kernel, strides, pads, ceil_mode, False)


def record_average_pool2d(rec: Recorder, x: Tensor, out: Tensor, *, kernel: Sequence[int],
                          strides: Sequence[int], pads: Sequence[int] = (0, 0, 0, 0), ceil_mode: bool = False,
                          count_include_pad: bool = False) -> None:
    """ONNX AveragePool; pads (top, left, bottom, right)."""
    _record_pool(rec, AVERAGE, x, out, kernel, strides, pads, ceil_mode, count_include_pad)


def record_global_average_pool(rec: Recorder, x: Tensor, out: Tensor) -> None:
    """ONNX GlobalAveragePool: (N, C, H, W) → (N, C, 1, 1), one workgroup per plane (mean_local_size wide)."""
    kernel = storage(GLOBAL_AVGPOOL, x, out)  # summed in float32 whatever the storage
    n, c, h, w = require_nchw(x, "global average pool input")
    require_shape(out, (n, c, 1, 1), "global average pool output")
    local = mean_local_size(n * c, h * w, rec.device.info.max_workgroup_invocations)
    pipeline = rec.device.pipeline(kernel, (local, 1, 1))
    rec.dispatch(pipeline, [x.view, out.view], pack("II", n * c, h * w), row_groups(n * c),
                 label="global_average_pool")
