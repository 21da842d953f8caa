"""conv2d_direct.comp (group 1, at most 64 output channels, computed directly) against NumPy on fresh random inputs
(outputs poisoned with NaN), and which convolutions vk/kernels/conv.py sends to it unasked."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tests.engine.kernels.harness import TOLERANCES, check, fresh_rng, poisoned, release, storage_ref
from tests.engine.kernels.test_conv import Case
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv import Conv2d
from vkocr.engine.kernels.conv_direct import (
    DIRECT_MAX_COUT,
    DIRECT_MAX_WEIGHTS,
    DIRECT_MIN_GROUPS,
    WEIGHT_BYTES,
    DirectLayout,
    direct_groups,
)
from vkocr.engine.ops.conv import conv2d
from vkocr.engine.recorder import Recorder

P1 = (1, 1, 1, 1)
# Shapes chosen to reach every path of the shader: output channels not a multiple of 8 (blocks half empty), input
# channels over several shared-memory chunks with a partial last one, maps wider than one workgroup's 64 columns
# and not a multiple of 4 (interior and border columns, invocations past the edge), padding on each side, strides,
# dilations, rectangular kernels, batches.
CASES = [
    Case((1, 3, 37, 70), 24, (3, 3), strides=(2, 2), pads=P1),                   # a stem: 3 -> 24, stride 2
    Case((2, 5, 17, 131), 12, (2, 2)),                                           # 2×2, no padding, batch 2
    Case((1, 12, 19, 67), 24, (2, 2), pads=(0, 0, 1, 1)),                        # padding bottom/right only
    Case((1, 96, 9, 21), 64, (3, 3), pads=P1),                                   # 8 blocks; 96 = 13 chunks of 7 + 5
    Case((1, 48, 15, 77), 48, (3, 3), strides=(2, 2), pads=P1, bias=False),
    Case((1, 6, 21, 23), 7, (3, 3), pads=(2, 2, 2, 2), dilations=(2, 2)),        # dilated, one partial block
    Case((1, 4, 16, 15), 1, (3, 5), strides=(2, 1), pads=(0, 2, 2, 1)),         # one channel, mixed strides
    Case((2, 3, 23, 21), 9, (7, 7), strides=(2, 2), pads=(3, 3, 3, 3)),
    Case((1, 3, 2, 3), 5, (3, 3), pads=P1),                                      # output smaller than a workgroup
    Case((1, 8, 13, 11), 16, (1, 1)),                                            # pointwise (asked for)
    Case((1, 8, 13, 11), 12, (1, 1), strides=(2, 2), pads=(1, 0, 0, 2)),         # 1×1 strided, padded (asked for)
]


def inputs(case: Case, rng: np.random.Generator, dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    x = rng.uniform(-1.0, 1.0, case.x).astype(dtype)
    w = rng.uniform(-1.0, 1.0, (case.cout, case.x[1] // case.group, *case.kernel)).astype(dtype)
    b = rng.uniform(-1.0, 1.0, (case.cout,)).astype(dtype) if case.bias else None
    return x, w, b


def conv_attrs(case: Case) -> dict[str, Any]:
    return dict(strides=case.strides, pads=case.pads, dilations=case.dilations)


def run_direct(device: Device, case: Case, dtype: type, *, residual: bool = False,
               post_affine: tuple[float, float] | None = None, direct: bool | None = True) -> str:
    """The case through Conv2d against NumPy; the label of the one dispatch it recorded."""
    rng, seed = fresh_rng()
    x_np, w_np, b_np = inputs(case, rng, dtype)
    attrs = {**conv_attrs(case), "group": case.group, **case.attrs}
    exact = conv2d(x_np.astype(np.float32), w_np.astype(np.float32),
                   b_np.astype(np.float32) if b_np is not None else None, **attrs)
    if post_affine is not None:
        exact = exact * np.float32(post_affine[0]) + np.float32(post_affine[1])
    r_np = rng.uniform(-1.0, 1.0, exact.shape).astype(dtype) if residual else None
    if r_np is not None:
        exact = exact + r_np.astype(np.float32)
    ref = storage_ref(exact, dtype)
    x, w, out = device.upload(x_np), device.upload(w_np), poisoned(device, ref.shape, dtype)
    b = device.upload(b_np) if b_np is not None else None
    r = device.upload(r_np) if r_np is not None else None
    conv = Conv2d(w_np.shape, has_bias=b is not None, **attrs, post_affine=post_affine)
    with Recorder(device, profile=True) as rec:
        conv.record(rec, x, w, out, b, residual=r, direct=direct)
        rec.run()
        labels = [t.label for t in rec.timings()]
    what = f"conv2d_direct {case} {np.dtype(dtype)} residual={residual} post={post_affine}"
    check(device.download(out), ref, what, seed, TOLERANCES[np.dtype(dtype)])
    release(device, x, w, out, *(t for t in (b, r) if t is not None))
    assert len(labels) == 1, labels
    return labels[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_direct_conv_matches_numpy(device: Device, case: Case, dtype: type) -> None:
    assert run_direct(device, case, dtype) == "conv2d_direct"


@pytest.mark.parametrize(
    ("activation", "alpha", "beta"),
    [("relu", 0.0, 0.0), ("clip", 0.0, 6.0), ("hardsigmoid", 1 / 6, 0.5), ("hardswish", 1 / 6, 0.5),
     ("sigmoid", 0.0, 0.0), ("leakyrelu", 0.1, 0.0), ("gelu", 0.0, 0.0), ("silu", 0.0, 0.0)],
)
def test_direct_conv_fused_activation(device: Device, activation: str, alpha: float, beta: float) -> None:
    case = Case((1, 6, 12, 70), 20, (3, 3), pads=P1, attrs={"activation": activation, "alpha": alpha, "beta": beta})
    run_direct(device, case, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["fp32", "fp16"])
def test_direct_conv_post_affine_then_residual(device: Device, dtype: type) -> None:
    """act(conv + b) · scale + shift + r: the epilogue's order, as conv2d.comp applies it."""
    case = Case((2, 10, 11, 69), 24, (3, 3), strides=(2, 2), pads=P1, attrs={"activation": "hardswish",
                                                                            "alpha": 1 / 6, "beta": 0.5})
    run_direct(device, case, dtype, residual=True, post_affine=(-0.75, 0.25))


def test_unasked_stems_go_direct(device: Device) -> None:
    """A k×k convolution of group 1 with at most DIRECT_MAX_WEIGHTS weights that makes DIRECT_MIN_GROUPS
    workgroups: conv2d_direct. Deeper ones, smaller maps, other groups, 1×1 convolutions, and any where a
    tile, the matrices or the GEMM were asked for: the GEMM kernels."""
    stem = Case((1, 3, 128, 512), 24, (3, 3), strides=(2, 2), pads=P1)  # 648 weights, 8 × 16 workgroups
    assert 24 * 3 * 9 <= DIRECT_MAX_WEIGHTS and math.prod(direct_groups(1, 64, 256)) >= DIRECT_MIN_GROUPS
    assert run_direct(device, stem, np.float32, direct=None) == "conv2d_direct"
    assert run_direct(device, stem, np.float32, direct=False) == "conv2d"
    deep = Case((1, 96, 64, 256), 24, (3, 3), pads=P1)  # 20736 weights
    assert run_direct(device, deep, np.float32, direct=None) == "conv2d"
    small_map = Case((1, 3, 20, 70), 24, (3, 3), strides=(2, 2), pads=P1)  # 2 × 3 workgroups
    assert run_direct(device, small_map, np.float32, direct=None) == "conv2d"
    grouped = Case((1, 8, 64, 256), 8, (3, 3), pads=P1, group=2)
    assert run_direct(device, grouped, np.float32, direct=None) == "conv2d"
    assert run_direct(device, Case((1, 8, 64, 256), 16, (1, 1)), np.float32, direct=None) == "conv2d"


def test_direct_refuses_what_it_cannot_run(device: Device) -> None:
    """Asked for, the direct kernel refuses, with a clear error, more than DIRECT_MAX_COUT output channels, groups,
    and one input channel's weights over WEIGHT_BYTES (1 -> 8 channels at 45×45: a pipeline the device refuses)."""
    assert 45 * 45 * 8 * 4 > WEIGHT_BYTES
    for w_shape, group, pads in (((DIRECT_MAX_COUT + 8, 8, 3, 3), 1, P1), ((8, 4, 3, 3), 2, P1),
                                 ((8, 1, 45, 45), 1, (22, 22, 22, 22))):
        x = device.upload(np.ones((1, w_shape[1] * group, 6, 6), np.float32))
        w = device.upload(np.ones(w_shape, np.float32))
        out = device.tensor((1, w_shape[0], 6, 6), np.float32)
        with pytest.raises(KernelArgumentError, match="conv2d_direct takes group 1"), Recorder(device) as rec:
            Conv2d(w_shape, pads=pads, group=group).record(rec, x, w, out, direct=True)
        release(device, x, w, out)


def test_weight_chunks_fit_shared_memory() -> None:
    """A chunk of input channels' weights never passes WEIGHT_BYTES (what the shader's shared array is sized for)
    and holds at least one channel; every output channel is in one workgroup's blocks. Weights it cannot hold (too
    many channels, or one input channel's over WEIGHT_BYTES) have no layout: the GEMM runs them."""
    for cout in (1, 7, 8, 24, 48, 64, 65):
        for cin in (1, 3, 96, 1000):
            for taps in (1, 4, 9, 49, 64, 81, 2025):
                layout = DirectLayout.of(cout, cin, taps)
                per_channel = taps * -(-cout // 8) * 8 * 4
                if cout > DIRECT_MAX_COUT or per_channel > WEIGHT_BYTES:
                    assert layout is None
                    continue
                assert layout is not None
                assert layout.blocks * 8 >= cout and layout.blocks <= 8
                assert 1 <= layout.ci_chunk <= cin and layout.ci_chunk * per_channel <= WEIGHT_BYTES


def test_a_kernel_too_large_for_shared_memory_takes_the_gemm(device: Device) -> None:
    """One input channel's weights over WEIGHT_BYTES (1 -> 8 channels at 45×45): unasked, the GEMM."""
    case = Case((1, 1, 64, 300), 8, (45, 45), pads=(22, 22, 22, 22))
    assert 45 * 45 * 8 * 4 > WEIGHT_BYTES and 8 * 45 * 45 > DIRECT_MAX_WEIGHTS
    assert run_direct(device, case, np.float32, direct=None) == "conv2d"
