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

``mini_boxes`` computes the same for many point sets at once, in about a hundred NumPy calls whatever their
number: the hulls as monotone chains pruned of non-convex turns, the calipers' steps from one sort of the hull
edges by angle (``_hulls``, ``_calipers_many``). Sets outside its exact reach go through ``mini_box``.
tests/postproc/test_mini_boxes_exact.py checks it against OpenCV and ``mini_box``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain
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
    return _caliper_rect(p, *best)


def _caliper_rect(p: Sequence[tuple[np.float32, np.float32]], i_left: int, a1: np.float32, width: np.float32,
                  b1: np.float32, height: np.float32,
                  i_bottom: int) -> tuple[tuple[np.float32, np.float32], ...]:
    """The end of ``rotatingCalipers``: from its best step, a corner and the rectangle's two side vectors."""
    a2, b2 = -b1, a1
    c1 = a1 * p[i_left][0] + p[i_left][1] * b1
    c2 = a2 * p[i_bottom][0] + p[i_bottom][1] * b2
    idet = _F32(1) / (a1 * b2 - a2 * b1)
    corner = ((c1 * b2 - c2 * b1) * idet, (a1 * c2 - a2 * c1) * idet)
    return corner, (a1 * width, b1 * width), (a2 * height, b2 * height)


def _length(v: tuple[np.float32, np.float32]) -> np.float32:
    return _F32(math.sqrt(float(v[0]) * float(v[0]) + float(v[1]) * float(v[1])))


def _side_rect(corner: tuple[np.float32, np.float32], side1: tuple[np.float32, np.float32],
               side2: tuple[np.float32, np.float32]) -> RotatedRect:
    """minAreaRect's rectangle from rotatingCalipers' corner and sides."""
    center = (corner[0] + (side1[0] + side2[0]) * _HALF, corner[1] + (side1[1] + side2[1]) * _HALF)
    if side1[0] == 0 and side1[1] > 0:
        size, angle = (_length(side1), _length(side2)), -math.pi / 2
    else:
        size, angle = (_length(side2), _length(side1)), -math.atan2(float(side1[0]), float(side1[1]))
    return RotatedRect(center, size, _F32(angle * 180 / math.pi))


def min_area_rect(points: Sequence[Point]) -> RotatedRect:
    """``cv2.minAreaRect`` of integer points (OpenCV 5: angle in [-90, 0), width along that angle)."""
    hull = [(_F32(points[i][0]), _F32(points[i][1])) for i in convex_hull_indices(points)]
    zero = _F32(0)
    angle = -math.pi / 2
    if len(hull) > 2:
        return _side_rect(*_calipers(hull))
    if len(hull) == 2:
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
    return _ordered_box(min_area_rect(points))


def _ordered_box(rect: RotatedRect) -> tuple[np.ndarray, float]:
    """mini_box's corners and shorter side of a rectangle."""
    pts = sorted(box_points(rect), key=lambda q: q[0])  # Python's stable sort, as RapidOCR
    i1, i4 = (0, 1) if pts[1][1] > pts[0][1] else (1, 0)
    i2, i3 = (2, 3) if pts[3][1] > pts[2][1] else (3, 2)
    return np.array([pts[i1], pts[i2], pts[i3], pts[i4]], dtype=np.float32), float(min(rect.size))


# -- many point sets at once ------------------------------------------------------------------------------------

# Coordinates below this in magnitude: sort keys and cross products fit int64, float32 holds them exactly.
_COORD_LIMIT = 1 << 20
# Edge components up to this size keep rotatingCalipers' float32 cross products exact (|product| <= 2^24), so
# the sign of their sum, its only use, is exact: its choices are then exact angle comparisons.
_EXACT_EDGE = 4096
_TRUE = np.ones(1, bool)
# quadrant of a vector, counter-clockwise from +x, each half-open, indexed by 3 * sign(x) + sign(y) + 4
_QUADRANT = np.array([2, 2, 1, 3, 0, 1, 3, 0, 0])
_ONE_HOT = np.eye(4, dtype=np.int64)
_SCALAR_RECTS = 2  # _mini_boxes_batch finishes up to this many rectangles one at a time
_TINY = 2.0**-30  # below the least gap between distinct slopes (1 / 8192^2), above their rounding


class _Layout(NamedTuple):
    """Items of many sets concatenated set by set: per set its first item, count and last item; per item its
    set, its index within the set, the next item around its set, and its set's first item and count."""

    start: np.ndarray
    size: np.ndarray
    last: np.ndarray
    owner: np.ndarray
    local: np.ndarray
    nxt: np.ndarray
    owner_start: np.ndarray
    owner_size: np.ndarray


def _layout(owner: np.ndarray, size: np.ndarray) -> _Layout:
    start = size.cumsum() - size
    last = start + size - 1
    index = np.arange(len(owner))
    nxt = index + 1
    nxt[last] = start
    owner_start = start.take(owner)
    return _Layout(start, size, last, owner, index - owner_start, nxt, owner_start, size.take(owner))


def _hulls(xy: np.ndarray,
           sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, _Layout, np.ndarray]:
    """convex_hull_indices of many point sets of at least 3 points, concatenated in ``xy`` ((N, 2) int64).

    For distinct points not all on a line, Sklansky's scan keeps exactly the strict hull vertices (it pops on
    non-strict turns; the points it skips lie strictly inside), counter-clockwise in (x, y) from the greatest
    point in (x, y) order; the cyclic shift then starts them at the least (greatest) input index if their
    input indices run around ascending (descending). Here the vertices are the upper and lower chains of the
    sorted points, pruned of their non-convex turns, all at once, until none is left (a pruned point lies on
    or beyond the segment between its neighbours, so it is no strict vertex).

    Returns the hull vertices' x and y in OpenCV's order, set by set, the edges' x and y from each to the
    next, the hulls' layout, and per set whether it is fit for _calipers_many: not so with repeated points
    (OpenCV's unstable sort picks among them), all points on a line, or a hull edge beyond _EXACT_EDGE.
    """
    total, count = len(xy), len(sizes)
    owner = np.arange(count).repeat(sizes)
    x, y = xy[:, 0], xy[:, 1]
    key = (x << 21) + y + (owner << 42)
    order = key.argsort()
    key = key.take(order)
    repeated = key[1:] == key[:-1]
    x, y = x.take(order), y.take(order)
    # The upper chains, then the lower chains as upper chains of (x, -y), with a hull key that orders a set's
    # hull: its upper chain backwards from the greatest point, then its lower chain forwards. The key is
    # negative on chain ends, which stay; the lower chains' ends (the upper ones') sort last.
    span = 4 * total
    cx, cy = np.concatenate([x, x]), np.concatenate([y, -y])
    middle, index = owner * span + 2 * total, np.arange(total)
    tag = np.concatenate([middle - index, middle + index])
    lasts = sizes.cumsum() - 1
    ends = np.concatenate([lasts - sizes + 1, lasts])
    tag[ends] *= -1
    tag[ends + total] = -(count * span)
    while True:
        dx, dy = cx[1:] - cx[:-1], cy[1:] - cy[:-1]
        convex = dx[:-1] * dy[1:] < dy[:-1] * dx[1:]  # a right turn
        convex |= tag[1:-1] < 0
        if convex.all():
            break
        keep = np.concatenate((_TRUE, convex, _TRUE))
        cx, cy, tag = cx[keep], cy[keep], tag[keep]
    hkey = np.abs(tag)
    hkey = hkey.take(hkey.argsort()[: len(hkey) - 2 * count])
    hset = hkey // span
    spos = np.abs(hkey - hset * span - 2 * total)
    lay = _layout(hset, np.bincount(hset, minlength=count))
    usable = lay.size >= 3
    if repeated.any():
        usable[owner[1:][repeated]] = False
    # the cyclic shift: a hull whose input indices run around ascending (one descent) starts at the least,
    # one whose indices run around descending (one ascent) at the greatest
    src = order.take(spos)
    downs = np.add.reduceat(src.take(lay.nxt) < src, lay.start, dtype=np.int64)
    ascending, descending = (downs == 1).take(hset), (downs == lay.size - 1).take(hset)
    rank = np.where(ascending, src, np.where(descending, -src, lay.local))
    spos = spos.take((hset * span + rank).argsort())
    hx, hy = x.take(spos), y.take(spos)
    ex, ey = hx.take(lay.nxt) - hx, hy.take(lay.nxt) - hy
    longest = np.maximum(np.abs(ex), np.abs(ey))
    if longest.max() > _EXACT_EDGE:
        usable[hset[longest > _EXACT_EDGE]] = False
    return hx, hy, ex, ey, lay, usable


def _calipers_many(hx: np.ndarray, hy: np.ndarray, ex: np.ndarray, ey: np.ndarray,
                   lay: _Layout) -> tuple[np.ndarray, ...]:
    """_calipers of many hulls (each strictly convex, counter-clockwise, edges within _EXACT_EDGE): the hulls'
    float32 coordinates and, per hull, (left index, a1, width, b1, height, bottom index) of its best step.

    Each step of _calipers advances the caliper whose next edge turns least, the lowest caliper on ties.
    Caliper c starts at the edge leaving the first vertex extreme in its direction; turned by -90c degrees,
    that is the edge of least angle, so caliper c meets its edges in increasing turned angle. An edge in
    quadrant q turns (q - c) mod 4 quarters plus its angle within the quarter, so the n least of the 4n
    (caliper, edge) pairs are one per edge, caliper q's, in order of the angle within the quarter, then of q.

    One exception: if the last edge (vertex n - 1 to vertex 0) is axis-parallel, both its ends are extreme
    for caliper q and the first of them is vertex 0, so that caliper meets this edge last, a full turn on. The
    other n - 1 edges come as above; the n-th step is the least pair left, a quarter turn: the lowest caliper
    q - 1 of an axis-parallel edge in quadrant q.
    """
    count = len(hx)
    owner, start = lay.owner, lay.start
    big = int(lay.size.max())
    extreme = np.concatenate([hy, -hx, -hy, hx]).reshape(4, count) * big + lay.local
    first = np.minimum.reduceat(extreme, start, axis=1) % big  # first lowest, rightmost, highest, leftmost
    quadrant = _QUADRANT.take(3 * np.sign(ex) + np.sign(ey) + 4)
    ax, ay = np.abs(ex), np.abs(ey)
    # angle within the quarter, as exactly ordered keys: a correctly rounded ratio of small integers (distinct
    # ones stay distinct and ordered)
    slope = np.where(quadrant & 1, ax, ay) / (ax + ay)
    rank = slope
    lapped = slope.take(lay.last) == 0
    if lapped.any():
        rank = slope.copy()
        rank[lay.last[lapped]] = 2.0  # after the set's other edges
    if len(start) < 1 << 16:  # one float key keeps _TINY apart
        edge = (rank + (quadrant * _TINY + 4.0 * owner)).argsort()
    else:
        edge = np.lexsort((quadrant, rank, owner))
    caliper = quadrant.take(edge)
    if lapped.any():
        turn = np.minimum.reduceat(np.where(slope == 0, ((quadrant + 3) & 3) * count + np.arange(count),
                                            4 * count), start)[lapped]
        at = lay.last[lapped]
        caliper[at], edge[at] = turn // count, turn % count
    moved = _ONE_HOT.take(caliper, axis=1)
    done = moved.cumsum(axis=1)
    origin = first - (done - moved).take(start, axis=1)  # less the moves in earlier sets
    seq = (origin.take(owner, axis=1) + done) % lay.owner_size + lay.owner_start  # (4, H) after each step
    inv = (1.0 / np.sqrt(ax * ax + ay * ay)).astype(_F32)
    ux, uy = ex.astype(_F32) * inv, ey.astype(_F32) * inv
    at = caliper * count + edge
    base_a = np.concatenate([ux, uy, -ux, -uy]).take(at)  # the edge turned into its caliper's frame
    base_b = np.concatenate([uy, -ux, -uy, ux]).take(at)
    fx, fy = hx.astype(_F32), hy.astype(_F32)
    px, py = fx.take(seq), fy.take(seq)
    width = (px[1] - px[3]) * base_a + (py[1] - py[3]) * base_b
    height = (px[0] - px[2]) * base_b + (py[2] - py[0]) * base_a
    area = width * height
    least = np.minimum.reduceat(area, start)
    best = np.maximum.reduceat(np.where(area == least.take(owner), np.arange(count), -1), start)  # the last
    return fx, fy, seq[3].take(best), base_a.take(best), width.take(best), base_b.take(best), \
        height.take(best), seq[0].take(best)


def _rect_boxes(fx: np.ndarray, fy: np.ndarray, i_left: np.ndarray, a1: np.ndarray, width: np.ndarray,
                b1: np.ndarray, height: np.ndarray, i_bottom: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """_caliper_rect, _side_rect, box_points and _ordered_box for arrays of best steps: the same float32
    operations elementwise; atan2, cos and sin come from ``math`` as there."""
    a2, b2 = -b1, a1
    c1 = a1 * fx.take(i_left) + fy.take(i_left) * b1
    c2 = a2 * fx.take(i_bottom) + fy.take(i_bottom) * b2
    idet = _F32(1) / (a1 * b2 - a2 * b1)
    s1x, s1y, s2x, s2y = a1 * width, b1 * width, a2 * height, b2 * height
    cx = (c1 * b2 - c2 * b1) * idet + (s1x + s2x) * _HALF
    cy = (a1 * c2 - a2 * c1) * idet + (s1y + s2y) * _HALF
    sx, sy = np.concatenate([s1x, s2x]).astype(np.float64), np.concatenate([s1y, s2y]).astype(np.float64)
    lengths = np.sqrt(sx * sx + sy * sy).astype(_F32)
    len1, len2 = lengths[: len(sx) // 2], lengths[len(sx) // 2 :]
    upright = (s1x == 0) & (s1y > 0)
    w, h = np.where(upright, len1, len2), np.where(upright, len2, len1)
    turn = np.where(upright, -math.pi / 2, np.negative(list(map(math.atan2, s1x.tolist(), s1y.tolist()))))
    radians = ((turn * 180 / math.pi).astype(_F32).astype(np.float64) * math.pi / 180).tolist()
    b = np.array(list(map(math.cos, radians)), _F32) * _HALF
    a = np.array(list(map(math.sin, radians)), _F32) * _HALF
    ah, aw, bh, bw = a * h, a * w, b * h, b * w
    left, right, top, bottom = cx - ah, cx + ah, cy + bh, cy - bh
    # box_points' corners, corner by corner (corner k of set i at k * count + i)
    count = len(cx)
    xs = np.concatenate([left - bw, right - bw, right + bw, left + bw])
    ys = np.concatenate([top - aw, bottom - aw, bottom + aw, top + aw])
    order = np.argsort(xs.reshape(4, count), axis=0, kind="stable") * count + np.arange(count)  # as RapidOCR
    y0, y1, y2, y3 = ys.take(order)
    down_left, down_right = y1 > y0, y3 > y2
    i0, i1, i2, i3 = order
    pick = np.concatenate([np.where(down_left, i0, i1), np.where(down_right, i2, i3),
                           np.where(down_right, i3, i2), np.where(down_left, i1, i0)])
    box = np.empty((count, 4, 2), _F32)
    box[:, :, 0] = xs.take(pick).reshape(4, count).T
    box[:, :, 1] = ys.take(pick).reshape(4, count).T
    return box, np.minimum(w, h).astype(np.float64)


def _mini_boxes_batch(xy: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """mini_box of point sets of at least 3 points, concatenated in ``xy`` ((N, 2) int64, |coordinates| <
    _COORD_LIMIT): boxes, shorter sides, and per set whether it was done (else: left to mini_box)."""
    hx, hy, ex, ey, lay, usable = _hulls(xy, sizes)
    if not usable.all():
        xy, sizes = np.compress(usable.repeat(sizes), xy, axis=0), sizes[usable]
        if not sizes.size:
            return np.zeros((len(usable), 4, 2), _F32), np.zeros(len(usable)), usable
        hx, hy, ex, ey, lay, _ = _hulls(xy, sizes)
    fx, fy, *best = _calipers_many(hx, hy, ex, ey, lay)
    if len(lay.size) > _SCALAR_RECTS:
        box, sside = _rect_boxes(fx, fy, *best)
    else:  # a few: one at a time costs less than the arrays' fixed cost
        box, sside = np.empty((len(lay.size), 4, 2), _F32), np.empty(len(lay.size))
        for k, (left, a1, width, b1, height, bottom) in enumerate(zip(*best, strict=True)):
            ends = [(fx[left], fy[left]), (fx[bottom], fy[bottom])]
            box[k], sside[k] = _ordered_box(_side_rect(*_caliper_rect(ends, 0, a1, width, b1, height, 1)))
    if usable.all():
        return box, sside, usable
    boxes, ssides = np.zeros((len(usable), 4, 2), _F32), np.zeros(len(usable))
    boxes[usable], ssides[usable] = box, sside
    return boxes, ssides, usable


def _concatenated(point_sets: Sequence[Sequence[Point] | np.ndarray], chosen: list[int],
                  total: int) -> np.ndarray | None:
    """The chosen point sets' points, concatenated, (total, 2) int64; None unless all are integers below
    _COORD_LIMIT in magnitude (the batch's keys and products rely on that)."""
    if all(isinstance(point_sets[i], np.ndarray) for i in chosen):
        xy = np.concatenate([point_sets[i] for i in chosen]).reshape(-1, 2)
        if xy.dtype.kind not in "iu":
            return None
        xy = xy.astype(np.int64, copy=False)
    else:
        coordinates = chain.from_iterable(chain.from_iterable(point_sets[i] for i in chosen))
        flat = np.fromiter(coordinates, np.float64, 2 * total)
        xy = flat.astype(np.int64).reshape(-1, 2)
        if (xy.ravel() != flat).any():
            return None
    return xy if np.abs(xy).max() < _COORD_LIMIT else None


def mini_boxes(point_sets: Sequence[Sequence[Point] | np.ndarray]) -> tuple[np.ndarray, list[float]]:
    """mini_box of many point sets (sequences of (x, y), or (K, 2) integer arrays, the fastest): (N, 4, 2)
    float32 boxes and their shorter sides, bit for bit the same. All sets go through _mini_boxes_batch at once
    but those it declines (fewer than 3 points, repeated points, all on a line, a very long hull edge,
    non-integers or huge coordinates), which go through mini_box."""
    count = len(point_sets)
    sizes = [len(p) for p in point_sets]
    declined = [i for i, n in enumerate(sizes) if n < 3]
    batch = [i for i, n in enumerate(sizes) if n >= 3] if declined else list(range(count))
    boxes = np.zeros((count, 4, 2), np.float32)
    ssides = [0.0] * count
    if batch:
        counts = [sizes[i] for i in batch]
        xy = _concatenated(point_sets, batch, sum(counts))
        if xy is None:
            declined += batch
        else:
            box, sside, done = _mini_boxes_batch(xy, np.array(counts))
            if not declined and done.all():
                return box, sside.tolist()
            boxes[batch] = box
            for i, v, ok in zip(batch, sside.tolist(), done.tolist(), strict=True):
                ssides[i] = v
                if not ok:
                    declined.append(i)
    for i in declined:
        pts = point_sets[i]
        pts = np.reshape(pts, (-1, 2)).tolist() if isinstance(pts, np.ndarray) else pts
        boxes[i], ssides[i] = mini_box(pts)
    return boxes, ssides
