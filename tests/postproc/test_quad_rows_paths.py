"""quad_rows's closed-form row paths (_every_row for few rows, _band_rows for many) against the sorting path
(_quad_rows_general) and fill_poly: the same intervals and the same exactness, quad for quad, including
degenerate, thin, non-convex and large quads."""

from __future__ import annotations

import numpy as np
import pytest

from vkocr.postproc import raster
from vkocr.postproc.raster import _quad_rows_general, fill_poly, quad_rows

Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _quads(rng: np.random.Generator, n: int, big: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n quads of one kind, in masks up to big × 2*big: rotated rectangles (some clipped into the mask), thin
    slivers, arbitrary quadrilaterals (often outside or self-intersecting), or ones with repeated corners."""
    heights, widths = rng.integers(1, big, n), rng.integers(1, 2 * big, n)
    size = np.stack([widths, heights], -1)[:, None, :]
    kind = int(rng.integers(0, 4))
    if kind == 0:
        c, a = rng.uniform(0, 1, (n, 2)) * size[:, 0], rng.uniform(0, np.pi, n)
        half = rng.uniform(0.3, 1, (n, 2)) * size[:, 0] / rng.choice([2, 8])
        u = np.stack([np.cos(a), np.sin(a)], -1) * half[:, :1]
        v = np.stack([-np.sin(a), np.cos(a)], -1) * half[:, 1:]
        quads = np.stack([c - u - v, c + u - v, c + u + v, c - u + v], 1).astype(np.int64)
        if rng.random() < 0.5:
            quads = np.clip(quads, 0, size - 1)
    elif kind == 1:
        ends = rng.uniform(0, 1, (n, 2, 2)) * size
        width = rng.normal(0, 1.5, (n, 1, 2))
        quads = np.concatenate([ends, ends[:, ::-1] + width], axis=1).astype(np.int64)
    elif kind == 2:
        quads = rng.integers(-3, size + 3, (n, 4, 2))
    else:
        quads = np.minimum(rng.integers(0, 4, (n, 4, 2)) * size // 3, size - 1)
        quads[:, 1] = quads[:, int(rng.integers(0, 4))]
    return quads, heights, widths


def _by_quad(rows: Rows, n: int) -> list[tuple[list[int], list[int], list[int]]]:
    who, row, lo, hi, _ = rows
    return [(row[who == i].tolist(), lo[who == i].tolist(), hi[who == i].tolist()) for i in range(n)]


@pytest.mark.parametrize("few_rows", [0, 10**9], ids=["band_rows", "every_row"])
def test_closed_form_rows_match_general(rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch,
                                        few_rows: int) -> None:
    monkeypatch.setattr(raster, "_FEW_ROWS", few_rows)
    exact_seen = 0
    for case in range(600):
        n = int(rng.integers(1, 9))
        quads, heights, widths = _quads(rng, n, int(rng.choice([4, 20, 80, 400])))
        got, ref = quad_rows(quads, heights, widths), _quad_rows_general(quads, heights, widths)
        np.testing.assert_array_equal(got[4], ref[4], err_msg=f"case {case}: {quads.tolist()}")
        assert all(v.dtype == np.int64 for v in got[:4])
        assert _by_quad(got, n) == _by_quad(ref, n), f"case {case}: {quads.tolist()}"
        who, row = got[0], got[1]
        starts = np.flatnonzero(np.diff(who, prepend=-1) != 0)
        assert len(set(who[starts].tolist())) == starts.size  # each quad's rows together...
        assert (np.diff(row)[np.diff(who) == 0] == 1).all()  # ...one per row, top to bottom
        exact_seen += int(got[4].sum())
    assert exact_seen > 1000


@pytest.mark.parametrize("few_rows", [0, 10**9], ids=["band_rows", "every_row"])
def test_closed_form_rows_match_fill_poly(rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch,
                                         few_rows: int) -> None:
    monkeypatch.setattr(raster, "_FEW_ROWS", few_rows)
    for case in range(100):
        quads, heights, widths = _quads(rng, 1, int(rng.choice([10, 150])))
        who, row, lo, hi, exact = quad_rows(quads, heights, widths)
        ref = np.zeros((heights[0], widths[0]), np.uint8)
        fill_poly(ref, [tuple(p) for p in quads[0].tolist()])
        if exact[0]:
            mask = np.zeros_like(ref)
            for r, a, b in zip(row.tolist(), lo.tolist(), hi.tolist(), strict=True):
                mask[r, a:b + 1] = 1
            np.testing.assert_array_equal(mask, ref, err_msg=f"case {case}: {quads.tolist()}")
        else:
            assert who.size == 0


def test_degenerate_quads() -> None:
    quads = np.array([
        [[3, 2], [3, 2], [3, 2], [3, 2]],  # one pixel
        [[1, 4], [9, 4], [9, 4], [1, 4]],  # one row
        [[5, 0], [5, 7], [5, 7], [5, 0]],  # one column
        [[0, 0], [9, 0], [9, 6], [0, 6]],  # the whole mask
        [[0, 0], [9, 6], [9, 0], [0, 6]],  # a bow tie: four edges cross its rows
    ])
    heights, widths = np.full(5, 8), np.full(5, 10)
    got, ref = quad_rows(quads, heights, widths), _quad_rows_general(quads, heights, widths)
    assert got[4].tolist() == ref[4].tolist()
    assert got[4][:4].all()
    assert _by_quad(got, 5) == _by_quad(ref, 5)
    assert _by_quad(got, 5)[3] == (list(range(7)), [0] * 7, [9] * 7)


def test_huge_masks_take_the_general_path() -> None:
    quads = np.array([[[10, 3], [500, 40], [490, 90], [2, 60]]])
    side = np.array([1 << 19])  # side * side pixels: beyond float64-exact fixed-point products
    got, ref = quad_rows(quads, side, side), _quad_rows_general(quads, side, side)
    assert got[4].tolist() == ref[4].tolist() == [True]
    assert _by_quad(got, 1) == _by_quad(ref, 1)
