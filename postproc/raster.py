"""Polygon rasterisation exactly as ``cv2.fillPoly(mask, [pts], 1)`` (LINE_8, shift 0) does it, in NumPy.

OpenCV fills the scanlines between edges (edges in 16.16 fixed point, a row's span runs from the ceiling of
the left edge to the floor of the right one; an edge covers the rows [top, bottom), so the bottom row of the
polygon comes only from the outline) and then draws every edge as an 8-connected Bresenham line from its left
end. Edges that leave the image are clipped first (``clipLine``), and the fill uses the clipped x of the
endpoints. RapidOCR's box score is the mean probability over this mask, so pixel-exactness here keeps the
``box_thresh`` decision identical.

``quad_rows`` gives the masks of many quads at once as one interval per row, each edge's outline run and fill
crossing in a row coming from a closed form instead of from walking the edge.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_SHIFT = 16
_ONE = 1 << _SHIFT
_FEW_ROWS = 1200  # below this many rows in all, _every_row is faster than _band_rows
_EXACT_AREA = 1 << 37  # _edge_table's float64 values are exact for masks below this many pixels


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


def _quad_rows_general(quads: np.ndarray, heights: np.ndarray, widths: np.ndarray
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


def _edge_table(q: np.ndarray) -> np.ndarray:
    """What draw_line and _fill_spans set in a row, in closed form, for the four edges of M integer quads with
    no clipping, as (10, edge, M) float64: a, c_first, c_last, d, dxf, cx, x1, x2, ymin, ymax.

    In row r, edge e's outline run is [floor((a*r + c_first) / d), floor((a*r + c_last) / d)] clipped to
    [x1, x2], if ymin <= r <= ymax; its fill crossing, in 16.16 fixed point, is dxf*r + cx, if ymin <= r < ymax.
    All values are integers, exact in float64 while a mask's height × width stays below 2**37, and the floor
    (or truncation) of the correctly rounded quotient of two such integers is the exact one."""
    b = q.astype(np.float64).transpose(2, 1, 0)  # (x/y, corner, M)
    a_end = b[:, [3, 0, 1, 2]]  # edge j runs from corner j - 1 to corner j
    (x, y), (xa, ya), (dx, dy_signed) = b, a_end, b - a_end
    # draw_line walks from the left end (x1, y1): column x1 + k, k in [0, x2 - x1], lands in row
    # y1 + step*j, where j steps as the error term says; solved for k, that is one range per row
    x1, y1 = np.where(dx < 0, b, a_end)
    x2 = x1 + np.abs(dx)
    dy = np.abs(dy_signed)
    d = np.maximum(2 * dy, 1)
    a = 2 * dx * np.sign(dy_signed)  # 2 * (x2 - x1) * step
    base = x1 * d - a * y1
    steep = dy > x2 - x1  # one pixel per row
    c_last = base + np.where(steep, dy - 1, x2 - x1)
    c_first = np.where(steep, c_last, base + 2 * dy - (x2 - x1))
    # _edges: the crossing starts at the upper end and moves by dxf, C's truncating division, per row
    ymin, ymax = np.minimum(y, ya), np.maximum(y, ya)
    dxf = np.trunc(dx * _ONE / (dy_signed + (dy == 0)))
    cx = np.where(ya < y, xa, x) * _ONE - ymin * dxf
    return np.stack([a, c_first, c_last, d, dxf, cx, x1, x2, ymin, ymax])


def _all_edges(table: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every interval in rows r (float) of the quads whose edge table (10, edge, ...) is given, as firsts and
    lasts (5, ...): the four outline runs, then the fill span; an empty one is (inf, -inf). At most two edges
    may cross a row (the fill span lies between the two)."""
    a, c_first, c_last, d, dxf, cx, x1, x2, ymin, ymax = table
    above = r >= ymin
    on = above & (r <= ymax)
    ar = a * r
    lo = np.where(on, np.maximum(np.floor((ar + c_first) / d), x1), np.inf)
    hi = np.where(on, np.minimum(np.floor((ar + c_last) / d), x2), -np.inf)
    xs = dxf * r + cx
    crossing = above & (r < ymax)
    fill_lo = np.floor((np.where(crossing, xs, np.inf).min(axis=0) + (_ONE - 1)) / _ONE)
    fill_hi = np.floor(np.where(crossing, xs, -np.inf).max(axis=0) / _ONE)
    filled = fill_lo <= fill_hi  # false without crossings (inf > -inf)
    fill_lo, fill_hi = np.where(filled, fill_lo, np.inf), np.where(filled, fill_hi, -np.inf)
    return np.concatenate([lo, fill_lo[None]]), np.concatenate([hi, fill_hi[None]])


def _one_interval(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether the intervals [lo, hi] (K, rows; an empty one is (inf, -inf)) of each row form one interval:
    each one that starts right of the row's first pixel starts at most one past the end of one starting
    before it."""
    touches = (lo[None] < lo[:, None]) & (lo[:, None] <= hi[None] + 1)  # [i, j]: j reaches i's start
    return ((lo == lo.min(axis=0)) | np.isinf(lo) | touches.any(axis=1)).all(axis=0)


def _every_row(q: np.ndarray) -> tuple[np.ndarray, ...]:
    """The mask rows of M integer quads whose corners lie inside their masks and whose rows cross at most two
    edges, from each quad's top corner to its bottom one: (quad, row, first pixel, last pixel, whether the
    row's pixels form one interval). Every row gets all five intervals (_all_edges): few NumPy calls, so the
    fastest for few rows."""
    top, bottom = q[..., 1].min(axis=1), q[..., 1].max(axis=1)
    heights = bottom - top + 1
    owner = np.repeat(np.arange(len(q)), heights)
    row = np.arange(owner.size) + (top - np.cumsum(heights) + heights)[owner]
    lo, hi = _all_edges(np.repeat(_edge_table(q), heights, axis=2), row.astype(np.float64))
    return owner, row, lo.min(axis=0), hi.max(axis=0), _one_interval(lo, hi)


def _band_rows(q: np.ndarray) -> tuple[np.ndarray, ...]:
    """_every_row, with less work per row: for many rows.

    Strictly between two consecutive corner rows, exactly the two edges that span them touch a row; both
    cross it, and there their outline runs need no clipping. Such a row costs those two runs and the fill span
    between them, and is one interval when both runs reach the (non-empty) fill span. Only the corner rows get
    all five intervals, and the check (as do the rest, rows of a thin quad, when there are any)."""
    m = len(q)
    table = _edge_table(q)
    corners = np.sort(q[..., 1].T, axis=0).astype(np.float64)  # (4, M), top to bottom
    # the two edges spanning each band [corner k, corner k + 1) (in an empty band, any two)
    spans = (table[8][None] <= corners[:3, None]) & (table[9][None] >= corners[1:, None])  # (band, edge, M)
    pair = np.stack([spans.argmax(axis=1), 3 - spans[:, ::-1].argmax(axis=1)])  # (2, band, M)
    sizes = np.diff(corners, axis=0).T.astype(np.int64)  # (M, band)
    sizes[:, 2] += 1  # the bottom corner row (recomputed below)
    pairs = table[:6, pair, np.arange(m)].transpose(0, 1, 3, 2).reshape(6, 2, 3 * m)
    a, c_first, c_last, d, dxf, cx = np.repeat(pairs, sizes.reshape(-1), axis=2)  # (2, rows) each
    heights = sizes.sum(axis=1)
    owner = np.repeat(np.arange(m), heights)
    start = np.cumsum(heights) - heights
    r = np.arange(owner.size) + (corners[0] - start)[owner]
    lo = a * r  # in place from here: these arrays are the bulk of the work
    hi = lo + c_last
    lo += c_first
    lo /= d
    hi /= d
    lo, hi = np.floor(lo, out=lo), np.floor(hi, out=hi)
    xs = dxf * r
    xs += cx
    fill_lo = xs.min(axis=0)
    fill_lo += _ONE - 1
    fill_lo, fill_hi = np.floor(fill_lo / _ONE), np.floor(xs.max(axis=0) / _ONE)
    first, last = np.minimum(lo.min(axis=0), fill_lo), np.maximum(hi.max(axis=0), fill_hi)
    one = (fill_lo <= fill_hi) & (lo.max(axis=0) <= fill_hi + 1) & (hi.min(axis=0) >= fill_lo - 1)
    # corner rows: all five intervals
    at = (corners - corners[0] + start).T.reshape(-1).astype(np.int64)
    corner_lo, corner_hi = (v.reshape(5, -1) for v in _all_edges(table[..., None], corners.T))
    first[at], last[at] = corner_lo.min(axis=0), corner_hi.max(axis=0)
    one[at] = _one_interval(corner_lo, corner_hi)
    # other rows whose runs miss the fill span (a thin quad): the two runs and the fill span, if not empty
    thin = np.flatnonzero(~one)
    thin = thin[~np.isin(thin, at)] if thin.size else thin
    if thin.size:
        filled = fill_lo[thin] <= fill_hi[thin]
        thin_lo = np.concatenate([lo[:, thin], np.where(filled, fill_lo[thin], np.inf)[None]])
        thin_hi = np.concatenate([hi[:, thin], np.where(filled, fill_hi[thin], -np.inf)[None]])
        first[thin], last[thin] = thin_lo.min(axis=0), thin_hi.max(axis=0)
        one[thin] = _one_interval(thin_lo, thin_hi)
    return owner, r.astype(np.int64), first, last, one


def quad_rows(quads: np.ndarray, heights: np.ndarray, widths: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What fill_poly sets for N integer quads (N, 4, 2), quad i in a heights[i] × widths[i] mask, as one
    interval per quad and row: (quad, row, first col, last col), each quad's rows together and in ascending
    order, and which quads that covers exactly. A quad is left out (False) when a corner lies outside its mask
    (fill_poly clips it) or when some row's pixels are not one interval; fill_poly gives those.

    Rows come in closed form, all quads at once (_every_row, _band_rows); a quad with a row that crosses all
    four edges (not convex), or in a huge mask, goes through _quad_rows_general, which walks the edges and
    pairs crossings by sorting them."""
    q = np.asarray(quads, np.int64).reshape(-1, 4, 2)
    heights, widths = np.asarray(heights, np.int64), np.asarray(widths, np.int64)
    x, y = q[..., 0], q[..., 1]
    exact = np.asarray(((x >= 0) & (x < widths[:, None]) & (y >= 0) & (y < heights[:, None])).all(axis=1))
    ya = y[:, [3, 0, 1, 2]]
    four = np.maximum(y, ya).min(axis=1) > np.minimum(y, ya).max(axis=1)  # some row is in every edge's range
    walk = four | (heights * widths >= _EXACT_AREA)
    simple = np.flatnonzero(exact & ~walk)
    who = row = lo_col = hi_col = np.zeros(0, np.int64)
    if simple.size:
        rows = _every_row if int(heights[simple].sum()) < _FEW_ROWS else _band_rows
        owner, row, first, last, one = rows(q[simple])
        split = np.zeros(simple.size, bool)
        split[owner[~one]] = True
        exact[simple[split]] = False
        keep = np.flatnonzero(~split[owner])
        who, row = simple[owner[keep]], row[keep]
        lo_col, hi_col = first[keep].astype(np.int64), last[keep].astype(np.int64)
    general = np.flatnonzero(exact & walk)
    if general.size:
        g_who, g_row, g_lo, g_hi, exact[general] = _quad_rows_general(q[general], heights[general],
                                                                       widths[general])
        who, row = np.concatenate([who, general[g_who]]), np.concatenate([row, g_row])
        lo_col, hi_col = np.concatenate([lo_col, g_lo]), np.concatenate([hi_col, g_hi])
    return who, row, lo_col, hi_col, exact
