"""Whether a device's cooperative matrices (VK_KHR_cooperative_matrix) serve, and with which shape.

The chain is coopmat → fp16 → fp32: a device that lists a usable shape (vk/devices.py `coopmat_shapes`: subgroup
scope, fp16 A/B, fp32 C/result), runs SPIR-V 1.5 (Vulkan 1.2, what shaders/build.py targets for these kernels),
has fp16 arithmetic (the shared-memory tiles and the matrices are float16_t), the Vulkan memory model (which
GL_KHR_cooperative_matrix brings; vk/devices.py lists no shape without it), one subgroup size for compute shaders
(NVIDIA's 32; requiring one per pipeline is not done yet) and no quirk that turns them off
gets the extension and its feature at device creation (vk/device.py), and its dense convolutions run on
shaders/conv2d_coopmat.comp (vk/kernels/conv_coopmat.py): unasked, the pointwise ones deep and big enough to run
faster there (conv_coopmat.AUTO_MIN_K, AUTO_MIN_GROUPS), and the k×k ones that an 8-row tile of
shaders/conv2d_taps.comp holds (vk/kernels/conv_taps.py), and in fp16 storage the pointwise ones deep enough
run on shaders/pointwise_coopmat.comp (vk/kernels/pointwise_coopmat.py); `VKOCR_COOPMAT=1` sends every
pointwise one (`switched_on`), `VKOCR_COOPMAT=0` turns the path off everywhere, asked or not.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from vkocr.engine.devices import DeviceInfo
from vkocr.engine.quirks import NO_COOPMAT, version_tuple

ENV = "VKOCR_COOPMAT"

# Shapes conv2d_coopmat.comp is written for, best first: NVIDIA's and AMD RDNA3's 16×16×16, Intel Xe2's 8×16×16
# (lavapipe's 8×8×8 would fit too, should a future Mesa list it with fp32 accumulators).
PREFERRED = ((16, 16, 16), (16, 8, 16), (8, 16, 16), (16, 8, 8), (8, 8, 16), (8, 8, 8))
MIN_API = "1.2.0"


def switched_off() -> bool:
    """VKOCR_COOPMAT=0 (or false/no/off) turns the cooperative-matrix path off."""
    return os.environ.get(ENV, "").strip().lower() in ("0", "false", "no", "off")


def switched_on() -> bool:
    """VKOCR_COOPMAT=1 (or true/yes/on) lets every pointwise convolution take the matrices unasked, not only the
    deep, big ones: on the H100 the shallow ones (48..96 channels) and the small ones (rec at 1×3×48×320) ran
    slower there (benchmarks/2026-12-05-h100-sweep-conv-tiles.json), every 3x3 one too."""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def why_not(info: DeviceInfo, workarounds: Iterable[str] = ()) -> str:
    """Why cooperative matrices do not serve on this device ("" when they do)."""
    if switched_off():
        return f"{ENV}=0"
    if not info.coopmat_shapes:
        return "no cooperative matrix (no subgroup shape with fp16 inputs and fp32 accumulators)"
    if NO_COOPMAT in workarounds:
        return "turned off by a quirk (vk/quirks.py)"
    if version_tuple(info.api_version) < version_tuple(MIN_API):
        return f"Vulkan {info.api_version} < {MIN_API}"
    if not info.fp16_arithmetic:
        return "no shaderFloat16"
    low, high = info.subgroup_size_range
    if low != high and (low, high) != (0, 0):
        # conv2d_coopmat.comp sizes its workgroup as 4 subgroups of `subgroup_size`; a driver free to pick another
        # size (AMD wave32/64, Intel 8/16/32) needs the pipeline to require one (subgroup size control): not yet
        return f"the subgroup size varies ({low}..{high}) and the kernel needs it fixed"
    if pick_shape(info.coopmat_shapes) is None:
        return f"none of the listed shapes {list(info.coopmat_shapes)} is one the kernel is written for"
    return ""


def pick_shape(shapes: Iterable[tuple[int, int, int]]) -> tuple[int, int, int] | None:
    """The (M, N, K) the kernel uses among a device's listed shapes, or None."""
    listed = set(shapes)
    return next((s for s in PREFERRED if s in listed), None)


def usable_shape(info: DeviceInfo, workarounds: Iterable[str] = ()) -> tuple[int, int, int] | None:
    """The shape the device's convolutions use, None when cooperative matrices do not serve there."""
    return None if why_not(info, workarounds) else pick_shape(info.coopmat_shapes)
