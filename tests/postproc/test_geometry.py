"""The OpenCV-free geometry (dilation, contours, min-area rectangles, polygon fill) against OpenCV itself,
bit for bit. cv2 is a test-only reference (RapidOCR depends on it)."""

from __future__ import annotations

import numpy as np
import pytest

from vkocr.postproc.contours import contours_of_runs, find_contours, find_runs
from vkocr.postproc.db import db_boxes, dilate
from vkocr.postproc.minrect import box_points, convex_hull_indices, min_area_rect, mini_box
from vkocr.postproc.raster import fill_poly
from tests.postproc.reference import rapid_db, synthetic_map

cv2 = pytest.importorskip("cv2")
OPENCV5 = int(cv2.__version__.split(".")[0]) >= 5


def _random_points(rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(2, 40))
    pts = np.unique(rng.integers(0, int(rng.integers(3, 400)), (n, 2)), axis=0)
    rng.shuffle(pts)
    return pts


def test_convex_hull_order_matches_opencv(rng: np.random.Generator) -> None:
    for _ in range(1000):
        pts = _random_points(rng).astype(np.int32)
        ref = cv2.convexHull(pts, clockwise=False, returnPoints=False).ravel().tolist()
        assert convex_hull_indices([tuple(p) for p in pts.tolist()]) == ref, pts.tolist()


@pytest.mark.skipif(not OPENCV5, reason="the port follows OpenCV 5's minAreaRect (angle in [-90, 0))")
def test_min_area_rect_and_box_points_match_opencv(rng: np.random.Generator) -> None:
    for i in range(1000):
        pts = _random_points(rng).astype(np.int64 if i % 2 else np.int32)  # int64: pyclipper's output type
        ref = cv2.minAreaRect(pts)
        rect = min_area_rect([tuple(p) for p in pts.tolist()])
        ours = ((float(rect.center[0]), float(rect.center[1])), (float(rect.size[0]), float(rect.size[1])),
                float(rect.angle))
        assert ours == ref, pts.tolist()
        np.testing.assert_array_equal(box_points(rect), cv2.boxPoints(ref))


def test_fill_poly_matches_opencv(rng: np.random.Generator) -> None:
    for _ in range(1000):
        h, w = (int(v) for v in rng.integers(1, 40, 2))
        if rng.random() < 0.5:  # arbitrary quadrilateral, often partly outside
            pts = rng.integers(-10, 50, (4, 2))
        else:  # a rotated rectangle, like a text box
            c, a, half = rng.uniform(-5, 45, 2), rng.uniform(0, np.pi), rng.uniform(0.5, 25, 2)
            u, v = np.array([np.cos(a), np.sin(a)]) * half[0], np.array([-np.sin(a), np.cos(a)]) * half[1]
            pts = np.array([c - u - v, c + u - v, c + u + v, c - u + v]).astype(np.int32)
        ref = np.zeros((h, w), np.uint8)
        cv2.fillPoly(ref, pts.reshape(1, -1, 2).astype(np.int32), 1)
        ours = np.zeros((h, w), np.uint8)
        fill_poly(ours, [tuple(p) for p in pts.tolist()])
        np.testing.assert_array_equal(ours, ref, err_msg=f"{h}×{w} {pts.tolist()}")


def test_dilate_matches_opencv(rng: np.random.Generator) -> None:
    for _ in range(100):
        bitmap = rng.random(tuple(int(v) for v in rng.integers(1, 40, 2))) > 0.8
        ref = cv2.dilate(bitmap.astype(np.uint8), np.array([[1, 1], [1, 1]]))
        np.testing.assert_array_equal(dilate(bitmap), ref.astype(bool))


def test_contours_match_opencv(rng: np.random.Generator) -> None:
    """Same borders in the same order: hole borders are OpenCV's point for point; outer borders start where
    OpenCV's do and give OpenCV's min-area rectangle."""
    for case in range(150):
        h, w = (int(v) for v in rng.integers(8, 120, 2))
        bitmap = dilate(synthetic_map(rng, h, w) > 0.3)
        ref, _ = cv2.findContours(bitmap.astype(np.uint8) * 255, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
        ours = find_contours(bitmap).contours
        assert len(ours) == len(ref), f"case {case}"
        for mine, theirs in zip(ours, ref, strict=True):
            theirs = theirs.reshape(-1, 2)
            if mine.hole:  # (its start pixel may be dropped by CHAIN_APPROX_SIMPLE)
                np.testing.assert_array_equal(mine.points, theirs, err_msg=f"case {case}")
                continue
            assert mine.start == (theirs[0][1], theirs[0][0]), f"case {case}"
            if OPENCV5:
                assert min_area_rect([tuple(p) for p in mine.points.tolist()]) == _rect(cv2.minAreaRect(theirs))


def _rect(r: tuple) -> tuple:
    (cx, cy), (w, h), a = r
    return (np.float32(cx), np.float32(cy)), (np.float32(w), np.float32(h)), np.float32(a)


def test_contour_order_and_holes_match_opencv_on_speckle(rng: np.random.Generator) -> None:
    """Random speckle (many holes, diagonal joints, image-edge contact): same count, order, starts, holes."""
    for case in range(200):
        h, w = (int(v) for v in rng.integers(3, 80, 2))
        bitmap = rng.random((h, w)) < rng.uniform(0.05, 0.8)
        if case % 2:
            bitmap = dilate(bitmap)
        ref, _ = cv2.findContours(bitmap.astype(np.uint8) * 255, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
        ours = find_contours(bitmap).contours
        assert len(ours) == len(ref), f"case {case}"
        for mine, theirs in zip(ours, ref, strict=True):
            theirs = theirs.reshape(-1, 2)
            if mine.hole:
                np.testing.assert_array_equal(mine.points, theirs, err_msg=f"case {case}")
            else:
                assert mine.start == (theirs[0][1], theirs[0][0]), f"case {case}"


def test_thin_holes_keep_their_place_and_fall_below_min_size_untraced(rng: np.random.Generator) -> None:
    """contours_of_runs(trace_thin_holes=False) lists the same borders in the same order as OpenCV; holes one
    pixel high or wide carry a box instead of their traced border, and both that box's min-area rectangle and
    OpenCV's border's have a shorter side under DB's min_size of 3; the other holes are traced exactly."""
    thin_seen = 0
    for case in range(200):
        h, w = (int(v) for v in rng.integers(3, 80, 2))
        bitmap = rng.random((h, w)) < rng.uniform(0.3, 0.8)
        ref, _ = cv2.findContours(bitmap.astype(np.uint8) * 255, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
        runs = find_runs(bitmap)
        ours = contours_of_runs(runs, w, trace_thin_holes=False).contours
        traced = contours_of_runs(runs, w).contours
        assert len(ours) == len(ref) == len(traced), f"case {case}"
        for mine, full, theirs in zip(ours, traced, ref, strict=True):
            theirs = theirs.reshape(-1, 2)
            assert (mine.hole, mine.start) == (full.hole, full.start), f"case {case}"
            if not mine.hole or np.array_equal(mine.points, full.points):
                continue
            thin_seen += 1
            sides = mini_box(mine.points.tolist())[1], mini_box(theirs.tolist())[1]
            assert max(sides) < 3, f"case {case}: shorter sides {sides}"
    assert thin_seen > 100  # speckle is full of them


def test_db_boxes_on_speckle_full_of_thin_holes_match_rapidocr(rng: np.random.Generator) -> None:
    total = 0
    for case in range(60):
        h, w = (int(v) for v in rng.integers(10, 90, 2))
        prob = np.where(rng.random((h, w)) < rng.uniform(0.3, 0.8), rng.uniform(0.55, 1, (h, w)),
                        rng.uniform(0, 0.3, (h, w))).astype(np.float32)
        ref_boxes, ref_scores = rapid_db(prob, w, h)
        boxes, scores = db_boxes(prob, w, h)
        total += len(boxes)
        if OPENCV5:
            np.testing.assert_array_equal(boxes, ref_boxes.reshape(-1, 4, 2), err_msg=f"case {case}")
            assert scores == pytest.approx(ref_scores, rel=1e-6), f"case {case}"
        else:
            assert len(boxes) == len(ref_boxes), f"case {case}"
    assert total > 10  # boxes came out: the comparison is not vacuous
