"""The batched DB steps against their one-box-at-a-time forms (themselves checked against OpenCV in
test_geometry.py): identical boxes, shorter sides, masks and scores."""

from __future__ import annotations

import numpy as np

from vkocr.postproc.minrect import mini_box, mini_boxes
from vkocr.postproc.raster import fill_poly, quad_rows
from vkocr.postproc.score import box_score_fast, box_scores_fast
from vkocr.postproc.unclip import unclip_boxes, unclip_distances


def _rotated_boxes(rng: np.random.Generator, n: int, w: float, h: float, half: float) -> np.ndarray:
    c, a = rng.uniform(-5, [w + 5, h + 5], (n, 2)), rng.uniform(0, np.pi, n)
    size = rng.uniform(0.3, half, (n, 2))
    u = np.stack([np.cos(a), np.sin(a)], -1) * size[:, :1]
    v = np.stack([-np.sin(a), np.cos(a)], -1) * size[:, 1:]
    return np.stack([c - u - v, c + u - v, c + u + v, c - u + v], 1).astype(np.float32)


def test_mini_boxes_match_mini_box(rng: np.random.Generator) -> None:
    for case in range(150):
        sets: list[list[tuple[int, int]]] = []
        for _ in range(int(rng.integers(1, 30))):
            scale = int(rng.choice([3, 10, 400, 6000]))  # 6000: edges too long for the exact batch
            pts = np.unique(rng.integers(-scale // 4, scale, (int(rng.integers(1, 40)), 2)), axis=0)
            rng.shuffle(pts)
            sets.append([tuple(p) for p in pts.tolist()])
        boxes = _rotated_boxes(rng, int(rng.integers(1, 12)), 300, 300, 60)
        sets += unclip_boxes(boxes, unclip_distances(boxes, 1.6))  # convex
        got, ssides = mini_boxes(sets)
        for i, pts in enumerate(sets):
            box, sside = mini_box(pts)
            np.testing.assert_array_equal(got[i], box, err_msg=f"case {case}, set {i}: {pts}")
            assert ssides[i] == sside, f"case {case}, set {i}: {pts}"


def test_quad_rows_match_fill_poly(rng: np.random.Generator) -> None:
    for case in range(300):
        n = int(rng.integers(1, 8))
        heights, widths = rng.integers(1, 60, n), rng.integers(1, 60, n)
        quads = np.stack([rng.integers(-3, widths[:, None] + 3, (n, 4)), rng.integers(-3, heights[:, None] + 3, (n, 4))],
                         axis=-1)
        who, row, lo, hi, exact = quad_rows(quads, heights, widths)
        for i in range(n):
            ref = np.zeros((heights[i], widths[i]), np.uint8)
            fill_poly(ref, [tuple(p) for p in quads[i].tolist()])
            if not exact[i]:
                continue
            mask = np.zeros_like(ref)
            for r, a, b in zip(row[who == i], lo[who == i], hi[who == i], strict=True):
                mask[r, a:b + 1] = 1
            np.testing.assert_array_equal(mask, ref, err_msg=f"case {case}: {quads[i].tolist()}")
    quads = np.array([[[0, 0], [9, 0], [9, 4], [0, 4]]])
    assert quad_rows(quads, np.array([5]), np.array([10]))[4].all()  # the common case is covered


def test_box_scores_fast_match_box_score_fast(rng: np.random.Generator) -> None:
    for case in range(300):
        h, w = (int(v) for v in rng.integers(5, 80, 2))
        prob = rng.random((h, w)).astype(np.float32)
        n = int(rng.integers(1, 8))
        if case % 2:
            boxes = _rotated_boxes(rng, n, w, h, 25)
        else:  # arbitrary quadrilaterals, often partly outside the map or self-intersecting
            boxes = rng.uniform(-10, [w + 10, h + 10], (n, 4, 2)).astype(np.float32)
        ref = [box_score_fast(prob, b) for b in boxes]
        np.testing.assert_allclose(box_scores_fast(prob, boxes), ref, rtol=0, atol=1e-12, err_msg=f"case {case}")
