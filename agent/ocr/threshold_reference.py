"""Threshold, optional 2×2 dilation, and the horizontal edges of the result packed as bits (the reference of
shaders/ocr/threshold_edges.comp)."""

from __future__ import annotations

import numpy as np


def edge_words(width: int) -> int:
    """uint32 words per row: edge bits for columns 0 .. width (inclusive)."""
    return width // 32 + 1


def dilate2x2(fg: np.ndarray) -> np.ndarray:
    """cv2.dilate with a 2×2 ones kernel (anchor (1, 1)): a pixel is on when it or its left, upper or
    upper-left neighbour is; nothing outside the map is on."""
    out = fg.copy()
    out[:, 1:] |= fg[:, :-1]
    out[1:, :] |= fg[:-1, :]
    out[1:, 1:] |= fg[:-1, :-1]
    return out


def threshold_edges(x: np.ndarray, thresh: float, dilate: bool) -> np.ndarray:
    """(H, W // 32 + 1) uint32 for x of shape (..., H, W), leading dims 1: fg = x > float32(thresh), dilated
    when asked; bit x % 32 of word x // 32 of row y is set where fg[y][x] != fg[y][x - 1] for x in 0 .. W,
    fg being false outside the map. Each row's set bits alternate: start of a run, one past its end."""
    x = np.asarray(x)
    if x.ndim < 2 or any(d != 1 for d in x.shape[:-2]):
        raise ValueError(f"expected (..., H, W) with leading dims 1, got {x.shape}")
    height, width = x.shape[-2:]
    fg = x.reshape(height, width) > np.float32(thresh)
    if dilate:
        fg = dilate2x2(fg)
    words = edge_words(width)
    padded = np.zeros((height, words * 32 + 1), dtype=bool)  # column 0 is x = -1
    padded[:, 1:width + 1] = fg
    edges = padded[:, 1:] != padded[:, :-1]  # edges[:, x] = fg[x] != fg[x - 1]
    return np.packbits(edges, axis=1, bitorder="little").view("<u4").astype(np.uint32)
