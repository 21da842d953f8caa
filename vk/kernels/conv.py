"""ONNX Conv (2-D, NCHW, any group) as an implicit GEMM on the tiled GEMM core: shaders/conv2d.comp; a 1×1
convolution on a 1×1 map (squeeze-and-excitation blocks, a classifier's head) as a matrix-vector product:
shaders/gemv.comp; a k×k one with few output channels directly: shaders/conv2d_direct.comp."""

from __future__ import annotations

import math
from collections.abc import Sequence

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv_coopmat import CONV2D_COOPMAT, CoopmatTile, coopmat_shape, record_conv2d_coopmat
from vkocr.engine.kernels.conv_direct import (
    CONV2D_DIRECT,
    DIRECT_MAX_COUT,
    DIRECT_MAX_WEIGHTS,
    DIRECT_MIN_GROUPS,
    WEIGHT_BYTES,
    DirectLayout,
    direct_groups,
    record_conv2d_direct,
)
from vkocr.engine.kernels.conv_taps import (
    CONV2D_TAPS,
    TapsTile,
    choose_taps_tile,
    enough_groups,
    record_conv2d_taps,
)
from vkocr.engine.kernels.gemv import Epilogue, GemvShape, record_gemv
from vkocr.engine.kernels.launch import (
    activation_id,
    check_groups,
    conv2d_push,
    conv2d_push_parts,
    pack,
    require_shape,
    storage,
)
from vkocr.engine.kernels.matmul import TILES, GemmTile, pick_tile
from vkocr.engine.kernels.pointwise_coopmat import FragmentTile, fragment_tile, record_pointwise_coopmat
from vkocr.engine.kernels.pointwise_staged import (
    POINTWISE_STAGED,
    StagedTile,
    auto_staged_tile,
    record_pointwise_staged,
    staged_tile,
)
from vkocr.engine.kernels.spatial import conv_out_len, four_pads, pair
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

CONV2D = KernelDef("conv2d", ("r", "r", "r", "w", "r"), 76)  # x, w, bias, out, residual
# Pointwise convolutions shallower than this take the thin tile, the most workgroups, where it still makes
# MIN_GROUPS of them (pick_tile's most_groups): on the H100 det's 1×1
# convolutions of 48..96 input channels at 92×128..184×256 ran 5-25 % faster on it than on the wide, small or
# large tile pick_tile gives them (scripts/sweep_conv_tiles.py, benchmarks/2026-12-05-h100-sweep-conv-tiles.json).
SHALLOW_POINTWISE_K = 192
# ... and of those, the ones with at least this many output channels store each thread's 4 columns of a row as
# one vector (conv2d.comp's VECTOR_STORES): on the H100 det's 24 -> 48 and 48 -> 96 ran 10-20 % faster so. With
# vectors everywhere, det's 96 -> 24, rec's 384 -> 120, its strided 3×3 and its MatMuls ran 10-38 % slower: det 1 %
# faster, rec 1.5 % slower in all (benchmarks/2026-12-06-h100-vector-stores-session31.json).
VECTOR_STORE_MIN_COUT = 48


def conv_output_shape(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    *,
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    group: int = 1,
) -> tuple[int, int, int, int]:
    """(N, Cout, Hout, Wout) of ONNX Conv; KernelArgumentError for inconsistent shapes or an empty output."""
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise KernelArgumentError(f"conv2d needs 4-D x and w, got {tuple(x_shape)} and {tuple(w_shape)}")
    n, cin, h, wd = x_shape
    cout, cin_g, kh, kw = w_shape
    if group < 1 or cin % group != 0 or cout % group != 0 or cin_g != cin // group:
        raise KernelArgumentError(f"conv2d: x {tuple(x_shape)} / w {tuple(w_shape)} inconsistent with group={group}")
    (sh, sw), (dh, dw) = pair(strides, "conv2d strides"), pair(dilations, "conv2d dilations")
    pt, pl, pb, pr = four_pads(pads)
    oh = conv_out_len(h, kh, sh, dh, pt + pb)
    ow = conv_out_len(wd, kw, sw, dw, pl + pr)
    if n <= 0 or cout <= 0 or oh <= 0 or ow <= 0 or kh <= 0 or kw <= 0 or cin_g <= 0:
        raise KernelArgumentError(f"conv2d: empty output or kernel: x {tuple(x_shape)}, w {tuple(w_shape)}, "
                                  f"output ({n}, {cout}, {oh}, {ow})")
    return n, cout, oh, ow


class Conv2d:
    """record_conv2d in two parts: what the weights and attributes decide, checked and packed once here, and
    `record()`, what each input shape adds. A model prepares each Conv node once and records it for every new
    input shape (vk/graph/lower.py, `prepare`)."""

    def __init__(
        self,
        w_shape: Sequence[int],
        *,
        has_bias: bool = False,
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        group: int = 1,
        activation: str = "none",
        alpha: float = 0.0,
        beta: float = 0.0,
        post_affine: tuple[float, float] | None = None,
    ) -> None:
        if len(w_shape) != 4:
            raise KernelArgumentError(f"conv2d needs 4-D w, got {tuple(w_shape)}")
        cout, cin_g, kh, kw = (int(d) for d in w_shape)
        if group < 1 or cout % group:
            raise KernelArgumentError(f"conv2d: w {tuple(w_shape)} inconsistent with group={group}")
        if min(cout, cin_g, kh, kw) <= 0:
            raise KernelArgumentError(f"conv2d: empty kernel {tuple(w_shape)}")
        (sh, sw), (dh, dw) = pair(strides, "conv2d strides"), pair(dilations, "conv2d dilations")
        pt, pl, pb, pr = four_pads(pads)
        act = activation_id(activation)
        self.w_shape = (cout, cin_g, kh, kw)
        self.has_bias = has_bias
        self.group = group
        self._strides, self._pads, self._dilations = (sh, sw), (pt, pl, pb, pr), (dh, dw)
        self.cout_g = cout // group
        self._k = cin_g * kh * kw  # the GEMM's depth
        pointwise = kh == kw == sh == sw == 1 and pt == 0 and pl == 0 and pb == 0 and pr == 0  # (pads may be symbolic)
        # the kernel size is specialised (constant division); shapes and the rest travel as push constants
        self._constants = (int(pointwise), kh, kw, int(post_affine is not None))
        self._pointwise = pointwise
        self._vector_stores = pointwise and self._k < SHALLOW_POINTWISE_K and self.cout_g >= VECTOR_STORE_MIN_COUT
        # every pointwise convolution fetches its input four columns per load (VECTOR_LOADS): the tile holds the
        # same values in the same places, so the sums are the same bit for bit. det's Conv.9 and rec's 384 -> 120s
        # ran 5-6 µs slower so on an H100, the others faster (BENCHMARKS session 43); no rule by shape separates
        # Conv.9 from Conv.12, which has its shape, weights' shape, residual and aligned views and ran faster
        self._vector_loads = pointwise
        self._epilogue = Epilogue(activation, float(alpha), float(beta), post_affine=post_affine)
        scale, shift = post_affine if post_affine is not None else (1.0, 0.0)
        self._push_parts = conv2d_push_parts(group, cin_g, self.cout_g, (sh, sw), (dh, dw), (pt, pl), has_bias, act,
                                             alpha, beta, scale, shift)
        # the direct kernel's layout, where it can take these weights (group 1, few output channels)
        self._direct = DirectLayout.of(cout, cin_g, kh * kw) if group == 1 else None
        # ... and whether it takes it unasked, as far as the weights decide (the workgroups: per input shape)
        self._direct_unasked = (self._direct is not None and kh * kw > 1
                                and self.cout_g * self._k <= DIRECT_MAX_WEIGHTS)
        self._post_affine = post_affine is not None
        self._direct_window = (kh, kw, sh, sw, dh, dw, pt, pl)
        self._direct_epilogue = pack("2I4f", int(has_bias), act, float(alpha), float(beta), float(scale),
                                     float(shift))

    def record(self, rec: Recorder, x: Tensor, w: Tensor, out: Tensor, b: Tensor | None = None, *,
               residual: Tensor | None = None, tile: str | GemmTile | None = None, coopmat: bool | None = None,
               coopmat_tile: CoopmatTile | FragmentTile | StagedTile | None = None, direct: bool | None = None,
               taps: bool | None = None,
               taps_tile: TapsTile | None = None) -> None:
        """One GEMM per (image, group) for input x (N, Cin, H, W), plus `residual` (out's shape) in the epilogue when
        given; `tile` forces a tile config of the SIMT kernel. Every tensor stores float32, or every one float16
        (accumulating in float32 all the same). `coopmat`: None lets vk/kernels/conv_coopmat.py decide whether
        cooperative matrices run it, False keeps the SIMT kernel, True asks for them (an error where the device
        has none); `coopmat_tile` forces their tile (tests), a FragmentTile the fragment kernel
        (vk/kernels/pointwise_coopmat.py), a StagedTile pointwise_staged.comp (vk/kernels/pointwise_staged.py),
        which unasked takes the pointwise convolutions `auto_staged_tile` gives it, before the fragment kernel
        takes the fp16 ones it can, before the other kernels are considered. A pointwise conv (group 1) on a 1×1
        map is a matrix-vector product: gemv.comp runs it, unless `tile` or `coopmat=True` asks for a GEMM.
        `direct`: None sends a k×k convolution of group 1 with at most DIRECT_MAX_WEIGHTS weights that makes
        DIRECT_MIN_GROUPS workgroups to conv2d_direct.comp (unless `tile` or `coopmat=True` asks for a GEMM),
        True sends any convolution of group 1 that DirectLayout can hold there, False none. `taps`: None lets
        vk/kernels/conv_taps.py decide whether a k×k convolution of group 1 (in fp32 storage, one the direct
        kernel does not take unasked) runs tap by tap on cooperative matrices (a tile of its rule that makes
        AUTO_MIN_GROUPS workgroups, unless another kernel is asked for), True asks for it (an error where it
        cannot), False never; `taps_tile` forces its tile (sweeps)."""
        kernel = storage(CONV2D, x, w, out, b, residual)
        if tuple(w.shape) != self.w_shape or (b is not None) != self.has_bias:
            raise KernelArgumentError(f"conv2d prepared for w {self.w_shape} (bias: {self.has_bias}), given "
                                      f"{tuple(w.shape)} (bias: {b is not None})")
        shape = conv_output_shape(x.shape, self.w_shape, strides=self._strides, pads=self._pads,
                                  dilations=self._dilations, group=self.group)
        require_shape(out, shape, "conv2d output")
        if residual is not None:
            require_shape(residual, shape, "conv2d residual")
        n, cout, oh, ow = shape
        if b is not None:
            require_shape(b, (cout,), "conv2d bias")
        h, wd = x.shape[2], x.shape[3]
        if self._pointwise and self.group == 1 and tile is None and coopmat is not True and not taps and h * wd == 1:
            # one output column per image: y = W · x, a whole workgroup on each row's K
            gemv = GemvShape(rows=cout, k=self._k, row_stride=self._k, k_stride=1, batches=n, batch_x=self._k)
            record_gemv(rec, w, x, out, gemv, self._epilogue, b, residual, label="conv2d")
            return
        # unasked, the direct kernel keeps the fp32 convolutions it takes: det's 2×2 stems ran faster there than tap
        # by tap in fp32 on the H200 (0.058 against 0.090 ms for 24 -> 12); in fp16 storage tap by tap won on the
        # H100 (24 -> 12: 0.030 against 0.050 ms; 12 -> 24: 0.031 against 0.035), where the taps kernel takes them
        if taps or (taps is None and tile is None and coopmat is None and direct is None and self.group == 1
                    and not (self._direct_unasked and kernel.precision == "fp32")):
            if self.group != 1:
                raise KernelArgumentError(f"conv2d_taps takes group 1, not w {self.w_shape} in {self.group} groups")
            taps_chosen = choose_taps_tile(rec.device, kernel.precision, cout, self.w_shape[1],
                                           self._direct_window[:6], want=taps)
            if taps_chosen is not None and (taps or enough_groups(taps_chosen, rec.device.coopmat_shape, n, oh, ow)):
                record_conv2d_taps(rec, storage(CONV2D_TAPS, x, w, out, b, residual), taps_tile or taps_chosen,
                                   self._direct_window[:6], self._direct_window[6:], self._post_affine, x, w, out, b,
                                   residual, self._direct_epilogue)
                return
        if direct is None:
            direct = (tile is None and coopmat is not True and self._direct_unasked
                      and math.prod(direct_groups(n, oh, ow)) >= DIRECT_MIN_GROUPS)
        if direct:
            if self._direct is None:
                raise KernelArgumentError(f"conv2d_direct takes group 1, at most {DIRECT_MAX_COUT} output "
                                          f"channels and {WEIGHT_BYTES} bytes of weights per input channel, not "
                                          f"w {self.w_shape} in {self.group} groups")
            record_conv2d_direct(rec, storage(CONV2D_DIRECT, x, w, out, b, residual), self._direct,
                                 self._direct_window, self._post_affine, x, w, out, b, residual,
                                 self._direct_epilogue)
            return
        push = conv2d_push(self._push_parts, h, wd, oh, ow)
        views = [x.view, w.view, (b if b is not None else w).view, out.view,
                 (residual if residual is not None else w).view]
        unasked = coopmat is None and tile is None and coopmat_tile is None and self._pointwise
        found_staged = None
        if isinstance(coopmat_tile, StagedTile):
            found_staged = staged_tile(rec.device, kernel.precision, self.cout_g, self._k, pointwise=self._pointwise,
                                       tile=coopmat_tile)
        elif unasked:
            found_staged = auto_staged_tile(rec.device, kernel.precision, self.cout_g, self._k, oh * ow,
                                            n * self.group)
        if found_staged is not None:
            matrix, staged = found_staged
            record_pointwise_staged(rec, storage(POINTWISE_STAGED, x, w, out, b, residual), matrix, staged, push,
                                    views, self.cout_g, oh * ow, n * self.group, post_affine=self._post_affine,
                                    residual=residual is not None)
            return
        fragments = isinstance(coopmat_tile, FragmentTile)
        if fragments or unasked:
            found = fragment_tile(rec.device, kernel.precision, self.cout_g, self._k, oh * ow,
                                  pointwise=self._pointwise, batches=n * self.group, want=True if fragments else None,
                                  tile=coopmat_tile if isinstance(coopmat_tile, FragmentTile) else None)
            if found is not None:
                record_pointwise_coopmat(rec, *found, push, views, self.cout_g, oh * ow, n * self.group,
                                         post_affine=self._post_affine, residual=residual is not None)
                return
        chosen = pick_tile(self.cout_g, oh * ow, n * self.group, tile, self._k,
                           most_groups=self._pointwise and self._k < SHALLOW_POINTWISE_K)
        # unasked, a problem too small for the other tiles keeps the sliced one: on the H200 the matrices ran the
        # page-orientation model's small 1×1 convolutions slower (0.393 ms against 0.299 for the model)
        want = False if tile is not None or (coopmat is None and chosen == TILES["sliced"]) else coopmat
        mnk = coopmat_shape(rec.device, kernel.precision, self.cout_g, self._k, want=want,
                            pointwise=bool(self._constants[0]), n=oh * ow, batches=n * self.group)
        if mnk is not None:
            record_conv2d_coopmat(rec, storage(CONV2D_COOPMAT, x, w, out, b, residual), mnk, self._constants, push,
                                  views, self.cout_g, oh * ow, n * self.group,
                                  coopmat_tile if isinstance(coopmat_tile, CoopmatTile) else None,
                                  residual=residual is not None)
            return
        groups = chosen.groups(self.cout_g, oh * ow, n * self.group)
        check_groups(rec, groups, "conv2d")
        pipeline = rec.device.pipeline(kernel, (*chosen.constants(), *self._constants, int(residual is not None),
                                                int(self._vector_stores), int(self._vector_loads)))
        rec.dispatch(pipeline, views, push, groups, label="conv2d")


def record_conv2d(
    rec: Recorder,
    x: Tensor,
    w: Tensor,
    out: Tensor,
    b: Tensor | None = None,
    *,
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    group: int = 1,
    activation: str = "none",
    alpha: float = 0.0,
    beta: float = 0.0,
    post_affine: tuple[float, float] | None = None,
    residual: Tensor | None = None,
    tile: str | None = None,
    coopmat: bool | None = None,
) -> None:
    """out = act(conv(x, w) + b) (· scale + shift when `post_affine` = (scale, shift), in one fma) (+ residual,
    of out's shape): x (N, Cin, H, W), w (Cout, Cin/group, kh, kw), b (Cout,), pads (top, left, bottom, right).
    One GEMM per (image, group); `tile` forces a tile config."""
    Conv2d(w.shape, has_bias=b is not None, strides=strides, pads=pads, dilations=dilations, group=group,
           activation=activation, alpha=alpha, beta=beta, post_affine=post_affine).record(rec, x, w, out, b,
                                                                                           residual=residual, tile=tile,
                                                                                           coopmat=coopmat)
