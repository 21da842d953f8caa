"""DB's own steps around the OpenCV calls, against RapidOCR's DBPostProcess doing the same: the banded
findContours gives the whole map's contours, a read-only bitmap gives findContours' own, get_mini_boxes'
corner order (batched), and boxes and scores on speckle full of holes."""

from __future__ import annotations

import cv2
import numpy as np
from rapidocr_onnxruntime.ch_ppocr_det.utils import DBPostProcess

from tests.postproc.reference import rapid_db, synthetic_map
from vkocr.postproc.db import bitmap_contours, db_bitmap, db_boxes, db_contours, foreground_bands
from vkocr.postproc.minrect import mini_boxes
from vkocr.postproc.unclip import unclip_boxes, unclip_distances


def _rapidocr_contours(prob: np.ndarray, thresh: float, dilation: bool) -> tuple[np.ndarray, ...]:
    """DBPostProcess.__call__ and boxes_from_bitmap up to findContours, on the whole map."""
    mask = prob > thresh
    if dilation:
        mask = cv2.dilate(np.array(mask).astype(np.uint8), np.array([[1, 1], [1, 1]]))
    return cv2.findContours((mask * 255).astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)[0]


def test_banded_contours_are_the_whole_maps(rng: np.random.Generator) -> None:
    """Foreground often touches the first or last row (no empty row there to keep), or fills one row only."""
    edge_cases = 0
    for case in range(300):
        h, w = (int(v) for v in rng.integers(1, 90, 2))
        prob = np.ascontiguousarray(synthetic_map(rng, max(h, 8), max(w, 8))[:h, :w])
        if case % 3 == 0:
            prob[rng.integers(0, h)] = rng.uniform(0.2, 1, w)
        if case % 5 == 0:
            prob[:] = np.where(np.arange(h)[:, None] == rng.choice([0, h - 1]), prob, 0)
        thresh, dilation = float(rng.choice([0.3, 0.5, 0.1])), bool(case % 2)
        fg = np.flatnonzero((prob > thresh).any(axis=1))
        edge_cases += bool(fg.size) and (fg[0] == 0 or fg[-1] >= h - 2)
        ref = _rapidocr_contours(prob, thresh, dilation)
        ours = db_contours(prob, thresh, dilation)
        assert len(ours) == len(ref), f"case {case}"
        for mine, theirs in zip(ours, ref, strict=True):
            assert mine.dtype == theirs.dtype
            np.testing.assert_array_equal(mine, theirs, err_msg=f"case {case}")
    assert edge_cases > 50


def test_mini_boxes_are_get_mini_boxes(rng: np.random.Generator) -> None:
    """Contours (int32), unclipped boxes (int64, pyclipper's) and upright rectangles (boxPoints tie in x)."""
    peer = DBPostProcess()
    for case in range(200):
        sets: list[np.ndarray] = []
        for _ in range(int(rng.integers(1, 20))):
            scale = int(rng.choice([3, 10, 400]))
            pts = np.unique(rng.integers(-scale // 4, scale, (int(rng.integers(1, 40)), 2)), axis=0)
            sets.append(rng.permutation(pts).astype(np.int32).reshape(-1, 1, 2))
        x0, y0 = rng.integers(0, 100, 2)
        x1, y1 = x0 + rng.integers(1, 50), y0 + rng.integers(1, 50)
        sets.append(np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.int32).reshape(-1, 1, 2))
        c = rng.uniform(0, 300, (4, 1, 2))
        boxes = (c + rng.uniform(-30, 30, (4, 4, 2))).astype(np.float32)
        grown = unclip_boxes(boxes, unclip_distances(boxes, 1.6))
        sets += [g for g in grown if len(g)]  # a random quad may have no area, which get_mini_boxes refuses
        got, ssides = mini_boxes(sets)
        for i, pts in enumerate(sets):
            box, sside = peer.get_mini_boxes(pts)
            np.testing.assert_array_equal(got[i], box, err_msg=f"case {case}, set {i}: {pts.tolist()}")
            assert got.dtype == box.dtype and ssides[i] == sside, f"case {case}, set {i}"
    assert mini_boxes([])[0].shape == (0, 4, 2)
    _, (sside,) = mini_boxes([np.zeros((0, 1, 2))])  # what unclip gives a box with no area
    assert sside == 0


def test_db_boxes_on_speckle_full_of_holes_match_rapidocr(rng: np.random.Generator) -> None:
    total = 0
    for case in range(60):
        h, w = (int(v) for v in rng.integers(10, 90, 2))
        prob = np.where(rng.random((h, w)) < rng.uniform(0.3, 0.8), rng.uniform(0.55, 1, (h, w)),
                        rng.uniform(0, 0.3, (h, w))).astype(np.float32)
        for mode in ("fast", "slow"):
            ref_boxes, ref_scores = rapid_db(prob, w, h, score_mode=mode)
            boxes, scores = db_boxes(prob, w, h, score_mode=mode)
            np.testing.assert_array_equal(boxes, ref_boxes.reshape(-1, 4, 2), err_msg=f"case {case} {mode}")
            assert scores == ref_scores, f"case {case} {mode}"
            total += len(boxes)
    assert total > 10  # boxes came out: the comparison is not vacuous


def test_contours_of_a_read_only_bitmap_are_findcontours_of_it(rng: np.random.Generator) -> None:
    """The GPU's bitmap comes as a read-only view of the readback mapping: foreground touching each edge, or
    one pixel."""
    edges = set()
    for case in range(300):
        h, w = (int(v) for v in rng.integers(1, 70, 2))
        bitmap = np.zeros((h, w), np.uint8)
        y0, x0 = int(rng.integers(0, h)), int(rng.integers(0, w))
        y1, x1 = int(rng.integers(y0, h)) + 1, int(rng.integers(x0, w)) + 1
        bitmap[y0:y1, x0:x1] = rng.random((y1 - y0, x1 - x0)) < rng.uniform(0.2, 0.9)
        if case % 7 == 0:
            bitmap[:] = 0
            bitmap[y0, x0] = 1
        fg_rows, fg_cols = np.flatnonzero(bitmap.any(axis=1)), np.flatnonzero(bitmap.any(axis=0))
        if fg_rows.size:
            edges |= {e for e, hit in (("top", fg_rows[0] == 0), ("bottom", fg_rows[-1] == h - 1),
                                       ("left", fg_cols[0] == 0), ("right", fg_cols[-1] == w - 1)) if hit}
        ref = cv2.findContours(bitmap.copy(), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)[0]
        bitmap.flags.writeable = False
        ours = bitmap_contours(bitmap)
        assert len(ours) == len(ref), f"case {case}"
        for mine, theirs in zip(ours, ref, strict=True):
            np.testing.assert_array_equal(mine, theirs, err_msg=f"case {case}")
    assert edges == {"top", "bottom", "left", "right"}


def test_contours_of_the_foreground_boxes_are_the_whole_bitmaps(rng: np.random.Generator) -> None:
    """Spans as the GPU gives them (4-pixel words) and wider ones, blobs touching every edge, rows of blobs with
    one empty row or none between them, holes, and more runs of rows than bands (merged at the widest gaps)."""
    merged = edges = 0
    for case in range(300):
        h, w = (int(v) for v in rng.integers(1, 120, 2))
        prob = np.ascontiguousarray(synthetic_map(rng, max(h, 8), max(w, 8))[:h, :w])
        if case % 2:
            prob[rng.random(h) < 0.4] = 0  # many runs, some one row apart
        bitmap = db_bitmap(prob, float(rng.choice([0.3, 0.5])), bool(case % 3)).copy()
        rows = bitmap.any(axis=1)
        spans = np.zeros((h, 2), np.int64)
        spans[:, 0] = w
        for y in np.flatnonzero(rows):
            on = np.flatnonzero(bitmap[y])
            spans[y] = (on[0] // 4 * 4, -(-(on[-1] + 1) // 4) * 4) if case % 4 else (
                on[0] - rng.integers(0, 3), on[-1] + 1 + rng.integers(0, 3))  # words, or any superset
        spans[:, 1] = np.minimum(spans[:, 1], w)
        spans[:, 0] = np.maximum(spans[:, 0], 0)
        max_bands = int(rng.choice([1, 2, 32]))
        bands = foreground_bands(spans, h, w, max_bands)
        merged += len(bands) == max_bands < int(np.sum(np.diff(np.flatnonzero(rows)) > 1)) + 1
        edges += bool(rows.any()) and (rows[0] or rows[-1] or bitmap[:, 0].any() or bitmap[:, -1].any())
        ref = cv2.findContours(bitmap, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)[0]
        bitmap.flags.writeable = False
        ours = bitmap_contours(bitmap, spans.astype(np.uint32), max_bands)
        assert len(ours) == len(ref), f"case {case}"
        for mine, theirs in zip(ours, ref, strict=True):
            assert mine.dtype == theirs.dtype
            np.testing.assert_array_equal(mine, theirs, err_msg=f"case {case}")
        covered = np.zeros((h, w), bool)
        for top, bottom, left, right in bands:
            covered[top:bottom, left:right] = True
        assert not (bitmap.astype(bool) & ~covered).any(), f"case {case}: a set pixel outside every band"
    assert merged > 20 and edges > 50
