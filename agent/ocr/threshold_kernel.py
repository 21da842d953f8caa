"""Threshold (and optional 2×2 dilation) of a float map into packed horizontal edge bits:
shaders/ocr/threshold_edges.comp, reference vkocr.agent.ocr.threshold_reference.threshold_edges.

The threshold and the dilate flag are read by the shader from a small uint32 params tensor
(`threshold_params`), so one recording serves every value; H and W travel in push constants.
"""

from __future__ import annotations

import numpy as np

from vkocr.engine.errors import KernelArgumentError
from vkocr.engine.kernels.launch import flat_groups, pack, require_float32
from vkocr.agent.ocr.threshold_reference import edge_words
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

THRESHOLD_EDGES = KernelDef("ocr/threshold_edges", ("r", "r", "w"), 8)
THRESHOLD_PARAMS_WORDS = 2
LOCAL = 64  # one invocation per output word; small groups spread short maps over more cores


def threshold_params(thresh: float, dilate: bool) -> np.ndarray:
    """The params words: the float32 bits of the threshold, then the dilate flag."""
    return np.array([np.float32(thresh).view(np.uint32), int(bool(dilate))], np.uint32)


def record_threshold_edges(rec: Recorder, x: Tensor, params: Tensor, out: Tensor) -> None:
    """out (H, W // 32 + 1) uint32 = the edge bits of x (..., H, W) > t, dilated when the flag is set; t and
    the flag come from params (threshold_params) when the recording runs."""
    require_float32(x)
    shape = tuple(x.shape)
    if len(shape) < 2 or any(d != 1 for d in shape[:-2]):
        raise KernelArgumentError(f"threshold_edges: input must be (..., H, W) with leading dims 1, "
                                  f"got {shape}")
    height, width = shape[-2:]
    if height == 0 or width == 0:
        raise KernelArgumentError(f"threshold_edges: empty input {shape}")
    if params.dtype != np.dtype(np.uint32) or params.numel < THRESHOLD_PARAMS_WORDS:
        raise KernelArgumentError(f"threshold_edges: params must be uint32 with at least "
                                  f"{THRESHOLD_PARAMS_WORDS} words, got {params.dtype} {params.shape}")
    words = edge_words(width)
    if out.dtype != np.dtype(np.uint32) or tuple(out.shape) != (height, words):
        raise KernelArgumentError(f"threshold_edges: output must be uint32 ({height}, {words}), "
                                  f"got {out.dtype} {out.shape}")
    if height * (width + 1) >= 2**32:  # the shader's uint indices into x and out
        raise KernelArgumentError(f"threshold_edges: {height}×{width} exceeds 32-bit indexing")
    pipeline = rec.device.pipeline(THRESHOLD_EDGES, (LOCAL, 1, 1))
    rec.dispatch(pipeline, [x.view, params.view, out.view], pack("II", height, width),
                 flat_groups(height * words, LOCAL), label="threshold_edges")
