"""k×k convolutions tap by tap on cooperative matrices (vk/kernels/conv_taps.py, shaders/conv2d_taps.comp): which
convolutions take the kernel, its tiles, and the kernel against NumPy where the test device has matrices (Mesa
26's lavapipe lists 8×8×8: scripts/fetch_lavapipe.sh, then `build/tools/lavapipe/run .venv/bin/python -m pytest
-q tests/engine/kernels/test_conv_taps.py`, as test.sh does) and on NVIDIA through scripts/check_coopmat.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng, poisoned, release, storage_ref
from tests.engine.kernels.test_conv import CASES as SIMT_CASES
from tests.engine.kernels.test_conv import Case
from tests.engine.kernels.test_conv_coopmat import (
    check_matrix_conv,
    fake_device,
    fake_recorder,
    fake_tensor,
    info,
    symbolic_conv_launch,
)
from vkocr.engine.coopmat import ENV
from vkocr.engine.device import Device
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv import Conv2d, conv_output_shape
from vkocr.engine.kernels.conv_taps import MAX_ACCUMULATED, TapsTile, choose_taps_tile
from vkocr.engine.ops.conv import conv2d
from vkocr.engine.recorder import Recorder

DET_HEAD = (3, 3, 1, 1, 1, 1)  # (kh, kw, sh, sw, dh, dw)
DET_STEM = (3, 3, 2, 2, 1, 1)


@pytest.fixture(autouse=True)
def switch_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


def test_which_convolutions_take_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unasked: k×k, at least MIN_CIN input and at most MAX_COUT output channels, fp32 or fp16 storage, and a tile
    of 8 rows that fits (the H200's sweep: narrower ones lost to conv2d.comp). Asked, anything some tile holds;
    never where VKOCR_COOPMAT=0."""
    h200 = fake_device(info())
    assert choose_taps_tile(h200, "fp32", 24, 96, DET_HEAD) == TapsTile(rows=8, fp=2, fn=2)  # hi + lo: 48 KiB
    assert choose_taps_tile(h200, "fp16", 24, 96, DET_HEAD) == TapsTile(rows=8, fp=2, fn=2)
    assert choose_taps_tile(h200, "fp16", 64, 96, DET_HEAD) == TapsTile(rows=8, fp=2, fn=4)
    assert choose_taps_tile(h200, "fp32", 48, 24, (2, 2, 1, 1, 1, 1)) == TapsTile(rows=8, fp=2, fn=3)  # rec's 2×2
    assert choose_taps_tile(h200, "fp32", 64, 96, DET_HEAD) is None  # 64 channels' weight pairs: 55 KiB at 8 rows
    # det's strided 48 -> 24: fp16's window fits 8 rows, fp32's pairs only 4 (which lost to conv2d.comp)
    assert choose_taps_tile(h200, "fp16", 24, 48, DET_STEM) == TapsTile(rows=8, fp=1, fn=2)
    assert choose_taps_tile(h200, "fp32", 24, 48, DET_STEM) is None
    assert choose_taps_tile(h200, "fp32", 24, 48, DET_STEM, want=True) == TapsTile(rows=4, fp=1, fn=2)
    # 8 subgroups of 64 invocations pass a device of 256: 4 rows, so not unasked
    narrow = fake_device(info(subgroup_size=64, max_workgroup_invocations=256))
    assert choose_taps_tile(narrow, "fp16", 24, 96, DET_HEAD) is None
    assert choose_taps_tile(narrow, "fp16", 24, 96, DET_HEAD, want=True) == TapsTile(rows=4, fp=2, fn=2)
    # 3 input channels: the direct kernel
    assert choose_taps_tile(h200, "fp16", 24, 3, DET_STEM) is None
    assert choose_taps_tile(h200, "fp16", 96, 96, DET_HEAD) is None                  # too many output channels
    assert choose_taps_tile(h200, "fp16", 24, 96, (1, 1, 1, 1, 1, 1)) is None        # pointwise
    assert choose_taps_tile(h200, "fp16", 24, 96, DET_HEAD, want=False) is None
    with pytest.raises(KernelArgumentError, match="at most 64"):
        choose_taps_tile(h200, "fp16", 96, 96, DET_HEAD, want=True)
    monkeypatch.setenv(ENV, "0")
    assert choose_taps_tile(fake_device(info()), "fp16", 24, 96, DET_HEAD) is None
    with pytest.raises(KernelArgumentError, match="switched off"):
        choose_taps_tile(fake_device(info()), "fp16", 24, 96, DET_HEAD, want=True)
    monkeypatch.delenv(ENV)
    with pytest.raises(KernelArgumentError, match="no cooperative matrix"):
        choose_taps_tile(fake_device(info(coopmat_shapes=())), "fp16", 24, 96, DET_HEAD, want=True)


@pytest.mark.parametrize("window", [DET_HEAD, DET_STEM, (2, 2, 1, 1, 1, 1), (3, 3, 1, 1, 2, 2)])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("cout", [8, 24, 48])
def test_tiles_fit_the_device(window: tuple[int, ...], precision: str, cout: int) -> None:
    for shared, mnk in ((49152, (16, 16, 16)), (32768, (8, 8, 8))):
        device = fake_device(info(max_shared_memory_bytes=shared))
        device.coopmat_shape = mnk
        tile = choose_taps_tile(device, precision, cout, 64, window, want=True)
        assert tile is not None and tile.fn * mnk[1] >= cout
        parts = 2 if precision == "fp32" else 1
        assert tile.fp * tile.fn * mnk[0] * mnk[1] * parts <= MAX_ACCUMULATED
        assert tile.shared_bytes(mnk, window, parts == 2) <= shared


def test_a_window_too_large_for_shared_memory_is_refused() -> None:
    h200 = fake_device(info())
    assert choose_taps_tile(h200, "fp32", 64, 64, DET_STEM, want=False) is None
    assert choose_taps_tile(h200, "fp16", 64, 64, DET_STEM, want=True) is not None
    assert choose_taps_tile(h200, "fp32", 64, 64, (7, 7, 2, 2, 1, 1)) is None
    with pytest.raises(KernelArgumentError, match="shared memory"):
        choose_taps_tile(h200, "fp32", 64, 64, (7, 7, 2, 2, 1, 1), want=True)


# conv2d's cases of group 1 and at most 64 output channels, and some of the kernel's own: several chunks of input
# channels, partial column blocks, rows past the output, PP-OCRv6 det's head and stem shapes (scaled down)
DET_STEM_CASE = Case((2, 48, 19, 70), 24, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1))  # batch 2
DET_HEAD_CASE = Case((1, 96, 10, 45), 24, (3, 3), pads=(1, 1, 1, 1), attrs={"activation": "relu"})
TAPS_CASES = [c for c in SIMT_CASES if c.group == 1 and c.cout <= 64] + [
    Case((1, 20, 23, 37), 24, (3, 3), pads=(1, 1, 1, 1)),                        # 2 chunks, partial
    DET_STEM_CASE,
    Case((1, 24, 18, 33), 12, (2, 2), pads=(0, 0, 1, 1), attrs={"activation": "relu"}),  # det's 2×2
    DET_HEAD_CASE,
    Case((1, 16, 12, 40), 40, (3, 5), strides=(2, 1), pads=(1, 2, 0, 3)),
    Case((1, 32, 21, 23), 48, (3, 3), pads=(1, 1, 1, 1), attrs={"activation": "hardswish", "alpha": 1 / 6,
                                                                 "beta": 0.5, "post_affine": (0.5, -0.25)}),
    Case((1, 17, 25, 26), 64, (3, 3), pads=(2, 2, 2, 2), dilations=(2, 2)),
]


def reference(case: Case, dtype: type, rng: np.random.Generator) -> tuple[dict[str, Any], ...]:
    cin = case.x[1]
    arrays = {"x": rng.uniform(-1.0, 1.0, case.x).astype(dtype),
              "w": rng.uniform(-1.0, 1.0, (case.cout, cin, *case.kernel)).astype(dtype)}
    if case.bias:
        arrays["b"] = rng.uniform(-1.0, 1.0, (case.cout,)).astype(dtype)
    attrs: dict[str, Any] = dict(case.attrs)
    return arrays, attrs


@pytest.mark.parametrize("residual", [False, True], ids=["", "residual"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", TAPS_CASES, ids=str)
def test_taps_conv_matches_numpy(device: Device, case: Case, dtype: type, residual: bool) -> None:
    check_taps_conv(device, case, dtype, residual)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("rows,fp", [(8, 1), (4, 4), (4, 2), (4, 1), (2, 1), (1, 1)])
def test_every_tile_matches_numpy(device: Device, rows: int, fp: int, dtype: type) -> None:
    """The tiles the rule does not pick unasked, forced, on det's head and strided stem (scaled down)."""
    if device.coopmat_shape is None:
        pytest.skip(f"no cooperative matrix on {device.info.name}: {device.coopmat_why_not}")
    for case in (DET_HEAD_CASE, DET_STEM_CASE):
        check_taps_conv(device, case, dtype, residual=True,
                        tile=TapsTile(rows, fp, fn=-(-case.cout // device.coopmat_shape[1])))


def check_taps_conv(device: Device, case: Case, dtype: type, residual: bool, tile: TapsTile | None = None) -> None:
    if device.coopmat_shape is None:
        pytest.skip(f"no cooperative matrix on {device.info.name}: {device.coopmat_why_not}")
    rng, seed = fresh_rng()
    arrays, attrs = reference(case, dtype, rng)
    post = attrs.pop("post_affine", None)
    conv_attrs = dict(strides=case.strides, pads=case.pads, dilations=case.dilations)
    as32 = {k: v.astype(np.float32) for k, v in arrays.items()}
    exact = conv2d(as32["x"], as32["w"], as32.get("b"), **conv_attrs, **attrs)
    if post is not None:
        exact = exact * np.float32(post[0]) + np.float32(post[1])
    r_np = rng.uniform(-1.0, 1.0, exact.shape).astype(dtype) if residual else None
    if r_np is not None:
        exact = exact + r_np.astype(np.float32)  # the kernel adds it in fp32 and rounds once
    ref = storage_ref(exact, dtype)
    x, w, out = device.upload(arrays["x"]), device.upload(arrays["w"]), poisoned(device, ref.shape, dtype)
    b = device.upload(arrays["b"]) if "b" in arrays else None
    r = device.upload(r_np) if r_np is not None else None
    conv = Conv2d(arrays["w"].shape, has_bias=b is not None, **conv_attrs, **attrs, post_affine=post)
    with Recorder(device, profile=True) as rec:
        conv.record(rec, x, w, out, b, residual=r, taps=True, taps_tile=tile)
        rec.run()
        assert [t.label for t in rec.timings()] == ["conv2d_taps"]
    check_matrix_conv(device.download(out), ref, (arrays["x"], arrays["w"], arrays.get("b")), conv_attrs, post,
                      f"conv2d_taps {case} {np.dtype(dtype)} residual={residual} tile={tile}", seed, r_np)
    release(device, x, w, out, *[t for t in (b, r) if t is not None])


def test_asking_for_a_grouped_convolution_fails(device: Device) -> None:
    conv = Conv2d((8, 4, 3, 3), group=2, pads=(1, 1, 1, 1))
    x = device.upload(np.ones((1, 8, 6, 6), np.float32))
    w = device.upload(np.ones((8, 4, 3, 3), np.float32))
    out = poisoned(device, (1, 8, 6, 6), np.float32)
    with Recorder(device) as rec, pytest.raises(KernelArgumentError, match="group 1"):
        conv.record(rec, x, w, out, taps=True)
    release(device, x, w, out)


def test_the_taps_launch_stays_symbolic() -> None:
    assert symbolic_conv_launch(np.float32, {"taps": True}) == ("conv2d_taps", "conv2d_taps")
    # unasked, its workgroup count is a guard of the shape class, not a pinned size
    assert symbolic_conv_launch(np.float16, {}) == ("conv2d_taps.fp16", "conv2d_taps")


@pytest.mark.parametrize("w_shape,x_shape,attrs,dtype,kernel", [
    ((24, 96, 3, 3), (1, 96, 184, 256), {"pads": (1, 1, 1, 1)}, np.float32, "conv2d_taps"),  # det's head
    ((48, 24, 2, 2), (16, 24, 24, 160), {}, np.float32, "conv2d_taps"),                     # rec's 2×2
    ((48, 24, 2, 2), (1, 24, 24, 160), {}, np.float32, "conv2d"),              # batch 1: 15 workgroups, too few
    ((12, 24, 2, 2), (1, 24, 368, 512), {}, np.float32, "conv2d_direct"),                   # det's 2×2: direct's
    ((12, 24, 2, 2), (1, 24, 368, 512), {}, np.float16, "conv2d_taps"),                     # ... in fp32 only
    ((24, 12, 2, 2), (1, 12, 368, 512), {}, np.float16, "conv2d_taps"),
    ((24, 3, 3, 3), (1, 3, 736, 1024), {"strides": (2, 2), "pads": (1, 1, 1, 1)}, np.float16,
     "conv2d_direct"),                                                                      # 3 channels: direct
    ((24, 48, 3, 3), (1, 48, 368, 512), {"strides": (2, 2), "pads": (1, 1, 1, 1)}, np.float32, "conv2d"),
    ((24, 48, 3, 3), (1, 48, 368, 512), {"strides": (2, 2), "pads": (1, 1, 1, 1)}, np.float16, "conv2d_taps"),
])
def test_unasked_kernel_on_an_h200(w_shape: tuple[int, ...], x_shape: tuple[int, ...], attrs: dict[str, Any],
                                   dtype: type, kernel: str) -> None:
    """What PP-OCRv6 det's and rec's k×k convolutions of group 1 run on unasked where 16×16×16 matrices serve:
    tap by tap where an 8-row tile fits and makes AUTO_MIN_GROUPS workgroups, unless the direct kernel takes them in
    fp32 or they have fewer than MIN_CIN input channels (det's strided 48 -> 24 in fp32: only a 4-row tile fits the
    hi + lo window, so conv2d.comp)."""
    dispatched: list[tuple[Any, ...]] = []
    out_shape = conv_output_shape(x_shape, w_shape, **attrs)
    Conv2d(w_shape, **attrs).record(fake_recorder(dispatched), fake_tensor(x_shape, dtype),  # type: ignore[arg-type]
                                    fake_tensor(w_shape, dtype), fake_tensor(out_shape, dtype))  # type: ignore[arg-type]
    assert [label for *_, label in dispatched] == [kernel]
