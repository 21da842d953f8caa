"""Polygon rasterisation exactly as ``cv2.fillPoly(mask, [pts], 1)`` (LINE_8, shift 0) does it, in NumPy.

OpenCV fills the scanlines between edges (edges in 16.16 fixed point, a row's span runs from the ceiling of
the left edge to the floor of the right one; an edge covers the rows [top, bottom), so the bottom row of the
polygon comes only from the outline) and then draws every edge as an 8-connected Bresenham line from its left
end. Edges that leave the image are clipped first (``clipLine``), and the fill uses the clipped x of the
endpoints. RapidOCR's box score is the mean probability over this mask, so pixel-exactness here keeps the
``box_thresh`` decision identical.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_SHIFT = 16
_ONE = 1 << _SHIFT


def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def clip_line(w: int, h: int, x1: int, y1: int, x2: int, y2: int) -> tuple[bool, int, int, int, int]:
    """``cv::clipLine`` for a ``w`` × ``h`` image: whether any part is inside, and the clipped endpoints."""
    right, bottom = w - 1, h - 1
    c1 = (x1 < 0) + (x1 > right) * 2 + (y1 < 0) * 4 + (y1 > bottom) * 8
    c2 = (x2 < 0) + (x2 > right) * 2 + (y2 < 0) * 4 + (y2 > bottom) * 8
    if (c1 & c2) == 0 and (c1 | c2) != 0:
        if c1 & 12:
            a = 0 if c1 < 8 else bottom
            x1 += int(float(a - y1) * (x2 - x1) / (y2 - y1))
            y1 = a
            c1 = (x1 < 0) + (x1 > right) * 2
        if c2 & 12:
            a = 0 if c2 < 8 else bottom
            x2 += int(float(a - y2) * (x2 - x1) / (y2 - y1))
            y2 = a
            c2 = (x2 < 0) + (x2 > right) * 2
        if (c1 & c2) == 0 and (c1 | c2) != 0:
            if c1:
                a = 0 if c1 == 1 else right
                y1 += int(float(a - x1) * (y2 - y1) / (x2 - x1))
                x1, c1 = a, 0
            if c2:
                a = 0 if c2 == 1 else right
                y2 += int(float(a - x2) * (y2 - y1) / (x2 - x1))
                x2, c2 = a, 0
    return (c1 | c2) == 0, x1, y1, x2, y2


def _inside(w: int, h: int, *pts: int) -> bool:
    xs, ys = pts[0::2], pts[1::2]
    return all(0 <= x < w for x in xs) and all(0 <= y < h for y in ys)


def draw_line(mask: np.ndarray, x1: int, y1: int, x2: int, y2: int) -> None:
    """``cv::Line`` with 8-connectivity: Bresenham from the left end, after clipping to the image."""
    h, w = mask.shape
    if not _inside(w, h, x1, y1, x2, y2):
        ok, x1, y1, x2, y2 = clip_line(w, h, x1, y1, x2, y2)
        if not ok:
            return
    if x2 < x1:
        x1, y1, x2, y2 = x2, y2, x1, y1
    major, minor = x2 - x1, y2 - y1
    step = -1 if minor < 0 else 1
    minor = abs(minor)
    steep = minor > major
    if steep:
        major, minor = minor, major
    k = np.arange(major + 1, dtype=np.int64)
    # OpenCV's error term starts at major - 2*minor and steps sideways while negative: closed form
    m = -((major - 2 * minor * k) // (2 * major)) if major else k
    if steep:
        mask[y1 + step * k, x1 + m] = 1
    else:
        mask[y1 + step * m, x1 + k] = 1


def _edges(pts: Sequence[tuple[int, int]], w: int, h: int) -> list[tuple[int, int, int, int]]:
    """``CollectPolyEdges``: (top row, bottom row, fixed-point x at the top row, fixed-point dx per row)."""
    edges = []
    x0, y0 = pts[-1]
    for x1, y1 in pts:
        t0x, t1x, c0y, c1y = x0, x1, y0, y1
        if not _inside(w, h, x0, y0, x1, y1):
            _, t0x, t0y, t1x, t1y = clip_line(w, h, x0, y0, x1, y1)
            if t0y != t1y:
                c0y, c1y = t0y, t1y
        if y0 != y1:
            c0x, c1x = t0x << _SHIFT, t1x << _SHIFT
            dx = _cdiv(c1x - c0x, c1y - c0y)
            if y0 < y1:
                edges.append((y0, y1, c0x + (y0 - c0y) * dx, dx))
            else:
                edges.append((y1, y0, c1x + (y1 - c1y) * dx, dx))
        x0, y0 = x1, y1
    return edges


def _fill_spans(mask: np.ndarray, edges: list[tuple[int, int, int, int]]) -> None:
    """``FillEdgeCollection``: pair the active edges of every row by x and fill between each pair."""
    h, w = mask.shape
    if len(edges) < 2:
        return
    top = max(min(e[0] for e in edges), 0)
    stop = min(max(e[1] for e in edges), h)
    if stop <= top:
        return
    y = np.arange(top, stop, dtype=np.int64)[:, None]
    y0 = np.array([e[0] for e in edges], dtype=np.int64)
    y1 = np.array([e[1] for e in edges], dtype=np.int64)
    x0 = np.array([e[2] for e in edges], dtype=np.int64)
    dx = np.array([e[3] for e in edges], dtype=np.int64)
    active = (y >= y0) & (y < y1)
    big = np.iinfo(np.int64).max
    xs = np.sort(np.where(active, x0 + (y - y0) * dx, big), axis=1)
    cover = np.zeros((stop - top, w + 1), dtype=np.int32)
    rows = np.arange(stop - top)
    for j in range(0, len(edges) - 1, 2):
        valid = xs[:, j + 1] != big
        lo = (xs[:, j] + _ONE - 1) >> _SHIFT
        hi = xs[:, j + 1] >> _SHIFT
        valid &= (lo < w) & (hi >= 0)
        lo, hi = np.clip(lo, 0, w - 1), np.clip(hi, 0, w - 1)
        valid &= lo <= hi
        np.add.at(cover, (rows[valid], lo[valid]), 1)
        np.add.at(cover, (rows[valid], hi[valid] + 1), -1)
    mask[top:stop] |= (np.cumsum(cover[:, :w], axis=1) > 0).astype(mask.dtype)


def fill_poly(mask: np.ndarray, pts: Sequence[tuple[int, int]]) -> None:
    """Set to 1 the pixels of ``mask`` (2-D uint8) that ``cv2.fillPoly(mask, [pts], 1)`` would set."""
    pts = [(int(x), int(y)) for x, y in pts]
    if not pts:
        return
    h, w = mask.shape
    x0, y0 = pts[-1]
    for x1, y1 in pts:
        draw_line(mask, x0, y0, x1, y1)
        x0, y0 = x1, y1
    _fill_spans(mask, _edges(pts, w, h))


def _cdiv_array(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.abs(a) // np.abs(b)
    return np.where((a >= 0) == (b > 0), q, -q)


def _runs(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """Where a new run of equal keys starts in sorted (or grouped) arrays."""
    new = np.zeros(keys[0].size, dtype=bool)
    new[:1] = True
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    return new


def _outline_runs(xa: np.ndarray, ya: np.ndarray, xb: np.ndarray, yb: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """draw_line's pixels of every edge (unclipped), as (edge, row, first col, last col) per row: along an
    edge, rows change monotonically and columns grow, so each row's pixels are one run."""
    swap = xb < xa
    x1, y1 = np.where(swap, xb, xa), np.where(swap, yb, ya)
    major, minor = np.abs(xb - xa), np.where(swap, ya - yb, yb - ya)
    step = np.where(minor < 0, -1, 1)
    minor = np.abs(minor)
    steep = minor > major
    major, minor = np.where(steep, minor, major), np.where(steep, major, minor)
    counts = major + 1
    edge = np.repeat(np.arange(xa.size), counts)
    k = np.arange(edge.size) - np.repeat(np.cumsum(counts) - counts, counts)
    big, small = major[edge], minor[edge]
    m = np.where(big > 0, -((big - 2 * small * k) // np.maximum(2 * big, 1)), k)
    on_steep = steep[edge]
    px = x1[edge] + np.where(on_steep, m, k)
    py = y1[edge] + step[edge] * np.where(on_steep, k, m)
    first = np.flatnonzero(_runs((edge, py)))
    last = np.r_[first[1:], edge.size] - 1
    return edge[first], py[first], px[first], px[last]


def _fill_runs(xa: np.ndarray, ya: np.ndarray, xb: np.ndarray, yb: np.ndarray, owner: np.ndarray,
               widths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """_edges and _fill_spans of unclipped polygons, all at once: (owner, row, first col, last col) of every
    span, and the owners with an odd number of edges on some row (which fill_poly pairs differently)."""
    sloped = ya != yb
    xa, ya, xb, yb, owner = xa[sloped], ya[sloped], xb[sloped], yb[sloped], owner[sloped]
    down = ya < yb
    top, bottom = np.where(down, ya, yb), np.where(down, yb, ya)
    x0 = np.where(down, xa, xb) << _SHIFT
    dx = _cdiv_array((xb - xa) << _SHIFT, yb - ya)
    counts = bottom - top
    edge = np.repeat(np.arange(top.size), counts)
    k = np.arange(edge.size) - np.repeat(np.cumsum(counts) - counts, counts)
    row, xs, who = top[edge] + k, x0[edge] + k * dx[edge], owner[edge]
    order = np.lexsort((xs, row, who))
    row, xs, who = row[order], xs[order], who[order]
    first = np.flatnonzero(_runs((who, row)))
    size = np.diff(np.r_[first, who.size])
    odd = np.unique(who[first[size % 2 == 1]])
    pos = np.arange(who.size) - np.repeat(first, size)
    left = np.flatnonzero((pos % 2 == 0) & (pos + 1 < np.repeat(size, size)))
    lo, hi = (xs[left] + _ONE - 1) >> _SHIFT, xs[left + 1] >> _SHIFT
    w = widths[who[left]]
    keep = (lo < w) & (hi >= 0)
    lo, hi = np.clip(lo, 0, w - 1), np.clip(hi, 0, w - 1)
    keep &= lo <= hi
    return who[left][keep], row[left][keep], lo[keep], hi[keep], odd


def quad_rows(quads: np.ndarray, heights: np.ndarray, widths: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What fill_poly sets for N integer quads (N, 4, 2), quad i in a heights[i] × widths[i] mask, as one
    interval per quad and row: (quad, row, first col, last col), and which quads that covers exactly. A quad
    is left out (False) when a corner lies outside its mask (fill_poly clips it) or when some row's pixels are
    not one interval; fill_poly gives those."""
    q = np.asarray(quads, np.int64).reshape(-1, 4, 2)
    n = len(q)
    heights, widths = np.asarray(heights, np.int64), np.asarray(widths, np.int64)
    x, y = q[..., 0], q[..., 1]
    exact = np.asarray(((x >= 0) & (x < widths[:, None]) & (y >= 0) & (y < heights[:, None])).all(axis=1))
    # edge j runs from corner j - 1 to corner j, as fill_poly walks them
    xa, ya = np.roll(x, 1, axis=1).reshape(-1), np.roll(y, 1, axis=1).reshape(-1)
    xb, yb = x.reshape(-1), y.reshape(-1)
    owner = np.repeat(np.arange(n), 4)
    edge, line_row, line_lo, line_hi = _outline_runs(xa, ya, xb, yb)
    span_who, span_row, span_lo, span_hi, odd = _fill_runs(xa, ya, xb, yb, owner, widths)
    exact[odd] = False
    who = np.concatenate([owner[edge], span_who])
    row = np.concatenate([line_row, span_row])
    lo = np.concatenate([line_lo, span_lo])
    hi = np.concatenate([line_hi, span_hi])
    order = np.lexsort((lo, row, who))
    who, row, lo, hi = who[order], row[order], lo[order], hi[order]
    first = _runs((who, row))
    group = np.cumsum(first) - 1
    limit = int(widths.max(initial=1))
    offset = group * (limit + 2)  # a running maximum that restarts in every row (clipped: only exact quads count)
    reach = np.maximum.accumulate(np.clip(hi, -1, limit) + offset) - offset
    gap = ~first[1:] & (lo[1:] > reach[:-1] + 1)
    exact[who[1:][gap]] = False
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], who.size] - 1
    ok = exact[who[starts]]
    starts, ends = starts[ok], ends[ok]
    return who[starts], row[starts], lo[starts], reach[ends], exact
