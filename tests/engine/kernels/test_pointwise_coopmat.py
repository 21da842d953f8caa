"""The fragment kernel of fp16 pointwise convolutions (vk/kernels/pointwise_coopmat.py,
shaders/pointwise_coopmat.comp): which convolutions it takes, that its launch stays symbolic, and (where the test
device has cooperative matrices: Mesa 26's lavapipe, `build/tools/lavapipe/run .venv/bin/python -m pytest -q
tests/engine/kernels/test_pointwise_coopmat.py`, as test.sh runs it) its answers against NumPy."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from tests.engine.kernels.harness import check, fresh_rng, poisoned, release, storage_ref
from tests.engine.kernels.test_conv_coopmat import ENV, fake_device, fake_recorder, info, traced_conv_launch
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv import Conv2d
from vkocr.engine.kernels.pointwise_coopmat import SINGLE, FragmentTile, fragment_tile
from vkocr.engine.ops.conv import conv2d
from vkocr.engine.recorder import Recorder


@pytest.fixture(autouse=True)
def switch_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


def test_fp16_pointwise_convs_it_can_hold_take_it_unasked(monkeypatch: pytest.MonkeyPatch) -> None:
    h200 = fake_device(info())
    # det's 48 -> 96 at 184×256 and 768 -> 384 at 23×23 (N odd: the input's fragments go through shared memory):
    # two accumulators along M; 96 -> 24 at 184×256: one
    assert fragment_tile(h200, "fp16", 96, 48, 184 * 256, pointwise=True) == ((16, 16, 16), SINGLE)
    assert fragment_tile(h200, "fp16", 384, 768, 23 * 23, pointwise=True) == ((16, 16, 16), SINGLE)
    assert fragment_tile(h200, "fp16", 24, 96, 184 * 256, pointwise=True) == ((16, 16, 16), replace(SINGLE, fm=1))
    # ... but not where the tile makes fewer than FRAG_MIN_GROUPS workgroups (rec's 384 -> 192 at 6×80 for one
    # line: 90), unless asked; the same for 16 lines makes 1440
    assert fragment_tile(h200, "fp16", 192, 384, 6 * 80, pointwise=True) is None
    assert fragment_tile(h200, "fp16", 192, 384, 6 * 80, pointwise=True, want=True) == ((16, 16, 16), SINGLE)
    assert fragment_tile(h200, "fp16", 192, 384, 6 * 80, pointwise=True, batches=16) == ((16, 16, 16), SINGLE)
    assert fragment_tile(h200, "fp16", 24, 96, 40, pointwise=True) is None
    # ... but not where the staged kernel takes TALL (det's 768 -> 384 at 23×32), unless asked
    assert fragment_tile(h200, "fp16", 384, 768, 23 * 32, pointwise=True) is None
    assert fragment_tile(h200, "fp16", 384, 768, 23 * 32, pointwise=True, want=True) == ((16, 16, 16), SINGLE)
    for why in ({"precision": "fp32"}, {"pointwise": False}, {"k": 24}, {"k": 120}, {"m": 8}, {"n": 24}):
        args: dict[str, Any] = {"precision": "fp16", "m": 96, "k": 48, "n": 184 * 256, "pointwise": True, **why}
        assert fragment_tile(h200, args.pop("precision"), args.pop("m"), args.pop("k"), args.pop("n"), **args) is None
        with pytest.raises(KernelArgumentError, match="pointwise_coopmat cannot"):
            fragment_tile(h200, **{"precision": "fp16", "m": 96, "k": 48, "n": 184 * 256, "pointwise": True, **why},
                          want=True)
    assert fragment_tile(fake_device(info(coopmat_shapes=())), "fp16", 96, 48, 4096, pointwise=True) is None
    monkeypatch.setenv(ENV, "0")
    assert fragment_tile(h200, "fp16", 96, 48, 4096, pointwise=True) is None


def test_the_conv_records_it_for_fp16_only() -> None:
    dispatched: list[tuple[Any, ...]] = []
    rec = fake_recorder(dispatched)

    def kernel_for(dtype: type, **record: Any) -> str:
        from tests.engine.kernels.test_conv_coopmat import fake_tensor
        Conv2d((96, 48, 1, 1)).record(rec, fake_tensor((1, 48, 92, 128), dtype), fake_tensor((96, 48, 1, 1), dtype),  # type: ignore[arg-type]
                                      fake_tensor((1, 96, 92, 128), dtype), **record)  # type: ignore[arg-type]
        return str(dispatched[-1][0][0])

    assert kernel_for(np.float16) == "pointwise_coopmat.fp16"
    assert kernel_for(np.float32) == "conv2d"
    assert kernel_for(np.float16, coopmat=True) == "conv2d_coopmat.fp16"  # asking for the staged kernel
    assert kernel_for(np.float16, coopmat=False) == "conv2d.fp16"
    assert kernel_for(np.float16, tile="thin") == "conv2d.fp16"


def test_the_fragment_launch_stays_symbolic() -> None:
    """A 1×1 96 -> 192 convolution at det's 46×64 under a shape-class trace: no dimension is pinned, and N's
    remainder by 8 does not split the class (other sizes of it: 46×60, 40×64, 45×61)."""
    traced = traced_conv_launch((192, 96, 1, 1), {}, lambda h, w: (h, w), np.float16, {},
                                ((46, 64), (46, 60), (40, 64), (45, 61)))
    assert (traced[0][0], traced[3]) == ("pointwise_coopmat.fp16", "pointwise_coopmat")


# (x shape, output channels, group, tile, conv attributes): every edge the kernel moves a block back from
CASES = [
    ((1, 48, 12, 16), 96, 1, None, {}),                                  # several workgroups each way
    ((2, 32, 5, 8), 24, 1, None, {"activation": "relu"}),                # M 24: one accumulator, moved back
    ((1, 16, 3, 24), 40, 1, FragmentTile(fm=2, fn=1), {}),               # N 72, M 40: both moved back
    ((1, 64, 7, 8), 48, 2, None, {"activation": "hardswish", "alpha": 1 / 6, "beta": 0.5,
                                  "post_affine": (0.5, -0.25)}),          # grouped, post-affine
    ((3, 32, 4, 10), 16, 1, FragmentTile(sg_m=1, sg_n=4, fm=1, fn=2), {}),  # flat tile, batch 3
    # N not a multiple of 8: the input's fragments through shared memory
    ((1, 32, 5, 7), 32, 1, SINGLE, {"activation": "relu"}),              # N 35
    ((2, 48, 9, 13), 40, 1, FragmentTile(sg_m=2, sg_n=2, fm=2, fn=1), {}),  # N 117, batch 2, blocks moved back
    ((1, 64, 3, 11), 64, 2, SINGLE, {"activation": "hardswish", "alpha": 1 / 6, "beta": 0.5}),  # grouped, N 33
]


def check_pointwise_case(device: Device, case: tuple[Any, ...], tile: Any, bias: bool, residual: bool,
                         dtype: type, label: str, tol: float) -> None:
    """One CASES-shaped case (x shape, output channels, group, -, conv attributes) recorded with `coopmat_tile` =
    `tile` on fresh random inputs of `dtype` into a poisoned output: one dispatch of `label`, within `tol` of NumPy's
    fp32 answer rounded to `dtype`."""
    x_shape, cout, group, _, attrs = case
    attrs = dict(attrs)
    rng, seed = fresh_rng()
    x_np = rng.uniform(-1.0, 1.0, x_shape).astype(dtype)
    w_np = rng.uniform(-1.0, 1.0, (cout, x_shape[1] // group, 1, 1)).astype(dtype)
    b_np = rng.uniform(-1.0, 1.0, (cout,)).astype(dtype) if bias else None
    out_shape = (x_shape[0], cout, *x_shape[2:])
    r_np = rng.uniform(-1.0, 1.0, out_shape).astype(dtype) if residual else None
    post = attrs.pop("post_affine", None)
    exact = conv2d(x_np.astype(np.float32), w_np.astype(np.float32),
                   b_np.astype(np.float32) if b_np is not None else None, group=group, **attrs)
    if post is not None:
        exact = exact * np.float32(post[0]) + np.float32(post[1])
    if r_np is not None:
        exact = exact + r_np.astype(np.float32)
    ref = storage_ref(exact, dtype)
    x, w, out = device.upload(x_np), device.upload(w_np), poisoned(device, out_shape, dtype)
    b = device.upload(b_np) if b_np is not None else None
    r = device.upload(r_np) if r_np is not None else None
    conv = Conv2d(w_np.shape, has_bias=bias, group=group, **attrs, post_affine=post)
    with Recorder(device, profile=True) as rec:
        conv.record(rec, x, w, out, b, residual=r, coopmat_tile=tile)
        rec.run()
        assert [t.label for t in rec.timings()] == [label]
    check(device.download(out), ref, f"{label} {case} bias={bias} residual={residual}", seed, tol)
    release(device, x, w, out, *(t for t in (b, r) if t is not None))


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_fragment_conv_matches_numpy(device: Device, case: tuple[Any, ...], bias: bool, residual: bool) -> None:
    if device.coopmat_shape is None:
        pytest.skip(f"no cooperative matrix on {device.info.name}: {device.coopmat_why_not}")
    tile = case[3] or FragmentTile(fm=2 if case[1] >= 32 else 1)
    check_pointwise_case(device, case, tile, bias, residual, np.float16, "pointwise_coopmat", 2e-3)
