"""ONNX ArgMax (select_last_index=0) together with the max value, as CTC decoding needs."""

from __future__ import annotations

import numpy as np


def argmax_with_max(x: np.ndarray, axis: int = -1, keepdims: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Return (int32 index of the first maximum along ``axis``, that maximum value) ."""
    idx = np.argmax(x, axis=axis, keepdims=True)
    val = np.take_along_axis(x, idx, axis=axis)
    if not keepdims:
        idx, val = np.squeeze(idx, axis=axis), np.squeeze(val, axis=axis)
    return idx.astype(np.int32), val
