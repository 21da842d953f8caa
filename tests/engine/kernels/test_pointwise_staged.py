"""The staged kernel of pointwise convolutions (vk/kernels/pointwise_staged.py, shaders/pointwise_staged.comp):
what it refuses, that its launch stays symbolic, and (where the test device has cooperative matrices: Mesa 26's
lavapipe, `build/tools/lavapipe/run .venv/bin/python -m pytest -q tests/engine/kernels/test_pointwise_staged.py`,
as test.sh runs it) its answers against NumPy."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from tests.engine.kernels.test_conv_coopmat import (
    ENV,
    fake_device,
    fake_recorder,
    fake_tensor,
    info,
    traced_conv_launch,
)
from tests.engine.kernels.test_matmul import run_gemm
from tests.engine.kernels.test_pointwise_coopmat import check_pointwise_case
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv import Conv2d
from vkocr.engine.kernels.matmul import record_gemm
from vkocr.engine.kernels.pointwise_staged import (
    GEMM_MIN_N,
    SQUARE,
    TALL_16,
    WIDE,
    StagedTile,
    auto_gemm_tile,
    auto_staged_tile,
    staged_tile,
)

SMALL = StagedTile(sg_m=1, sg_n=1, fm=1, fn=1, ksteps=1)  # 16 × 16 × 16: many workgroups and steps on small cases
DEEP = StagedTile(sg_m=2, sg_n=2, fm=2, fn=1, ksteps=4)  # 64 × 32 × 64
WIDE_16 = replace(WIDE, ksteps=1)  # WIDE 16 deep: fits fp32's hi and lo tiles


@pytest.fixture(autouse=True)
def switch_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


def test_it_takes_pointwise_convolutions_eight_deep(monkeypatch: pytest.MonkeyPatch) -> None:
    h200 = fake_device(info())
    assert staged_tile(h200, "fp16", 768, 384, pointwise=True) == ((16, 16, 16), WIDE)
    assert staged_tile(h200, "fp16", 24, 8, pointwise=True, tile=SMALL) == ((16, 16, 16), SMALL)
    # fp32 tiles hold hi and lo halves: WIDE 32 deep needs 63,488 bytes of the 49,152, 16 deep 37,888
    assert staged_tile(h200, "fp32", 768, 384, pointwise=True, tile=WIDE_16) == ((16, 16, 16), WIDE_16)
    refusals = [({"pointwise": False}, "not a 1×1"), ({"k": 44}, "K = 44 is not a multiple of 8"),
                ({"tile": StagedTile(sg_m=4, sg_n=4, fm=2, fn=4, ksteps=8)}, "shared memory"),
                ({"precision": "fp32", "tile": WIDE}, "needs 63488 B of shared memory")]
    for change, why in refusals:
        args: dict[str, Any] = {"precision": "fp16", "m": 96, "k": 48, "pointwise": True, **change}
        with pytest.raises(KernelArgumentError, match=why):
            staged_tile(h200, args.pop("precision"), args.pop("m"), args.pop("k"), **args)
    with pytest.raises(KernelArgumentError, match="no cooperative matrix"):
        staged_tile(fake_device(info(coopmat_shapes=())), "fp16", 96, 48, pointwise=True)
    monkeypatch.setenv(ENV, "0")
    with pytest.raises(KernelArgumentError, match="no cooperative matrix"):
        staged_tile(h200, "fp16", 96, 48, pointwise=True)


def test_the_conv_records_it_only_where_asked() -> None:
    dispatched: list[tuple[Any, ...]] = []
    rec = fake_recorder(dispatched)

    def kernel_for(**record: Any) -> tuple[str, Any]:
        Conv2d((96, 48, 1, 1)).record(rec, fake_tensor((2, 48, 92, 128), np.float16),  # type: ignore[arg-type]
                                      fake_tensor((96, 48, 1, 1), np.float16),  # type: ignore[arg-type]
                                      fake_tensor((2, 96, 92, 128), np.float16), **record)  # type: ignore[arg-type]
        return str(dispatched[-1][0][0]), dispatched[-1][2]

    assert kernel_for()[0] == "pointwise_coopmat.fp16"
    assert kernel_for(coopmat_tile=WIDE) == ("pointwise_staged.fp16", (92, 2, 2))  # 11776 / 128 columns, 96 / 64 rows


@pytest.mark.parametrize("record", [{"coopmat_tile": WIDE}, {}], ids=["asked", "unasked"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["fp16", "fp32"])
def test_the_staged_launch_stays_symbolic(dtype: type, record: dict[str, Any]) -> None:
    """A 1×1 192 -> 384 convolution at det's 46×64 under a shape-class trace: no dimension is pinned, and N's
    remainder by 8 does not split the class (other sizes of it: 46×60, 40×64, 45×61)."""
    if dtype == np.float32 and record:
        record = {"coopmat_tile": WIDE_16}
    traced = traced_conv_launch((384, 192, 1, 1), {}, lambda h, w: (h, w), dtype, record,
                                ((46, 64), (46, 60), (40, 64), (45, 61)))
    suffix = ".fp16" if dtype == np.float16 else ""
    assert (traced[0][0], traced[3]) == ("pointwise_staged" + suffix, "pointwise_staged")


def test_unasked_it_takes_the_deep_ones() -> None:
    """fp16: SQUARE from K = 192 on, the fragment kernel below; fp32: TALL_16 from K = 192 on where
    conv2d_coopmat.comp's WIDE makes enough workgroups, its TALL tile where not (det's 768 -> 384 at 23×32)."""
    h200 = fake_device(info())
    assert auto_staged_tile(h200, "fp16", 96, 192, 92 * 128, 1) == ((16, 16, 16), SQUARE)
    assert auto_staged_tile(h200, "fp16", 384, 768, 23 * 32, 1) == ((16, 16, 16), SQUARE)
    assert auto_staged_tile(h200, "fp16", 192, 96, 92 * 128, 1) is None  # 96 deep: no faster in the models
    assert auto_staged_tile(h200, "fp32", 192, 96, 12 * 80, 16) is None
    assert auto_staged_tile(h200, "fp32", 384, 384, 3 * 80, 16) == ((16, 16, 16), TALL_16)
    assert auto_staged_tile(h200, "fp32", 384, 768, 23 * 32, 1) is None
    assert auto_staged_tile(h200, "fp16", 120, 196, 40, 16) is None  # K not a multiple of 8
    assert auto_staged_tile(fake_device(info(coopmat_shapes=())), "fp16", 384, 768, 736, 1) is None


# (x shape, output channels, group, tile, conv attributes)
CASES = [
    ((1, 48, 12, 16), 96, 1, SMALL, {}),                                 # K 48: three steps; 12 × 6 workgroups
    ((2, 40, 5, 8), 24, 1, WIDE, {"activation": "relu"}),                # K 40 < BK, M 24 < BM, N 40 < BN
    ((1, 80, 9, 24), 72, 1, DEEP, {}),                                   # K 80: 64 + 16, M 72: 64 + 8
    ((1, 64, 7, 8), 48, 2, SMALL, {"activation": "hardswish", "alpha": 1 / 6, "beta": 0.5,
                                   "post_affine": (0.5, -0.25)}),         # grouped (K 32), post-affine
    ((3, 32, 4, 10), 16, 1, DEEP, {}),                                   # batch 3, N 40
    # N not a multiple of 8: the input gathered half by half
    ((1, 32, 5, 7), 32, 1, SMALL, {"activation": "relu"}),               # N 35
    ((2, 48, 9, 13), 40, 1, WIDE, {}),                                   # N 117, batch 2
    ((1, 64, 3, 11), 64, 2, DEEP, {"activation": "hardswish", "alpha": 1 / 6, "beta": 0.5}),  # grouped, N 33
]


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_staged_conv_matches_numpy(device: Device, case: tuple[Any, ...], bias: bool, residual: bool,
                                   dtype: type) -> None:
    """fp16 storage against NumPy's sums rounded to fp16; fp32 (hi + lo halves, ~21 bits of each input) within
    2e-5 of NumPy's fp32 answer, where one fp16 product per step would be ~3e-4 off."""
    if device.coopmat_shape is None:
        pytest.skip(f"no cooperative matrix on {device.info.name}: {device.coopmat_why_not}")
    tile = WIDE_16 if dtype == np.float32 and case[3] is WIDE else case[3]
    check_pointwise_case(device, case, tile, bias, residual, dtype, "pointwise_staged",
                         2e-3 if dtype == np.float16 else 2e-5)


def gemm_tensor(shape: tuple[Any, ...], dtype: type) -> Any:
    from math import prod
    t = fake_tensor(shape, dtype)
    t.numel = prod(shape)
    return t


def gemm_kernel(rows: Any, n: int, k: int, dtype: type = np.float16, c: bool = True,
                dispatched: list[tuple[Any, ...]] | None = None, **attrs: Any) -> tuple[Any, ...]:
    """record_gemm of (rows × k) · (k × n) + C of n on a fake H200: the dispatch ((SPIR-V name, constants), push,
    groups, label)."""
    dispatched = [] if dispatched is None else dispatched
    b = gemm_tensor((n, k) if attrs.get("trans_b") else (k, n), dtype)
    record_gemm(fake_recorder(dispatched), gemm_tensor((rows, k), dtype), b, gemm_tensor((rows, n), dtype),
                gemm_tensor((n,), dtype) if c else None, **attrs)
    return dispatched[-1]


def test_wide_gemms_take_it_unasked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Gemm or a MatMul by 2-D weights at least GEMM_MIN_N columns wide (the CTC head: 120 -> 18 710, SVTR's
    120 -> 360), plain (no transposes, alpha = beta = 1, C one per column): the staged kernel, its bias per
    column; any other on gemm.comp."""
    h200 = fake_device(info())
    assert auto_gemm_tile(h200, "fp16", 18710, 120) == ((16, 16, 16), SQUARE)
    assert auto_gemm_tile(h200, "fp32", 18710, 120) is None  # gemm.comp was as fast
    assert auto_gemm_tile(h200, "fp16", GEMM_MIN_N - 1, 120) is None
    assert auto_gemm_tile(h200, "fp16", 18710, 124) is None  # K not a multiple of 8
    (name, constants), _, groups, label = gemm_kernel(640, 18710, 120)
    assert (name, label, constants[-1], groups) == ("pointwise_staged.fp16", "pointwise_staged", 1, (293, 10, 1))
    assert gemm_kernel(640, 18710, 120, np.float32)[3] == "gemm"
    assert gemm_kernel(640, 18710, 120, np.float32, tile=WIDE_16)[0][0] == "pointwise_staged"
    assert gemm_kernel(640, 18710, 120, c=False)[0][0] == "pointwise_staged.fp16"
    for attrs in ({"trans_b": True}, {"alpha": 0.5}, {"beta": 2.0}, {"tile": "thin"}):
        assert gemm_kernel(640, 18710, 120, **attrs)[3] == "gemm", attrs
    assert gemm_kernel(640, 360, 120)[3] == "pointwise_staged"  # SVTR's projections, from GEMM_MIN_N wide
    assert gemm_kernel(640, GEMM_MIN_N - 8, 120)[3] == "gemm"
    assert gemm_kernel(640, 88, 120, tile=SMALL)[3] == "pointwise_staged"  # asked
    with pytest.raises(KernelArgumentError, match="without transposes"):
        gemm_kernel(640, 360, 120, tile=SMALL, trans_b=True)
    monkeypatch.setenv(ENV, "0")
    assert gemm_kernel(640, 18710, 120)[3] == "gemm"


def test_the_gemm_launch_stays_symbolic() -> None:
    """The CTC head under a shape-class trace of its rows (lines × time steps): nothing pinned, and the program
    gives other row counts the push constants and groups a build of them gives."""
    from vkocr.engine.symbolic import Trace, tracing
    from vkocr.engine.symbolic_program import compile_program

    trace = Trace()
    (rows,) = trace.inputs((640,))
    with tracing(trace):
        traced = gemm_kernel(rows, 18710, 120)
    assert not trace.escapes, trace.escapes
    assert traced[3] == "pointwise_staged"
    program = compile_program(trace, (rows,), traced[1:3])
    for other in (40, 41, 1000):
        assert program(other) == gemm_kernel(other, 18710, 120)[1:3]


# (M, N, K, C's shape, record_gemm's keywords): Gemm on the staged kernel
GEMM_CASES = [
    (37, 1003, 120, (1003,), {"tile": SMALL}),                  # the CTC head's K; N odd: weights gathered, outputs
    (80, 96, 64, None, {"tile": WIDE, "activation": "relu"}),   # one by one; N a multiple of 8: 16-byte moves
    (19, 40, 40, (40,), {"tile": DEEP}),                        # K 40 < BK, M and N past no tile
    (50, GEMM_MIN_N + 6, 24, (GEMM_MIN_N + 6,), {}),            # unasked
]


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("case", GEMM_CASES, ids=str)
def test_staged_gemm_matches_numpy(device: Device, case: tuple[Any, ...], residual: bool, dtype: type) -> None:
    if device.coopmat_shape is None:
        pytest.skip(f"no cooperative matrix on {device.info.name}: {device.coopmat_why_not}")
    m, n, k, c_shape, attrs = case
    if dtype == np.float32 and attrs.get("tile") is WIDE:
        attrs = {**attrs, "tile": WIDE_16}
    run_gemm(device, m, n, k, c_shape, dtype, residual, **attrs)
