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
