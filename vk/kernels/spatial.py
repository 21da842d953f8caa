"""Argument checks and geometry shared by the NCHW spatial kernels (depthwise conv, conv transpose, pools)."""

from __future__ import annotations

from collections.abc import Sequence

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import MAX_GROUPS_X
from vkocr.engine.symbolic import dim
from vkocr.engine.tensor import Tensor


def pair(values: Sequence[int], what: str, minimum: int = 1) -> tuple[int, int]:
    """(h, w) from a two-element attribute, each at least `minimum`."""
    if len(values) == 2:  # no generator: a plan checks every conv's attributes on the request path
        h, w = dim(values[0]), dim(values[1])
        if h >= minimum and w >= minimum:
            return h, w
    raise KernelArgumentError(f"{what} must be two integers ≥ {minimum}, got {tuple(values)}")


def four_pads(pads: Sequence[int]) -> tuple[int, int, int, int]:
    """ONNX 2-D pads (top, left, bottom, right), each ≥ 0."""
    if len(pads) == 4:
        top, left, bottom, right = dim(pads[0]), dim(pads[1]), dim(pads[2]), dim(pads[3])
        if top >= 0 and left >= 0 and bottom >= 0 and right >= 0:
            return top, left, bottom, right
    raise KernelArgumentError(f"pads must be four integers ≥ 0 (top, left, bottom, right), got {tuple(pads)}")


def require_nchw(t: Tensor, what: str) -> tuple[int, int, int, int]:
    shape = t.shape
    if len(shape) != 4 or 0 in shape:
        raise KernelArgumentError(f"{what} must be a non-empty NCHW tensor, got shape {shape}")
    return dim(shape[0]), dim(shape[1]), dim(shape[2]), dim(shape[3])


def conv_out_len(size: int, kernel: int, stride: int, dilation: int, pad_total: int) -> int:
    """Output length of a convolution window sliding over a padded axis (ONNX, floor rounding)."""
    return (size + pad_total - ((kernel - 1) * dilation + 1)) // stride + 1


def require_positive_output(shape: tuple[int, ...], what: str) -> None:
    if any(s < 1 for s in shape):
        raise KernelArgumentError(f"{what}: these attributes give an empty output {shape}")


def require_group_count(count: int, what: str) -> None:
    """A grid axis that is not folded (y or z of a 3-D grid) holds at most 65535 groups on every device."""
    if count > MAX_GROUPS_X:
        raise KernelArgumentError(f"{what}: {count} workgroups on one grid axis exceeds {MAX_GROUPS_X}")
