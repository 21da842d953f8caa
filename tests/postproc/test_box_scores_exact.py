"""box_scores_fast to the bit against a plain reference of its summation (the fill_poly mask of each box, each
row's pixels summed in float64 by one reduceat, rows added in order from 0.0, divided by the pixel count;
box_score_fast where the mask is clipped or a row is not one interval), and reading only the boxes: NaN
elsewhere in the map changes nothing, nor does a read-only view with a row pitch."""

from __future__ import annotations

import numpy as np

from vkocr.postproc.raster import fill_poly
from vkocr.postproc.score import box_score_fast, box_scores_fast


def _reference(prob: np.ndarray, box: np.ndarray) -> float:
    h, w = prob.shape
    x0, y0 = (min(max(int(np.floor(v)), 0), n - 1) for v, n in zip(box.min(axis=0), (w, h), strict=True))
    x1, y1 = (min(max(int(np.ceil(v)), 0), n - 1) for v, n in zip(box.max(axis=0), (w, h), strict=True))
    quad = (box.astype(np.float64) - [x0, y0]).astype(np.float32).astype(np.int32)
    mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
    fill_poly(mask, [tuple(p) for p in quad.tolist()])
    if not ((quad >= 0) & (quad < [mask.shape[1], mask.shape[0]])).all():
        return box_score_fast(prob, box)
    total, count = 0.0, 0
    for r, line in enumerate(mask):
        cols = np.flatnonzero(line)
        if not cols.size:
            continue
        if cols[-1] - cols[0] + 1 != cols.size:
            return box_score_fast(prob, box)
        values = prob[y0 + r, x0 + cols[0]:x0 + cols[-1] + 1].astype(np.float64)
        total += float(np.add.reduceat(values, [0])[0])
        count += cols.size
    return total / count


def _boxes(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    n = int(rng.integers(1, 10))
    if rng.random() < 0.3:  # arbitrary quadrilaterals, often partly outside the map or self-intersecting
        return rng.uniform(-10, [w + 10, h + 10], (n, 4, 2)).astype(np.float32)
    c, a = rng.uniform(-5, [w + 5, h + 5], (n, 2)), rng.uniform(0, np.pi, n)
    if rng.random() < 0.5:
        a = np.round(a / (np.pi / 2)) * (np.pi / 2)  # upright
    half = rng.uniform(0.3, [w / 2, h / 2], (n, 2)) * rng.choice([0.05, 0.3, 1.0])
    u = np.stack([np.cos(a), np.sin(a)], -1) * half[:, :1]
    v = np.stack([-np.sin(a), np.cos(a)], -1) * half[:, 1:]
    return np.stack([c - u - v, c + u - v, c + u + v, c - u + v], 1).astype(np.float32)


def test_box_scores_fast_matches_reference_exactly(rng: np.random.Generator) -> None:
    for case in range(120):
        h, w = (int(v) for v in rng.integers(4, [300, 600]))
        prob = rng.random((h, w)).astype(np.float32)
        boxes = _boxes(rng, h, w)
        ref = [_reference(prob, b) for b in boxes]
        assert box_scores_fast(prob, boxes).tolist() == ref, f"case {case}: {boxes.tolist()}"


def test_box_scores_fast_reads_only_the_boxes(rng: np.random.Generator) -> None:
    for case in range(100):
        h, w = (int(v) for v in rng.integers(4, [200, 400]))
        prob = rng.random((h, w)).astype(np.float32)
        boxes = _boxes(rng, h, w)
        covered = np.zeros((h, w), bool)
        for b in boxes:
            x0, y0 = np.clip(np.floor(b.min(axis=0)).astype(int), 0, [w - 1, h - 1])
            x1, y1 = np.clip(np.ceil(b.max(axis=0)).astype(int), 0, [w - 1, h - 1])
            covered[y0:y1 + 1, x0:x1 + 1] = True
        pitched = np.full((h + 3, w + 5), np.nan, np.float32)[1:h + 1, 2:w + 2]
        pitched[covered] = prob[covered]
        pitched.setflags(write=False)
        assert box_scores_fast(pitched, boxes).tolist() == box_scores_fast(prob, boxes).tolist(), f"case {case}"


def test_box_scores_fast_without_boxes() -> None:
    assert box_scores_fast(np.zeros((5, 5), np.float32), np.zeros((0, 4, 2), np.float32)).shape == (0,)
