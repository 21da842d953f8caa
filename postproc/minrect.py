"""Minimum-area rectangle of a point set, bit for bit as OpenCV 5's ``cv2.minAreaRect`` + ``cv2.boxPoints``.

RapidOCR's DB postprocessing truncates box corners to integers (for the score mask) and hands them to
pyclipper, which also truncates; one float32 ulp on either side of an integer moves a box by a pixel. So this
is a faithful port, float32 operation for float32 operation, of:

* ``cv::convexHull(points, clockwise=false)`` on integer points: Sklansky's scan over the points sorted by
  (x, y), then the cyclic shift that makes the hull's indices into the input ascending or descending. The
  hull's starting vertex depends on the input order, and the calipers below break ties by it.
* ``rotatingCalipers(..., CALIPERS_MINAREARECT)`` with the ``firstVecIsRight`` edge choice (OpenCV >= 4.5.4)
  and ``minAreaRect``'s angle convention of OpenCV 5 (angle in [-90, 0)).
* ``RotatedRect::points``.

Inputs are integer points: contour pixels, or pyclipper's integer output (OpenCV treats int64 input as int32).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

_F32 = np.float32
_F32_MAX = _F32(3.4028234663852886e38)
_HALF = _F32(0.5)

Point = tuple[int, int]


class RotatedRect(NamedTuple):
    """``cv::RotatedRect``: centre, (width, height) and angle in degrees, all float32 as OpenCV keeps them."""

    center: tuple[np.float32, np.float32]
    size: tuple[np.float32, np.float32]
    angle: np.float32


def _sign(v: int) -> int:
    return (v > 0) - (v < 0)


def _sklansky(pts: Sequence[Point], start: int, end: int, nsign: int, sign2: int) -> list[int]:
    """One quarter of the hull over ``pts`` (sorted by x, y) from ``start`` to ``end``: OpenCV's ``Sklansky_``."""
    incr = 1 if end > start else -1
    if start == end or pts[start] == pts[end]:
        return [start]
    pprev, pcur, pnext = start, start + incr, start + 2 * incr
    stack = [pprev, pcur, pnext] + [0] * (abs(end - start) + 2)
    size = 3
    stop = end + incr
    while pnext != stop:
        cury = pts[pcur][1]
        by = pts[pnext][1] - cury
        if _sign(by) != nsign:
            ax = pts[pcur][0] - pts[pprev][0]
            bx = pts[pnext][0] - pts[pcur][0]
            ay = cury - pts[pprev][1]
            if _sign(ay * bx - ax * by) == sign2 and (ax != 0 or ay != 0):
                pprev, pcur = pcur, pnext
                pnext += incr
                stack[size] = pnext
                size += 1
            elif pprev == start:
                pcur = pnext
                stack[1] = pcur
                pnext += incr
                stack[2] = pnext
            else:
                stack[size - 2] = pnext
                pcur = pprev
                pprev = stack[size - 4]
                size -= 1
        else:
            pnext += incr
            stack[size - 1] = pnext
    return stack[: size - 1]


def _cyclic_shift(hull: list[int]) -> list[int]:
    """OpenCV's last step: rotate the hull so its input indices run ascending (or descending) from the start."""
    nout = len(hull)
    if nout < 3:
        return hull
    min_i = max_i = lt = 0
    for i in range(1, nout):
        idx = hull[i]
        lt += hull[i - 1] < idx
        if 1 < lt <= i - 2:
            break
        if idx < hull[min_i]:
            min_i = i
        if idx > hull[max_i]:
            max_i = i
    mmdist = abs(max_i - min_i)
    if not ((mmdist == 1 or mmdist == nout - 1) and (lt <= 1 or lt >= nout - 2)):
        return hull
    ascending = (max_i + 1) % nout == min_i
    j = min_i if ascending else max_i
    if j == 0:
        return hull
    shifted = []
    for i in range(nout):
        cur = hull[j]
        shifted.append(cur)
        nxt = j + 1 if j + 1 < nout else 0
        if i < nout - 1 and ascending != (cur < hull[nxt]):
            return hull
        j = nxt
    return shifted


def convex_hull_indices(points: Sequence[Point]) -> list[int]:
    """Indices into ``points`` of their convex hull, in the order ``cv2.convexHull(clockwise=False)`` gives."""
    total = len(points)
    if total == 0:
        return []
    order = sorted(range(total), key=lambda i: points[i])
    pts = [points[i] for i in order]
    miny = maxy = 0
    for i in range(1, total):
        y = pts[i][1]
        if pts[miny][1] > y:
            miny = i
        if pts[maxy][1] < y:
            maxy = i
    if pts[0] == pts[-1]:
        return [order[0]]
    last = total - 1
    # upper half; clockwise=false swaps OpenCV's tl/tr stacks
    tr = _sklansky(pts, 0, maxy, -1, 1)
    tl = _sklansky(pts, last, maxy, -1, -1)
    hull = tl[:-1] + tr[:0:-1]
    stop = tr[1] if len(tr) > 2 else (tl[-2] if len(tl) > 2 else -1)
    # lower half
    bl = _sklansky(pts, 0, miny, 1, -1)
    br = _sklansky(pts, last, miny, 1, 1)
    if stop >= 0:
        check = bl[1] if len(bl) > 2 else (br[2 - len(bl)] if len(bl) + len(br) > 2 else -1)
        if check == stop or (check >= 0 and pts[check] == pts[stop]):
            bl, br = bl[:2], br[:2]  # all points on one line: the lower half mirrors the upper one
    hull += bl[:-1] + br[:0:-1]
    return _cyclic_shift([order[i] for i in hull])


def _calipers(p: list[tuple[np.float32, np.float32]]) -> tuple[tuple[np.float32, np.float32], ...]:
    """``rotatingCalipers`` in CALIPERS_MINAREARECT mode: a corner and the two side vectors of the rectangle."""
    n = len(p)
    vx: list[np.float32] = []
    vy: list[np.float32] = []
    inv: list[np.float32] = []
    left = bottom = right = top = 0
    left_x = right_x = p[0][0]
    top_y = bottom_y = p[0][1]
    for i in range(n):
        x0, y0 = p[i]
        if x0 < left_x:
            left_x, left = x0, i
        if x0 > right_x:
            right_x, right = x0, i
        if y0 > top_y:
            top_y, top = y0, i
        if y0 < bottom_y:
            bottom_y, bottom = y0, i
        x1, y1 = p[(i + 1) % n]
        dx, dy = x1 - x0, y1 - y0
        vx.append(dx)
        vy.append(dy)
        inv.append(_F32(1.0 / math.sqrt(float(dx) * float(dx) + float(dy) * float(dy))))
    seq = [bottom, right, top, left]
    minarea = _F32_MAX
    best = (0, _F32(0), _F32(0), _F32(0), _F32(0), 0)
    for _ in range(n):
        rot = (
            (vx[seq[0]], vy[seq[0]]),
            (vy[seq[1]], -vx[seq[1]]),
            (-vx[seq[2]], -vy[seq[2]]),
            (-vy[seq[3]], vx[seq[3]]),
        )
        main = 0
        for i in range(1, 4):  # firstVecIsRight(rot[i], rot[main])
            if rot[i][1] * rot[main][0] + -rot[i][0] * rot[main][1] < 0:
                main = i
        k = seq[main]
        lx, ly = vx[k] * inv[k], vy[k] * inv[k]
        base_a, base_b = ((lx, ly), (ly, -lx), (-lx, -ly), (-ly, lx))[main]
        seq[main] = (seq[main] + 1) % n
        width = (p[seq[1]][0] - p[seq[3]][0]) * base_a + (p[seq[1]][1] - p[seq[3]][1]) * base_b
        height = -(p[seq[2]][0] - p[seq[0]][0]) * base_b + (p[seq[2]][1] - p[seq[0]][1]) * base_a
        area = width * height
        if area <= minarea:
            minarea = area
            best = (seq[3], base_a, width, base_b, height, seq[0])
    i_left, a1, width, b1, height, i_bottom = best
    a2, b2 = -b1, a1
    c1 = a1 * p[i_left][0] + p[i_left][1] * b1
    c2 = a2 * p[i_bottom][0] + p[i_bottom][1] * b2
    idet = _F32(1) / (a1 * b2 - a2 * b1)
    corner = ((c1 * b2 - c2 * b1) * idet, (a1 * c2 - a2 * c1) * idet)
    return corner, (a1 * width, b1 * width), (a2 * height, b2 * height)


def _length(v: tuple[np.float32, np.float32]) -> np.float32:
    return _F32(math.sqrt(float(v[0]) * float(v[0]) + float(v[1]) * float(v[1])))


def min_area_rect(points: Sequence[Point]) -> RotatedRect:
    """``cv2.minAreaRect`` of integer points (OpenCV 5: angle in [-90, 0), width along that angle)."""
    hull = [(_F32(points[i][0]), _F32(points[i][1])) for i in convex_hull_indices(points)]
    zero = _F32(0)
    angle = -math.pi / 2
    if len(hull) > 2:
        corner, side1, side2 = _calipers(hull)
        center = (corner[0] + (side1[0] + side2[0]) * _HALF, corner[1] + (side1[1] + side2[1]) * _HALF)
        size = (_length(side2), _length(side1))
        if side1[0] == 0 and side1[1] > 0:
            size = (size[1], size[0])
        else:
            angle = -math.atan2(float(side1[0]), float(side1[1]))
    elif len(hull) == 2:
        (ax, ay), (bx, by) = hull
        center = ((ax + bx) * _HALF, (ay + by) * _HALF)
        dx, dy = ax - bx, ay - by
        size = (zero, _F32(math.sqrt(float(dx) * float(dx) + float(dy) * float(dy))))
        if dx == 0:
            size = (size[1], size[0])
        elif dy < 0:
            angle = math.atan2(float(dy), float(dx))
            size = (size[1], size[0])
        elif dy > 0:
            angle = -math.atan2(float(dx), float(dy))
    elif len(hull) == 1:
        center, size = hull[0], (zero, zero)
    else:
        center, size = (zero, zero), (zero, zero)
    return RotatedRect(center, size, _F32(angle * 180 / math.pi))


def box_points(rect: RotatedRect) -> np.ndarray:
    """``cv2.boxPoints``: the four corners, float32, (4, 2)."""
    (cx, cy), (w, h), angle = rect
    radians = float(angle) * math.pi / 180
    b = _F32(math.cos(radians)) * _HALF
    a = _F32(math.sin(radians)) * _HALF
    ah, aw, bh, bw = a * h, a * w, b * h, b * w
    return np.array(
        [
            [cx - ah - bw, cy + bh - aw],
            [cx + ah - bw, cy - bh - aw],
            [cx + ah + bw, cy - bh + aw],
            [cx - ah + bw, cy + bh + aw],
        ],
        dtype=np.float32,
    )


def mini_box(points: Sequence[Point]) -> tuple[np.ndarray, float]:
    """RapidOCR's ``get_mini_boxes``: the min-area rectangle as (top-left, top-right, bottom-right,
    bottom-left) by its x-sorted corners, float32 (4, 2), and its shorter side."""
    rect = min_area_rect(points)
    pts = sorted(box_points(rect), key=lambda q: q[0])  # Python's stable sort, as RapidOCR
    i1, i4 = (0, 1) if pts[1][1] > pts[0][1] else (1, 0)
    i2, i3 = (2, 3) if pts[3][1] > pts[2][1] else (3, 2)
    return np.array([pts[i1], pts[i2], pts[i3], pts[i4]], dtype=np.float32), float(min(rect.size))


# -- many point sets at once ------------------------------------------------------------------------------------

# Edge components up to this size keep rotatingCalipers' float32 cross products exact integers (|product| <
# 2^23, their sum < 2^24): its choices are then exact angle comparisons, which a sort can make for every step.
_EXACT_EDGE = 2896
_BATCH_FROM = 8  # point sets: below this, the batch's fixed cost (~100 NumPy calls) exceeds mini_box's


def _first_at(values: np.ndarray, targets: np.ndarray, owner: np.ndarray, local: np.ndarray,
              starts: np.ndarray) -> np.ndarray:
    """Per set, the first local index whose value equals the set's target."""
    return np.minimum.reduceat(np.where(values == targets[owner], local, local.size), starts)


def _direction_keys(dx: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(quadrant, slope) of non-zero integer vectors: ordered as their angles in [0, 2π), exactly (the slope of
    the vector turned into the first quadrant is a correctly rounded ratio of small integers)."""
    quadrant = np.select([(dx > 0) & (dy >= 0), (dx <= 0) & (dy > 0), (dx < 0) & (dy <= 0)], [0, 1, 2], 3)
    rx = np.choose(quadrant, [dx, dy, -dx, -dy])
    ry = np.choose(quadrant, [dy, -dx, -dy, dx])
    return quadrant, ry / rx


def _calipers_batch(px: np.ndarray, py: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, ...]:
    """_calipers of many hulls (points concatenated, ``sizes`` each > 2, edges within _EXACT_EDGE): for each,
    (left index, a1, width, b1, height, bottom index) of its best step, and whether every area was finite.

    Each step of _calipers advances the caliper whose next edge turns least (ties: the lowest caliper), so
    its n steps are the first n of all four calipers' edge sequences merged by turning angle: one sort.
    """
    sets = sizes.size
    starts = np.cumsum(sizes) - sizes
    owner = np.repeat(np.arange(sets), sizes)
    index = np.arange(px.size)
    local = index - starts[owner]
    nxt = np.where(local + 1 < sizes[owner], index + 1, starts[owner])
    vx, vy = px[nxt] - px, py[nxt] - py
    seq0 = np.stack([_first_at(py, np.minimum.reduceat(py, starts), owner, local, starts),  # bottom
                     _first_at(px, np.maximum.reduceat(px, starts), owner, local, starts),  # right
                     _first_at(py, np.maximum.reduceat(py, starts), owner, local, starts),  # top
                     _first_at(px, np.minimum.reduceat(px, starts), owner, local, starts)], axis=1)  # left
    # every caliper's next n edges, turned into caliper 0's frame as _calipers turns them
    item_set = np.repeat(np.arange(sets), 4 * sizes)
    t = np.arange(item_set.size) - np.repeat(4 * starts, 4 * sizes)
    n = sizes[item_set]
    caliper, j = t // n, t % n
    edge = starts[item_set] + (seq0[item_set, caliper] + j) % n
    ex, ey = vx[edge], vy[edge]
    quadrant, slope = _direction_keys(np.choose(caliper, [ex, ey, -ex, -ey]), np.choose(caliper, [ey, -ex, -ey, ex]))
    back = np.zeros(item_set.size, dtype=bool)  # a turn past 2π along one caliper's walk
    back[1:] = (j[1:] > 0) & ((quadrant[1:] < quadrant[:-1]) | ((quadrant[1:] == quadrant[:-1]) & (slope[1:] < slope[:-1])))
    turns = np.cumsum(back)
    turns -= np.repeat(turns[j == 0], n[j == 0])
    order = np.lexsort((j, caliper, slope, quadrant, turns, item_set))
    steps = order[np.repeat(4 * starts, sizes) + local]  # the first n merged items of every set
    main, k = caliper[steps], edge[steps]
    moved = (main[:, None] == np.arange(4)).astype(np.int64)
    done = np.cumsum(moved, axis=0)
    done -= (done - moved)[starts][owner]
    seq = starts[owner][:, None] + (seq0[owner] + done) % sizes[owner][:, None]
    f32 = np.float32
    inv = (1.0 / np.sqrt(vx.astype(np.float64) ** 2 + vy.astype(np.float64) ** 2)).astype(f32)
    lx, ly = vx.astype(f32)[k] * inv[k], vy.astype(f32)[k] * inv[k]
    base_a = np.choose(main, [lx, ly, -lx, -ly])
    base_b = np.choose(main, [ly, -lx, -ly, lx])
    fx, fy = px.astype(f32), py.astype(f32)
    s0, s1, s2, s3 = seq.T
    width = (fx[s1] - fx[s3]) * base_a + (fy[s1] - fy[s3]) * base_b
    height = -(fx[s2] - fx[s0]) * base_b + (fy[s2] - fy[s0]) * base_a
    area = width * height
    least = np.minimum.reduceat(area, starts)
    finite = np.isfinite(least)
    best = np.maximum.reduceat(np.where(area == least[owner], index, -1), starts)  # the last, as "<="
    best = np.where(best < 0, starts, best)
    return s3[best], base_a[best], width[best], base_b[best], height[best], s0[best], finite


def _rect_boxes(fx: np.ndarray, fy: np.ndarray, i_left: np.ndarray, a1: np.ndarray, width: np.ndarray,
                b1: np.ndarray, height: np.ndarray, i_bottom: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The end of _calipers, min_area_rect, box_points and mini_box for arrays of best steps: the same float32
    operations elementwise; atan2, cos and sin come from ``math`` as there."""
    a2, b2 = -b1, a1
    c1 = a1 * fx[i_left] + fy[i_left] * b1
    c2 = a2 * fx[i_bottom] + fy[i_bottom] * b2
    idet = _F32(1) / (a1 * b2 - a2 * b1)
    corner_x, corner_y = (c1 * b2 - c2 * b1) * idet, (a1 * c2 - a2 * c1) * idet
    s1x, s1y, s2x, s2y = a1 * width, b1 * width, a2 * height, b2 * height
    cx, cy = corner_x + (s1x + s2x) * _HALF, corner_y + (s1y + s2y) * _HALF
    len1 = np.sqrt(s1x.astype(np.float64) ** 2 + s1y.astype(np.float64) ** 2).astype(_F32)
    len2 = np.sqrt(s2x.astype(np.float64) ** 2 + s2y.astype(np.float64) ** 2).astype(_F32)
    upright = (s1x == 0) & (s1y > 0)
    w, h = np.where(upright, len1, len2), np.where(upright, len2, len1)
    turn = np.array([-math.pi / 2 if u else -math.atan2(x, y)
                     for u, x, y in zip(upright.tolist(), s1x.tolist(), s1y.tolist(), strict=True)])
    radians = (turn * 180 / math.pi).astype(_F32).astype(np.float64) * math.pi / 180
    b = np.array([math.cos(r) for r in radians.tolist()]).astype(_F32) * _HALF
    a = np.array([math.sin(r) for r in radians.tolist()]).astype(_F32) * _HALF
    ah, aw, bh, bw = a * h, a * w, b * h, b * w
    pts = np.stack([np.stack([cx - ah - bw, cy + bh - aw], -1), np.stack([cx + ah - bw, cy - bh - aw], -1),
                    np.stack([cx + ah + bw, cy - bh + aw], -1), np.stack([cx - ah + bw, cy + bh + aw], -1)], 1)
    pts = np.take_along_axis(pts, np.argsort(pts[:, :, 0], axis=1, kind="stable")[:, :, None], axis=1)
    down_left, down_right = pts[:, 1, 1] > pts[:, 0, 1], pts[:, 3, 1] > pts[:, 2, 1]
    rows = np.arange(len(pts))
    box = np.stack([pts[rows, np.where(down_left, 0, 1)], pts[rows, np.where(down_right, 2, 3)],
                    pts[rows, np.where(down_right, 3, 2)], pts[rows, np.where(down_left, 1, 0)]], axis=1)
    return box, np.minimum(w, h).astype(np.float64)


def _convex_turn(point_sets: Sequence[Sequence[Point]]) -> np.ndarray:
    """Per point set: 1 where the points, in their order, are a strictly convex polygon turning left (in x, y
    coordinates) and winding once, -1 for one turning right, else 0. convex_hull_indices keeps every vertex of
    such a polygon, in input order (1) or reversed (-1): unclip's round joins give these."""
    sizes = np.array([len(p) for p in point_sets], np.int64)
    turn = np.zeros(sizes.size, np.int64)
    usable = np.flatnonzero(sizes >= 3)
    if not usable.size:
        return turn
    sizes = sizes[usable]
    flat = np.array([p for i in usable.tolist() for p in point_sets[i]], np.int64).reshape(-1, 2)
    starts = np.cumsum(sizes) - sizes
    index = np.arange(len(flat))
    owner = np.repeat(np.arange(sizes.size), sizes)
    nxt = np.where(index + 1 < starts[owner] + sizes[owner], index + 1, starts[owner])
    ex, ey = flat[nxt, 0] - flat[:, 0], flat[nxt, 1] - flat[:, 1]
    cross = ex * ey[nxt] - ey * ex[nxt]
    moving = (ex != 0) | (ey != 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        quadrant, slope = _direction_keys(np.where(moving, ex, 1), np.where(moving, ey, 0))
    later = (quadrant[nxt] > quadrant) | ((quadrant[nxt] == quadrant) & (slope[nxt] > slope))
    wraps = np.add.reduceat((~later).astype(np.int64), starts)  # directions fall back once per winding
    unwraps = np.add.reduceat(later.astype(np.int64), starts)
    left = (np.minimum.reduceat(cross, starts) > 0) & (wraps == 1)
    right = (np.maximum.reduceat(cross, starts) < 0) & (unwraps == 1)
    turn[usable] = np.where(left, 1, np.where(right, -1, 0))
    return turn


def mini_boxes(point_sets: Sequence[Sequence[Point]]) -> tuple[np.ndarray, list[float]]:
    """mini_box of many point sets: (N, 4, 2) float32 boxes and their shorter sides, bit for bit the same.
    The hulls are found one at a time; the calipers and the corner arithmetic run for all sets at once (sets
    with at most two hull points, a very long edge or a non-finite area go through mini_box)."""
    count = len(point_sets)
    boxes = np.zeros((count, 4, 2), np.float32)
    ssides = [0.0] * count
    if count < _BATCH_FROM:
        for i, pts in enumerate(point_sets):
            boxes[i], ssides[i] = mini_box(pts)
        return boxes, ssides
    turn = _convex_turn(point_sets)
    hulls = [list(pts) if t > 0 else list(pts)[::-1] if t < 0 else [pts[i] for i in convex_hull_indices(pts)]
             for pts, t in zip(point_sets, turn.tolist(), strict=True)]
    batch = np.array([i for i, h in enumerate(hulls) if len(h) > 2], np.int64)
    alone = set(range(count)) - set(batch.tolist())
    if batch.size:
        sizes = np.array([len(hulls[i]) for i in batch.tolist()], np.int64)
        flat = np.array([p for i in batch.tolist() for p in hulls[i]], np.int64)
        starts = np.cumsum(sizes) - sizes
        owner = np.repeat(np.arange(sizes.size), sizes)
        after = np.r_[flat[1:], flat[:1]]
        after[starts + sizes - 1] = flat[starts]
        short = np.maximum.reduceat(np.abs(after - flat).max(axis=1), starts) <= _EXACT_EDGE
        keep = short[owner]
        alone |= set(batch[~short].tolist())
        batch, sizes, flat = batch[short], sizes[short], flat[keep]
    if batch.size:
        *best, finite = _calipers_batch(flat[:, 0], flat[:, 1], sizes)
        box, sside = _rect_boxes(flat[:, 0].astype(_F32), flat[:, 1].astype(_F32), *best)
        boxes[batch[finite]] = box[finite]
        for i, v in zip(batch[finite].tolist(), sside[finite].tolist(), strict=True):
            ssides[i] = v
        alone |= set(batch[~finite].tolist())
    for i in sorted(alone):
        boxes[i], ssides[i] = mini_box(point_sets[i])
    return boxes, ssides
