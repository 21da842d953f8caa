"""Cooperative-matrix convolutions (vk/coopmat.py, vk/kernels/conv_coopmat.py, shaders/conv2d_coopmat.comp) as far
as lavapipe, which has no cooperative matrix before Mesa 26, can take them: which path a convolution takes (the
SIMT kernel on a device without matrices, with VKOCR_COOPMAT=0, under a quirk; the matrices only where they serve),
the probe's raw properties call, the shipped SPIR-V. The kernel itself runs against NumPy where the test device
has matrices (Mesa 26's lavapipe lists 8×8×8: scripts/fetch_lavapipe.sh, then `build/tools/lavapipe/run
.venv/bin/python -m pytest -q tests/engine/kernels/test_conv_coopmat.py`) and on the H200 through
scripts/check_coopmat.py."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.engine.kernels.harness import check, check_bounded, fresh_rng, poisoned, release, storage_ref
from tests.engine.kernels.test_conv import CASES as SIMT_CASES
from tests.engine.kernels.test_conv import Case
from vkocr.engine.coopmat import ENV, usable_shape, why_not
from vkocr.engine.device import Device
from vkocr.engine.devices import DeviceInfo, MemoryHeap, assess, list_coopmat_shapes
from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.conv import Conv2d
from vkocr.engine.kernels.conv_coopmat import SQUARE, TALL, THIN, WIDE, CoopmatTile, coopmat_shape, pick_coopmat_tile
from vkocr.engine.loader import binding
from vkocr.engine.ops.conv import conv2d
from vkocr.engine.recorder import Recorder
from vkocr.engine.shaders import spirv

NVIDIA, AMD, INTEL, QUALCOMM = 0x10DE, 0x1002, 0x8086, 0x5143
SHAPES = ((16, 8, 8), (16, 8, 16), (16, 16, 16))


def info(name: str = "NVIDIA H200", vendor_id: int = NVIDIA, **changes: Any) -> DeviceInfo:
    base = DeviceInfo(
        index=0, name=name, type="discrete", vendor="", vendor_id=vendor_id, device_id=0x2335, driver_name="",
        driver_info="", driver_version="580.159.3", driver_version_raw=0, api_version="1.4.312", uuid="",
        pipeline_cache_uuid="", memory_heaps=(MemoryHeap(143771, True),), subgroup_size=32, fp16_storage=True,
        fp16_arithmetic=True, int8_storage=True, int8_arithmetic=True, max_workgroup_size=(1024, 1024, 64),
        max_workgroup_invocations=1024, max_workgroup_count=(2**31 - 1, 65535, 65535),
        max_shared_memory_bytes=49152, max_push_constants_bytes=256, max_storage_buffer_range=2**32 - 1,
        min_storage_buffer_offset_alignment=16, non_coherent_atom_size=64, timestamp_period_ns=1.0,
        timestamps_supported=True, coopmat_shapes=SHAPES)
    return dataclasses.replace(base, **changes)


def fake_device(device_info: DeviceInfo) -> SimpleNamespace:
    """What the selection reads of a Device: its info and the shape device creation enabled."""
    workarounds = assess(device_info).workarounds
    return SimpleNamespace(info=device_info, coopmat_shape=usable_shape(device_info, workarounds),
                           coopmat_why_not=why_not(device_info, workarounds))


@pytest.fixture(autouse=True)
def switch_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


def test_nvidia_uses_16x16x16_for_fp16_pointwise_convs_when_let(monkeypatch: pytest.MonkeyPatch) -> None:
    h200 = fake_device(info())
    assert h200.coopmat_shape == (16, 16, 16) and h200.coopmat_why_not == ""
    assert coopmat_shape(h200, "fp16", 32, 144) is None  # unasked, k×k: slower than SIMT so far
    assert coopmat_shape(h200, "fp16", 32, 144, want=True) == (16, 16, 16)
    monkeypatch.setenv(ENV, "1")
    assert coopmat_shape(h200, "fp16", 32, 144, pointwise=True) == (16, 16, 16)
    assert coopmat_shape(h200, "fp16", 96, 1152, pointwise=True) == (16, 16, 16)


def test_unasked_deep_pointwise_convs_with_enough_workgroups_take_the_matrices(monkeypatch: pytest.MonkeyPatch
                                                                             ) -> None:
    """Without the switch: K ≥ AUTO_MIN_K and AUTO_MIN_GROUPS workgroups of the tile (WIDE, 64 × 128 on NVIDIA's
    16×16×16), in fp32 (hi + lo pairs) and fp16; shallower, smaller, k×k or switched off: the SIMT kernel."""
    h200 = fake_device(info())
    # det's 192 -> 384 at 46×64: 6 × 23 = 138 workgroups; rec 16's 768 -> 384 at 3×80: 6 × 2 × 16 = 192
    assert coopmat_shape(h200, "fp32", 384, 192, pointwise=True, n=46 * 64) == (16, 16, 16)
    assert coopmat_shape(h200, "fp16", 384, 768, pointwise=True, n=240, batches=16) == (16, 16, 16)
    assert coopmat_shape(h200, "fp32", 96, 96, pointwise=True, n=184 * 256) is None        # K < 192
    assert coopmat_shape(h200, "fp32", 384, 768, pointwise=True, n=240) is None            # 12 workgroups, TALL 24
    # det's 768 -> 384 at 23×32: 36 workgroups of WIDE, 72 of TALL
    assert coopmat_shape(h200, "fp32", 384, 768, pointwise=True, n=23 * 32) == (16, 16, 16)
    assert coopmat_shape(h200, "fp16", 384, 768, pointwise=True, n=240, batches=3) == (16, 16, 16)
    assert coopmat_shape(h200, "fp32", 384, 768, n=46 * 64) is None                        # k×k
    monkeypatch.setenv(ENV, "0")
    assert coopmat_shape(fake_device(info()), "fp32", 384, 192, pointwise=True, n=46 * 64) is None
    monkeypatch.setenv(ENV, "1")  # every pointwise conv at least MIN_K deep, whatever its size
    assert coopmat_shape(h200, "fp32", 384, 768, pointwise=True, n=240) == (16, 16, 16)


def test_small_and_depthwise_convs_keep_the_simt_kernel_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "1")
    h200 = fake_device(info())
    assert coopmat_shape(h200, "fp16", 8, 144) is None      # M < 16
    assert coopmat_shape(h200, "fp16", 1, 9) is None        # depthwise: one output channel per group
    assert coopmat_shape(h200, "fp16", 32, 9) is None       # K < 16
    assert coopmat_shape(h200, "fp16", 32, 144) is None     # k×k: the SIMT kernel ran every one faster
    assert coopmat_shape(h200, "fp16", 32, 144, pointwise=True) == (16, 16, 16)
    assert coopmat_shape(h200, "fp32", 32, 144, pointwise=True) == (16, 16, 16)  # hi + lo pairs: fp32's accuracy
    assert coopmat_shape(h200, "fp32", 8, 144, want=True) == (16, 16, 16)
    assert coopmat_shape(h200, "fp16", 32, 144, want=False) is None


def test_the_switch_turns_the_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "0")
    h200 = fake_device(info())
    assert h200.coopmat_shape is None and h200.coopmat_why_not == f"{ENV}=0"
    assert coopmat_shape(h200, "fp16", 32, 144) is None
    enabled = SimpleNamespace(info=info(), coopmat_shape=(16, 16, 16), coopmat_why_not="")  # opened before
    assert coopmat_shape(enabled, "fp16", 32, 144) is None
    with pytest.raises(KernelArgumentError, match="asked for"):
        coopmat_shape(enabled, "fp16", 32, 144, want=True)
    monkeypatch.setenv(ENV, "1")
    assert coopmat_shape(enabled, "fp16", 32, 144, pointwise=True) == (16, 16, 16)


@pytest.mark.parametrize("name, vendor_id", [
    ("AMD Radeon RX 6800 XT (RADV NAVI21)", AMD), ("AMD Radeon RX 6700 XT", AMD), ("AMD Radeon(TM) 680M", AMD),
    ("AMD Custom GPU 0405 (RADV VANGOGH)", AMD), ("Adreno (TM) 740", QUALCOMM),
    ("Intel(R) Arc(tm) A770 Graphics (DG2)", INTEL), ("Intel(R) Arc(TM) A750 Graphics", INTEL),
])
def test_quirks_turn_the_path_off(name: str, vendor_id: int) -> None:
    device = fake_device(info(name, vendor_id))
    assert device.coopmat_shape is None and "quirk" in device.coopmat_why_not
    assert coopmat_shape(device, "fp16", 64, 576) is None
    assert assess(device.info).usable  # the device itself stays usable: only its matrices are off


@pytest.mark.parametrize("name, vendor_id", [
    ("AMD Radeon RX 7900 XTX (RADV NAVI31)", AMD), ("Intel(R) Arc(TM) B580 Graphics", INTEL),
])
def test_quirks_leave_newer_generations_alone(name: str, vendor_id: int) -> None:
    assert fake_device(info(name, vendor_id)).coopmat_shape == (16, 16, 16)


def test_devices_without_what_the_kernel_needs_get_no_matrices() -> None:
    assert usable_shape(info(coopmat_shapes=())) is None
    assert usable_shape(info(fp16_arithmetic=False)) is None
    assert usable_shape(info(api_version="1.1.0")) is None
    assert usable_shape(info(coopmat_shapes=((32, 8, 16),))) is None  # a shape the kernel is not written for
    assert usable_shape(info(coopmat_shapes=((8, 16, 16),))) == (8, 16, 16)  # Intel Xe2's


def test_a_varying_subgroup_size_keeps_the_simt_kernel() -> None:
    """The workgroup is 4 subgroups of the reported size: where the driver may pick another (AMD wave32/64),
    no matrices until pipelines require a subgroup size."""
    rdna3 = info("AMD Radeon RX 7900 XTX (RADV NAVI31)", AMD, subgroup_size=64, subgroup_size_range=(32, 64))
    assert usable_shape(rdna3) is None and "varies" in why_not(rdna3)
    assert usable_shape(info(subgroup_size_range=(32, 32))) == (16, 16, 16)


def test_tall_takes_pointwise_convs_too_small_for_wide() -> None:
    """Where WIDE makes fewer than AUTO_MIN_GROUPS workgroups and TALL (half its accumulators per subgroup, twice
    the workgroups) makes that many, TALL; fp32's hi + lo pairs halve its steps as they halve WIDE's."""
    mnk = (16, 16, 16)
    assert pick_coopmat_tile(384, mnk, pointwise=True, n=23 * 32) == TALL                      # 36 -> 72
    assert pick_coopmat_tile(384, mnk, split=True, pointwise=True, n=23 * 32) == dataclasses.replace(TALL, ksteps=2)
    assert pick_coopmat_tile(384, mnk, pointwise=True, n=46 * 64) is WIDE                      # 138 of WIDE
    assert pick_coopmat_tile(384, mnk, pointwise=True, n=240) is WIDE                          # TALL: 24 too
    assert pick_coopmat_tile(384, mnk, pointwise=True) is WIDE                                 # no N: as before
    assert pick_coopmat_tile(384, mnk, n=23 * 32) is SQUARE                                    # k×k: unchanged
    for split in (False, True):
        tall = pick_coopmat_tile(384, mnk, split=split, pointwise=True, n=23 * 32)
        assert tall.shared_bytes(mnk, split=split) <= 49152


def test_tiles_fit_and_cover_the_rows() -> None:
    assert pick_coopmat_tile(16, (16, 16, 16)) is THIN and pick_coopmat_tile(96, (16, 16, 16)) is SQUARE
    assert pick_coopmat_tile(96, (16, 16, 16), pointwise=True) is WIDE
    wide_split = pick_coopmat_tile(96, (16, 16, 16), split=True, pointwise=True)
    assert WIDE.shared_bytes((16, 16, 16)) <= 49152 and wide_split.shared_bytes((16, 16, 16), split=True) <= 49152
    for m in (16, 17, 32, 33, 64, 96, 130):
        tile = pick_coopmat_tile(m, (16, 16, 16))
        bm, bn, bk = tile.dims((16, 16, 16))
        assert bn == 128 and bk == 32 and tile.shared_bytes((16, 16, 16)) <= 32768
        assert bm >= min(m, 64)
        split = pick_coopmat_tile(m, (16, 16, 16), split=True)  # twice the tiles, half as deep
        assert split.dims((16, 16, 16)) == (bm, bn, 16) and split.shared_bytes((16, 16, 16), split=True) <= 36864


def test_a_device_without_matrices_keeps_the_simt_kernel(device: Device) -> None:
    if device.coopmat_shape is not None:
        pytest.skip(f"{device.info.name} has cooperative matrices")
    assert device.coopmat_why_not
    assert coopmat_shape(device, "fp16", 64, 576) is None
    with pytest.raises(KernelArgumentError, match="has none"):
        coopmat_shape(device, "fp16", 64, 576, want=True)
    for dtype in (np.float32, np.float16):
        conv = Conv2d((32, 16, 3, 3), pads=(1, 1, 1, 1))
        x = device.upload(np.ones((1, 16, 8, 8), dtype))
        w = device.upload(np.ones((32, 16, 3, 3), dtype))
        out = poisoned(device, (1, 32, 8, 8), dtype)
        with Recorder(device, profile=True) as rec:
            conv.record(rec, x, w, out)
            rec.run()
            assert [t.label for t in rec.timings()] == ["conv2d"]
        assert float(device.download(out)[0, 0, 4, 4]) == 144.0
        release(device, x, w, out)


def test_probe_reads_the_properties_with_their_stype() -> None:
    """list_coopmat_shapes against a fake driver (a CFFI callback): two calls, sType set on every element before
    the second, only subgroup fp16 × fp16 + fp32 shapes kept."""
    vk = binding()
    ffi = vk.ffi
    f16, f32, u8 = vk.VK_COMPONENT_TYPE_FLOAT16_KHR, vk.VK_COMPONENT_TYPE_FLOAT32_KHR, vk.VK_COMPONENT_TYPE_UINT8_KHR
    listed = [(16, 16, 16, f16, f32, vk.VK_SCOPE_SUBGROUP_KHR, 0), (16, 8, 16, f16, f32, vk.VK_SCOPE_SUBGROUP_KHR, 0),
              (16, 16, 16, f16, f16, vk.VK_SCOPE_SUBGROUP_KHR, 0), (16, 16, 32, u8, f32, vk.VK_SCOPE_SUBGROUP_KHR, 0),
              (16, 16, 16, f16, f32, vk.VK_SCOPE_WORKGROUP_KHR, 0), (16, 16, 16, f16, f32, vk.VK_SCOPE_SUBGROUP_KHR, 1)]
    seen_stypes: list[int] = []

    @ffi.callback("VkResult(VkPhysicalDevice, uint32_t*, VkCooperativeMatrixPropertiesKHR*)")
    def fake(_pd: Any, count: Any, props: Any) -> int:
        if props == ffi.NULL:
            count[0] = len(listed)
            return int(vk.VK_SUCCESS)
        for i, (m, n, k, ab, c, scope, sat) in enumerate(listed[:count[0]]):
            seen_stypes.append(props[i].sType)
            props[i].MSize, props[i].NSize, props[i].KSize = m, n, k
            props[i].AType = props[i].BType = ab
            props[i].CType = props[i].ResultType = c
            props[i].scope, props[i].saturatingAccumulation = scope, sat
        return int(vk.VK_SUCCESS)

    assert list_coopmat_shapes(fake, ffi.NULL) == ((16, 8, 16), (16, 16, 16))
    assert seen_stypes == [vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR] * len(listed)


@pytest.mark.parametrize("name", ["conv2d_coopmat", "conv2d_coopmat.fp16"])
def test_shipped_spirv_needs_only_what_the_device_enables(name: str) -> None:
    """SPIR-V 1.5 (Vulkan 1.2) with the workgroup size as LocalSize + spec constants, not LocalSizeId (which
    needs maintenance4); the cooperative-matrix capability and the Vulkan memory model the device enables."""
    code = spirv(name)
    words = struct.unpack(f"<{len(code) // 4}I", code)
    assert words[1] == 0x00010500, hex(words[1])
    opcodes, i = set(), 5
    capabilities = set()
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        opcodes.add(opcode)
        if opcode == 17:  # OpCapability
            capabilities.add(words[i + 1])
        i += count
    assert 331 not in opcodes  # OpExecutionModeId (LocalSizeId)
    cooperative_matrix_khr, vulkan_memory_model, float16, storage16 = 6022, 5345, 9, 4433
    assert {cooperative_matrix_khr, vulkan_memory_model, float16} <= capabilities
    assert (storage16 in capabilities) == name.endswith(".fp16")


# conv2d's cases, asked onto the matrices even where M or K is tiny (partial tiles everywhere), and some of its own
COOPMAT_CASES = [*SIMT_CASES,
    Case((1, 16, 9, 70), 16, (1, 1)),                                          # pointwise, N over several tiles
    Case((1, 20, 23, 19), 17, (3, 3), pads=(1, 1, 1, 1)),                      # partial M
    Case((2, 5, 30, 30), 100, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),      # partial M and K, batch 2
    Case((1, 64, 20, 24), 64, (3, 3), pads=(1, 1, 1, 1), group=2, bias=False),  # grouped
    Case((1, 16, 12, 40), 24, (3, 5), strides=(2, 1), pads=(1, 2, 0, 3), attrs={"activation": "relu"}),
    Case((1, 32, 21, 23), 48, (3, 3), pads=(1, 1, 1, 1), attrs={"activation": "hardswish", "alpha": 1 / 6,
                                                                 "beta": 0.5, "post_affine": (0.5, -0.25)}),
]
# one column per thread (the workgroup's invocations a multiple of the tile's columns, as on NVIDIA) and not
ONE_COLUMN = CoopmatTile(sg_m=4, sg_n=1, fm=1, fn=1)
TILES = [None, ONE_COLUMN, CoopmatTile(sg_m=2, sg_n=2, fm=1, fn=3, ksteps=1), TALL]


@pytest.mark.parametrize("tile", TILES, ids=["picked", "one-column", "2x2x1x3", "tall"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", COOPMAT_CASES, ids=str)
def test_coopmat_conv_matches_numpy(device: Device, case: Case, dtype: type, tile: CoopmatTile | None) -> None:
    if device.coopmat_shape is None:
        pytest.skip(f"no cooperative matrix on {device.info.name}: {device.coopmat_why_not}")
    rng, seed = fresh_rng()
    cin = case.x[1]
    x_np = rng.uniform(-1.0, 1.0, case.x).astype(dtype)
    w_np = rng.uniform(-1.0, 1.0, (case.cout, cin // case.group, *case.kernel)).astype(dtype)
    b_np = rng.uniform(-1.0, 1.0, (case.cout,)).astype(dtype) if case.bias else None
    attrs: dict[str, Any] = dict(case.attrs)
    post = attrs.pop("post_affine", None)
    conv_attrs = dict(strides=case.strides, pads=case.pads, dilations=case.dilations, group=case.group)
    exact = conv2d(x_np.astype(np.float32), w_np.astype(np.float32),
                   b_np.astype(np.float32) if b_np is not None else None, **conv_attrs, **attrs)
    if post is not None:
        exact = exact * np.float32(post[0]) + np.float32(post[1])
    ref = storage_ref(exact, dtype)
    x, w, out = device.upload(x_np), device.upload(w_np), poisoned(device, ref.shape, dtype)
    b = device.upload(b_np) if b_np is not None else None
    conv = Conv2d(w_np.shape, has_bias=b is not None, **conv_attrs, **attrs, post_affine=post)
    with Recorder(device, profile=True) as rec:
        conv.record(rec, x, w, out, b, coopmat=True, coopmat_tile=tile)
        rec.run()
        assert [t.label for t in rec.timings()] == ["conv2d_coopmat"]
    check_matrix_conv(device.download(out), ref, (x_np, w_np, b_np), conv_attrs, post,
                      f"conv2d_coopmat {case} {np.dtype(dtype)} {tile}", seed)
    release(device, x, w, out, *([b] if b is not None else []))


def check_matrix_conv(got: np.ndarray, ref: np.ndarray, operands: tuple[np.ndarray, np.ndarray, np.ndarray | None],
                      conv_attrs: dict[str, Any], post: tuple[float, float] | None, what: str, seed: int,
                      residual: np.ndarray | None = None) -> None:
    """A convolution on cooperative matrices against its reference `ref`: with fp16 storage within 2e-3 (the
    reference rounds as the kernel does); with fp32 storage (hi + lo fp16 pairs, ~21 bits of every input) each
    element within 2e-6 of its terms' magnitude (Mesa 26's lavapipe: at most 5.3e-7 over 20 draws of every case
    and tile; one fp16 product each would give ~5e-4; the activations' slopes are at most 1.5). `operands`: (x,
    w, bias) as stored; `residual`: the one added in the epilogue."""
    if got.dtype == np.float16:
        check(got, ref, what, seed, 2e-3)
        return
    x_np, w_np, b_np = (None if a is None else np.abs(a).astype(np.float32) for a in operands)
    assert x_np is not None and w_np is not None
    magnitude = conv2d(x_np, w_np, b_np, **conv_attrs)
    if post is not None:
        magnitude = magnitude * np.float32(abs(post[0]))
    if residual is not None:
        magnitude = magnitude + np.abs(residual)
    check_bounded(got, ref, magnitude, what, seed, 2e-6)


def test_unasked_a_conv_too_small_for_the_other_tiles_keeps_the_sliced_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """With VKOCR_COOPMAT=1 a pointwise conv takes the matrices, except where the SIMT kernel would take its sliced
    tile (a small map and a deep K: the matrices ran those slower on the H200)."""
    monkeypatch.setenv(ENV, "1")
    dispatched: list[str] = []
    device = SimpleNamespace(info=info(), coopmat_shape=(16, 16, 16), coopmat_why_not="",
                             pipeline=lambda kernel, constants: (kernel.spirv_name, constants))
    rec = SimpleNamespace(device=device, dispatch=lambda pipeline, views, push, groups, label: dispatched.append(
        pipeline[0]))

    def tensor(shape: tuple[int, ...]) -> SimpleNamespace:
        return SimpleNamespace(shape=shape, dtype=np.dtype(np.float32), view=None)

    def kernel_for(side: int, asked: bool | None = None) -> str:
        conv = Conv2d((256, 256, 1, 1))
        conv.record(rec, tensor((1, 256, side, side)), tensor((256, 256, 1, 1)),  # type: ignore[arg-type]
                    tensor((1, 256, side, side)), coopmat=asked)  # type: ignore[arg-type]
        return dispatched[-1]

    assert kernel_for(14) == "conv2d"  # 16 workgroups of the small tile: sliced
    assert kernel_for(92) == "pointwise_staged"  # 256 deep on a map with workgroups enough: the staged kernel
    assert kernel_for(92, asked=True) == "conv2d_coopmat"
    assert kernel_for(14, asked=True) == "conv2d_coopmat"


def fake_recorder(dispatched: list[tuple[Any, ...]]) -> SimpleNamespace:
    """What Conv2d.record asks of a Recorder, on a fake H200 with 16×16×16 matrices: each dispatch lands in
    `dispatched` as ((SPIR-V name, constants), push, groups, label)."""
    device = SimpleNamespace(info=info(), coopmat_shape=(16, 16, 16), coopmat_why_not="",
                             pipeline=lambda kernel, constants: (kernel.spirv_name, constants))
    return SimpleNamespace(device=device, dispatch=lambda pipeline, views, push, groups, label: dispatched.append(
        (pipeline, push, groups, label)))


def fake_tensor(shape: tuple[Any, ...], dtype: type) -> SimpleNamespace:
    return SimpleNamespace(shape=shape, dtype=np.dtype(dtype), view=None)


def traced_conv_launch(w_shape: tuple[int, int, int, int], attrs: dict[str, Any],
                       out_hw: Callable[[Any, Any], tuple[Any, Any]], dtype: type, record: dict[str, Any],
                       shapes: Sequence[tuple[int, int]]) -> tuple[Any, ...]:
    """Record Conv2d(w_shape, **attrs) (group 1; `out_hw`: its output size from the input's) on a fake device with
    16×16×16 matrices (`record`: the kernel choice's keywords) under a shape-class trace (vk/symbolic.py) at the
    input size shapes[0]: the choice and the launch must pin no dimension, and the compiled program must give the
    other sizes of the class the groups and push constants a build of that size gives. Returns the traced
    dispatch: ((SPIR-V name, constants), push, groups, label)."""
    from vkocr.engine.symbolic import Trace, tracing
    from vkocr.engine.symbolic_program import compile_program

    dispatched: list[tuple[Any, ...]] = []
    rec = fake_recorder(dispatched)
    cout, cin = w_shape[:2]

    def build(h: Any, w: Any) -> tuple[Any, ...]:
        oh, ow = out_hw(h, w)
        Conv2d(w_shape, **attrs).record(rec, fake_tensor((1, cin, h, w), dtype), fake_tensor(w_shape, dtype),  # type: ignore[arg-type]
                                        fake_tensor((1, cout, oh, ow), dtype), **record)  # type: ignore[arg-type]
        return dispatched[-1]

    trace = Trace()
    dims = trace.inputs(shapes[0])
    with tracing(trace):
        traced = build(*dims)
    assert not trace.escapes, trace.escapes
    program = compile_program(trace, dims, traced[1:3])
    for h, w in shapes[1:]:
        push, groups = build(h, w)[1:3]
        assert program(h, w) == (push, groups)
    return traced


def symbolic_conv_launch(dtype: type, record: dict[str, Any]) -> tuple[str, str]:
    """traced_conv_launch of a 3×3 stride-2 Conv2d((32, 16, 3, 3)) at 368×512, 370×500 and 361×515: the traced
    dispatch's (SPIR-V name, label)."""
    traced = traced_conv_launch((32, 16, 3, 3), {"strides": (2, 2), "pads": (1, 1, 1, 1), "activation": "relu"},
                                lambda h, w: ((h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1), dtype, record,
                                ((368, 512), (370, 500), (361, 515)))
    return traced[0][0], traced[3]


def test_the_coopmat_launch_stays_symbolic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "1")
    assert symbolic_conv_launch(np.float16, {"coopmat": True}) == ("conv2d_coopmat.fp16", "conv2d_coopmat")


def test_the_tall_tile_launch_stays_symbolic() -> None:
    """A 1×1 768 -> 384 convolution at det's 23×32 map takes TALL (WIDE makes 36 workgroups) under a shape-class
    trace: the tile choice guards the class and pins no dimension (other sizes of the class: 23×30, 24×32)."""
    traced = traced_conv_launch((384, 768, 1, 1), {}, lambda h, w: (h, w), np.float32, {},
                                ((23, 32), (23, 30), (24, 32)))
    (name, constants), label = traced[0], traced[3]
    assert (name, label) == ("conv2d_coopmat", "conv2d_coopmat")
    # (workgroup size, TM, TN, TK, sg_m, sg_n, conv2d's four, fm, fn, ksteps, ...): TALL, half as deep in fp32
    assert constants[6:8] == (TALL.sg_m, TALL.sg_n) and constants[12:15] == (TALL.fm, TALL.fn, TALL.ksteps // 2)
