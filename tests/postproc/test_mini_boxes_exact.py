"""mini_boxes, which does all point sets at once in NumPy, against OpenCV and against mini_box, the port it
shortcuts, bit for bit: random calls mixing sets rich in ties (small coordinates, axis-parallel edges,
symmetric shapes), pixel contours, convex polygons, degenerate sets (none to two points, all on a line,
repeated points) and long edges. Each case has its own seed, given in every failure message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from vkocr.postproc import minrect
from vkocr.postproc.contours import find_contours
from vkocr.postproc.db import dilate
from vkocr.postproc.minrect import mini_box, mini_boxes
from vkocr.postproc.unclip import unclip_boxes, unclip_distances
from tests.postproc.reference import synthetic_map

cv2 = pytest.importorskip("cv2")
OPENCV5 = int(cv2.__version__.split(".")[0]) >= 5

Points = list[tuple[int, int]]


def _cloud(rng: np.random.Generator) -> Points:
    scale = int(rng.choice([2, 3, 5, 16, 300, 3000]))
    pts = rng.integers(-scale // 3, scale, (int(rng.integers(3, 40)), 2))
    if rng.random() < 0.7:
        pts = np.unique(pts, axis=0)
        rng.shuffle(pts)
    return [(int(x), int(y)) for x, y in pts]


def _contour(rng: np.random.Generator) -> Points:
    h, w = (int(v) for v in rng.integers(6, 50, 2))
    found = find_contours(dilate(synthetic_map(rng, h, w) > 0.3)).contours
    if not found:
        return _cloud(rng)
    pts = found[int(rng.integers(len(found)))].points + rng.integers(-50, 3000, 2)
    return [(int(x), int(y)) for x, y in pts]


def _polygon(rng: np.random.Generator) -> Points:
    """unclip's output: (nearly) convex, in order (either way round, from any vertex)."""
    c, a = rng.uniform(0, 400, 2), rng.uniform(0, np.pi)
    if rng.random() < 0.3:
        a = rng.choice([0, np.pi / 2, np.pi / 4])
    u = np.array([np.cos(a), np.sin(a)]) * rng.uniform(0.5, 60)
    v = np.array([-np.sin(a), np.cos(a)]) * rng.uniform(0.5, 20)
    box = np.array([[c - u - v, c + u - v, c + u + v, c - u + v]], np.float32)
    pts = unclip_boxes(box, unclip_distances(box, float(rng.uniform(0.5, 3))).tolist())[0]
    if not pts:
        return _cloud(rng)
    start = int(rng.integers(len(pts)))
    pts = pts[start:] + pts[:start]
    return pts[::-1] if rng.random() < 0.5 else pts


def _rectangle(rng: np.random.Generator) -> Points:
    """Axis-parallel or diagonal rectangles and squares, with their edges' lattice points or not: every
    rectangle ties in area with its quarter turn, and the last hull edge is often axis-parallel."""
    w, h = (int(v) for v in rng.integers(1, 8, 2))
    if rng.random() < 0.3:
        h = w
    x0, y0 = (int(v) for v in rng.integers(-5, 100, 2))
    if rng.random() < 0.5:
        ring = [(x0 + i, y0) for i in range(w)] + [(x0 + w, y0 + j) for j in range(h)]
        ring += [(x0 + w - i, y0 + h) for i in range(w)] + [(x0, y0 + h - j) for j in range(h)]
    else:  # turned by 45 degrees
        ring = [(x0 + i, y0 + i) for i in range(w)] + [(x0 + w - j, y0 + w + j) for j in range(h)]
        ring += [(x0 + w - h - i, y0 + w + h - i) for i in range(w)]
        ring += [(x0 - h + j, y0 + h - j) for j in range(h)]
    if rng.random() < 0.5:
        ring = ring[:: max(1, len(ring) // 4)]
    start = int(rng.integers(len(ring)))
    ring = ring[start:] + ring[:start]
    if rng.random() < 0.3:
        rng.shuffle(ring)
    return ring[::-1] if rng.random() < 0.5 else ring


def _round_shape(rng: np.random.Generator) -> Points:
    """Lattice points near a circle or an ellipse: symmetric, so many caliper steps tie in area."""
    r = rng.uniform(1, 12)
    t = np.linspace(0, 2 * np.pi, int(rng.integers(4, 40)), endpoint=False) + rng.choice([0, rng.random()])
    xy = np.round(np.stack([r * np.cos(t), r * rng.choice([1, 0.5]) * np.sin(t)], 1)).astype(int) + 50
    pts = list(dict.fromkeys((int(x), int(y)) for x, y in xy))
    return pts[::-1] if rng.random() < 0.5 else pts


def _degenerate(rng: np.random.Generator) -> Points:
    kind = int(rng.integers(5))
    if kind == 0:
        return [(int(x), int(y)) for x, y in rng.integers(0, 9, (int(rng.integers(0, 3)), 2))]
    if kind == 1:  # all on a line, some repeated
        d, o = rng.integers(-3, 4, 2), rng.integers(-20, 20, 2)
        steps = rng.integers(-5, 6, int(rng.integers(3, 12)))
        return [(int(o[0] + k * d[0]), int(o[1] + k * d[1])) for k in steps]
    if kind == 2:  # one point, many times
        p = (int(rng.integers(-9, 9)), int(rng.integers(-9, 9)))
        return [p] * int(rng.integers(3, 6))
    if kind == 3:  # a hull edge too long for the batch's exact order
        pts = _cloud(rng)
        return [*pts, (pts[0][0] + int(rng.integers(4090, 9000)), pts[0][1] + int(rng.integers(-50, 50)))]
    pts = _cloud(rng)  # repeated points
    return pts + [pts[int(i)] for i in rng.integers(len(pts), size=int(rng.integers(1, 4)))]


SHAPES: list[Callable[[np.random.Generator], Points]] = [_cloud, _contour, _polygon, _rectangle, _round_shape,
                                                         _degenerate]


def _cv2_mini_box(pts: Points) -> tuple[np.ndarray, float]:
    """RapidOCR's get_mini_boxes with OpenCV."""
    rect = cv2.minAreaRect(np.array(pts, np.int32).reshape(-1, 1, 2))
    corners = sorted(cv2.boxPoints(rect), key=lambda q: q[0])
    i1, i4 = (0, 1) if corners[1][1] > corners[0][1] else (1, 0)
    i2, i3 = (2, 3) if corners[3][1] > corners[2][1] else (3, 2)
    return np.array([corners[i1], corners[i2], corners[i3], corners[i4]], np.float32), float(min(rect[1]))


def _case(rng: np.random.Generator, count: int) -> tuple[int, list[Points]]:
    seed = int(rng.integers(2**63))
    case = np.random.default_rng(seed)
    return seed, [SHAPES[int(case.integers(len(SHAPES)))](case) for _ in range(count)]


def _check(seed: int, sets: list[Points], got: tuple[np.ndarray, list[float]]) -> None:
    boxes, ssides = got
    assert boxes.dtype == np.float32 and boxes.shape == (len(sets), 4, 2) and len(ssides) == len(sets)
    for i, pts in enumerate(sets):
        where = f"seed {seed}, set {i}: {pts}"
        box, sside = mini_box(pts)
        np.testing.assert_array_equal(boxes[i], box, err_msg=where)
        assert ssides[i] == sside, where
        if OPENCV5 and len(pts) and len(set(pts)) == len(pts):  # OpenCV's unstable sort picks among repeats
            ref_box, ref_sside = _cv2_mini_box(pts)
            np.testing.assert_array_equal(boxes[i], ref_box, err_msg=where)
            assert ssides[i] == ref_sside, where


TAILS = {"one_at_a_time": 10**9, "all_at_once": -1}  # how _mini_boxes_batch finishes the rectangles


@pytest.mark.parametrize("tail", TAILS)
def test_mini_boxes_match_opencv_and_mini_box(rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch,
                                              tail: str) -> None:
    monkeypatch.setattr(minrect, "_SCALAR_RECTS", TAILS[tail])
    for _ in range(120):
        seed, sets = _case(rng, int(rng.integers(1, 40)))
        _check(seed, sets, mini_boxes(sets))


def test_mini_boxes_take_arrays(rng: np.random.Generator) -> None:
    """(K, 2) integer arrays, as contours hold their points, and lists of lists give the same as tuples."""
    for _ in range(40):
        seed, sets = _case(rng, int(rng.integers(1, 30)))
        dtype = (np.int64, np.int32)[int(rng.integers(2))]
        _check(seed, sets, mini_boxes([np.array(p, dtype).reshape(-1, 2) for p in sets]))
        lists: Any = [[list(p) for p in pts] for pts in sets]  # as db.py's contour.points.tolist()
        _check(seed, sets, mini_boxes(lists))


def test_mini_boxes_of_few_sets(rng: np.random.Generator) -> None:
    for count in (0, 1, 1, 2, 2, 3):
        seed, sets = _case(rng, count)
        _check(seed, sets, mini_boxes(sets))


def test_mini_boxes_decline_floats() -> None:
    """Non-integer points go through mini_box as they are, not truncated."""
    sets: list[Any] = [[(0.5, 0), (3, 1.25), (2, 4), (0, 3)], [(0, 0), (3, 1), (2, 4), (0, 3)]]
    boxes, ssides = mini_boxes(sets)
    for i, pts in enumerate(sets):
        box, sside = mini_box(pts)
        np.testing.assert_array_equal(boxes[i], box)
        assert ssides[i] == sside


def test_hulls_match_opencv(rng: np.random.Generator) -> None:
    """The batch's strict hulls, in convexHull's order from its starting vertex, and the sets it declines."""
    for _ in range(50):
        seed, sets = _case(rng, 30)
        sets = [p for p in sets if len(p) >= 3]
        xy = np.array([q for p in sets for q in p], np.int64)
        hx, hy, _, _, lay, usable = minrect._hulls(xy, np.array([len(p) for p in sets]))
        for i, pts in enumerate(sets):
            where = f"seed {seed}, set {i}: {pts}"
            ref = cv2.convexHull(np.array(pts, np.int32), clockwise=False, returnPoints=False).ravel()
            expected = [pts[j] for j in ref]
            fit = len(set(pts)) == len(pts) and len(expected) >= 3
            longest = np.abs(np.diff(expected + expected[:1], axis=0)).max() if fit else 0
            assert bool(usable[i]) == (fit and longest <= minrect._EXACT_EDGE), where
            if fit:
                mine = list(zip(hx[lay.owner == i].tolist(), hy[lay.owner == i].tolist(), strict=True))
                assert mine == expected, where


def test_calipers_many_match_calipers(rng: np.random.Generator) -> None:
    """The batch's caliper order against the port's step-by-step rotatingCalipers, on the hulls of many
    random sets (a fair share with an axis-parallel last edge, the exception in the order)."""
    lapped = 0
    for _ in range(60):
        seed, sets = _case(rng, 30)
        sets = [p for p in sets if len(p) >= 3]
        xy = np.array([q for p in sets for q in p], np.int64)
        hx, hy, ex, ey, lay, usable = minrect._hulls(xy, np.array([len(p) for p in sets]))
        keep = usable.take(lay.owner)
        sizes = lay.size[usable]
        if not sizes.size:
            continue
        hx, hy, ex, ey = hx[keep], hy[keep], ex[keep], ey[keep]
        lay = minrect._layout(np.repeat(np.arange(sizes.size), sizes), sizes)
        fx, fy, *best = minrect._calipers_many(hx, hy, ex, ey, lay)
        for k, (i, start, size) in enumerate(zip(np.flatnonzero(usable), lay.start, lay.size, strict=True)):
            hull = [(fx[j], fy[j]) for j in range(start, start + size)]
            where = f"seed {seed}, set {i}: {sets[i]}"
            lapped += hull[-1][0] == hull[0][0] or hull[-1][1] == hull[0][1]
            left, a1, width, b1, height, bottom = (v[k] for v in best)  # vertex indices are into all hulls
            mine = minrect._caliper_rect(hull, int(left) - start, a1, width, b1, height, int(bottom) - start)
            assert mine == minrect._calipers(hull), where
    assert lapped > 50
