"""Runs of a binary map from packed edge bits (what the GPU det stage returns), and DB boxes from given runs
against DB boxes that threshold the map themselves."""

from __future__ import annotations

import numpy as np

from vkocr.postproc.contours import find_runs, runs_from_edges
from vkocr.postproc.db import bitmap_runs, db_boxes, dilate
from tests.postproc.reference import synthetic_map


def packed_edges(bitmap: np.ndarray) -> np.ndarray:
    """The edge-bit layout built the obvious way: bit x of a row is set where the pixel differs from its left
    neighbour, for x in [0, W], with background outside; LSB first, 32 bits per word, W // 32 + 1 words."""
    h, w = bitmap.shape
    padded = np.zeros((h, w + 2), dtype=bool)
    padded[:, 1:-1] = bitmap
    words = w // 32 + 1
    bits = np.zeros((h, words * 32), dtype=bool)
    bits[:, : w + 1] = padded[:, 1:] != padded[:, :-1]
    return np.packbits(bits.reshape(h, words, 32), axis=-1, bitorder="little").view("<u4").reshape(h, words)


def _same_runs(a: object, b: object) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("row", "start", "end"))


def test_runs_from_edges_match_the_bitmap(rng: np.random.Generator) -> None:
    for case in range(300):
        h, w = int(rng.integers(1, 60)), int(rng.choice([1, 5, 31, 32, 33, 64, 100]))
        bitmap = rng.random((h, w)) < rng.uniform(0.0, 0.9)
        if case % 3 == 0:
            bitmap[:, -1] = True  # runs that end at the last column (their end bit is in the extra word)
        assert _same_runs(runs_from_edges(packed_edges(bitmap)), find_runs(bitmap)), f"case {case}"


def test_empty_edges_give_no_runs() -> None:
    runs = runs_from_edges(np.zeros((7, 3), np.uint32))
    assert runs.row.size == runs.start.size == runs.end.size == 0


def test_bitmap_runs_are_the_thresholded_dilated_map(rng: np.random.Generator) -> None:
    for case in range(50):
        h, w = (int(v) for v in rng.integers(4, 90, 2))
        prob = synthetic_map(rng, h, w)
        for dilation in (True, False):
            bitmap = prob > np.float32(0.3)
            if dilation:
                bitmap = dilate(bitmap)
            assert _same_runs(bitmap_runs(prob, 0.3, dilation), find_runs(bitmap)), f"case {case}"


def test_db_boxes_from_given_runs_equal_db_boxes_from_the_map(rng: np.random.Generator) -> None:
    for case in range(60):
        h, w = (int(v) for v in rng.integers(16, 160, 2))
        prob = synthetic_map(rng, h, w)
        dest_w, dest_h = int(rng.integers(8, 400)), int(rng.integers(8, 400))
        bitmap = dilate(prob > np.float32(0.3))
        mine = db_boxes(prob, dest_w, dest_h, runs=runs_from_edges(packed_edges(bitmap)))
        ref = db_boxes(prob, dest_w, dest_h)
        np.testing.assert_array_equal(mine[0], ref[0], err_msg=f"case {case}")
        assert mine[1] == ref[1], f"case {case}"
