"""Contours of a binary map as ``cv2.findContours(RETR_LIST, CHAIN_APPROX_SIMPLE)`` lists them, without OpenCV.

DB postprocessing only needs, per contour, a point sequence whose convex hull and hull order equal OpenCV's,
and the order of the contours themselves (RapidOCR keeps the first ``max_candidates``). Both follow from
Suzuki-Abe border following, which OpenCV implements:

* Foreground is 8-connected, background 4-connected; outside the image counts as background.
* Every 8-connected component has one outer border, found by the raster scan at the component's first pixel
  (top row, leftmost), traced counter-clockwise on screen (down the left side first).
* Every 4-connected background region that does not reach the image edge (a hole) has one hole border, found
  at the foreground pixel just left of the hole's first pixel and traced clockwise on screen.
* ``RETR_LIST`` returns the borders in the reverse of the raster order in which they were found.

The map is reduced to horizontal runs; components are unions of runs that touch across adjacent rows, holes
are unions of the gaps between runs that never reach the image edge. Outer borders are not traced: the
leftmost and rightmost pixel of every row of a component, listed down the left side and up the right side,
hold every vertex of the component's hull in the order the traced border visits them, starting from the same
pixel, which is all ``convexHull`` looks at (its output order depends only on the relative order of the hull
vertices in its input); row ends that cannot be hull vertices are dropped first. Holes are rare and small, so
they are traced exactly, with OpenCV's direction rules.

Known limit: where OpenCV's border passes a hull vertex twice (a one-pixel neck that sticks out), OpenCV's
unstable sort decides which visit its hull keeps; here the vertex is listed once, on the way down. Such a
vertex would only change which of several equal-area rectangles wins, by float rounding.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

# OpenCV's chain-code directions (dx, dy): 0 = right, then counter-clockwise on screen
_STEPS = ((1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1))
_NO_RUNS = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Runs:
    """Horizontal runs of a binary map, in raster order: row, first and last column (inclusive)."""

    row: np.ndarray
    start: np.ndarray
    end: np.ndarray


@dataclass(frozen=True)
class Contour:
    """One border: ``points`` (K, 2) int64 (x, y) in traversal order, starting where OpenCV starts.

    Outer borders carry the component's possible hull vertices among its row ends (see the module docstring)
    and the indices of its runs in ``ContourSet.runs``; holes carry the traced border (OpenCV's
    ``CHAIN_APPROX_SIMPLE`` points, whose first point may differ from ``start``) and no runs.
    """

    points: np.ndarray
    hole: bool
    start: tuple[int, int]  # (row, col) of the pixel where the raster scan found the border
    runs: np.ndarray  # indices into ContourSet.runs of the component's runs (empty for a hole)


@dataclass(frozen=True)
class ContourSet:
    contours: list[Contour]  # in cv2.findContours(RETR_LIST) order
    runs: Runs


def find_contours(bitmap: np.ndarray, row_offset: int = 0) -> ContourSet:
    """All outer and hole borders of the nonzero pixels of ``bitmap``, in OpenCV's ``RETR_LIST`` order.

    ``row_offset``: ``bitmap`` is the band of a larger map that starts at this row, with no foreground outside
    it; coordinates come back in the larger map's rows."""
    fg = np.asarray(bitmap)
    if fg.dtype != np.bool_:
        fg = fg != 0
    runs = find_runs(fg)
    return contours_of_runs(Runs(runs.row + row_offset, runs.start, runs.end), fg.shape[1])


def contours_of_runs(runs: Runs, width: int, *, trace_thin_holes: bool = True) -> ContourSet:
    """``find_contours`` of the binary map (``width`` columns) whose horizontal runs these are: the pixels
    themselves are only needed to trace holes, which look them up in the runs.

    ``trace_thin_holes=False``: a hole one pixel high or wide is listed (in its place in the order) with the
    corners of the box its border lies in instead of the traced border. Its border spans at most 2 pixels
    one way, so its min-area rectangle's shorter side is at most 2·√2, under DB's minimum of 3, as is the box's
    (at most 2): DB drops it either way, without the tracing."""
    if runs.row.size == 0:
        return ContourSet([], runs)
    top = int(runs.row[0])
    band = Runs(runs.row - top, runs.start, runs.end)  # rows from the first with foreground: the hole search
    height = int(band.row[-1]) + 1  # treats the rows around the band as background, as they are
    found, cycles = _outer_borders(band, width)
    # Each hole closes one cycle in the graph of touching runs (runs − touching pairs is the Euler number, the
    # components minus the holes), so a graph without cycles has no holes to look for.
    holes = _holes(band, height, width) if cycles else []
    if holes:
        pixels = _RunLookup(band, width)
        for start, (r0, c0, r1, c1) in holes:
            if trace_thin_holes or (r1 > r0 and c1 > c0):
                points = _trace_hole(pixels, start)
            else:  # the box around the hole, one pixel out: where its border lies
                points = np.array([[c0 - 1, r0 - 1], [c1 + 1, r0 - 1], [c1 + 1, r1 + 1], [c0 - 1, r1 + 1]])
            found.append(Contour(points, True, start, _NO_RUNS))
    found.sort(key=lambda c: c.start[0] * width + c.start[1], reverse=True)
    if top:
        shift = np.array([0, top])
        found = [Contour(c.points + shift, c.hole, (c.start[0] + top, c.start[1]), c.runs) for c in found]
    return ContourSet(found, runs)


def find_runs(fg: np.ndarray) -> Runs:
    """The horizontal runs of a boolean map."""
    w = fg.shape[1]
    live = np.flatnonzero(fg.any(axis=1))  # text maps are mostly empty rows: scan only the others
    padded = np.zeros((live.size, w + 2), dtype=np.int8)
    padded[:, 1:-1] = fg[live]
    flat = padded.reshape(-1)  # the zero columns keep every run inside its row
    rows, cols = np.divmod(np.flatnonzero(flat[1:] != flat[:-1]), w + 2)
    return Runs(live[rows[0::2]].astype(np.int64), cols[0::2].astype(np.int64), cols[1::2].astype(np.int64) - 1)


def runs_from_edges(edges: np.ndarray) -> Runs:
    """The runs of a map given as packed edge bits (vkocr.agent.ocr.threshold_reference.threshold_edges' layout): per row,
    uint32 words whose set bits (LSB first, bit x of the row at word x // 32) alternate between the first
    column of a run and the column after its last. Only nonzero words are unpacked."""
    words = np.ascontiguousarray(edges, dtype=np.uint32)
    per_row = words.shape[1]
    flat = words.reshape(-1)
    nonzero = np.flatnonzero(flat != 0)  # nonzero of booleans is far faster than of integers
    if nonzero.size == 0:
        return Runs(_NO_RUNS, _NO_RUNS, _NO_RUNS)
    unpacked = np.unpackbits(flat[nonzero].astype("<u4").view(np.uint8), bitorder="little")
    bits = np.flatnonzero(unpacked.view(np.bool_))  # 0/1 bytes: as booleans, NumPy's nonzero is 10× faster
    word, bit = np.divmod(bits, 32)  # in raster order: words ascending, bits ascending within a word
    row, col = np.divmod(nonzero[word], per_row)
    x = col * 32 + bit
    return Runs(row[0::2].astype(np.int64), x[0::2].astype(np.int64), x[1::2].astype(np.int64) - 1)


def _touching(row: np.ndarray, start: np.ndarray, end: np.ndarray, slack: int, width: int) -> np.ndarray:
    """Pairs (i, j) of intervals in rows r and r + 1 (sorted by row, then start, disjoint within a row) whose
    column ranges overlap once widened by ``slack`` (1 = 8-connected foreground, 0 = 4-connected background)."""
    base = width + 4
    key_start = row * base + start
    key_end = row * base + end
    lo = np.searchsorted(key_end, (row - 1) * base + start - slack, side="left")
    hi = np.searchsorted(key_start, (row - 1) * base + end + slack, side="right")
    lo = np.maximum(lo, np.searchsorted(row, row - 1, side="left"))
    hi = np.minimum(hi, np.searchsorted(row, row - 1, side="right"))
    counts = np.maximum(hi - lo, 0)
    below = np.repeat(np.arange(row.size), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    above = np.repeat(lo, counts) + offsets
    return np.stack([above, below])


def _components(n: int, pairs: np.ndarray) -> np.ndarray:
    """A component label per node of the undirected graph with edges ``pairs`` (scipy's, not ours). The
    pairs come sorted by their second node (``_touching``), so they are already a CSR matrix's rows."""
    indptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(pairs[1], minlength=n), out=indptr[1:])
    graph = csr_matrix((np.ones(pairs.shape[1], dtype=np.int8), pairs[0].astype(np.int32), indptr), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def _outer_borders(runs: Runs, w: int) -> tuple[list[Contour], int]:
    """The outer border of every component, and the number of independent cycles of touching runs."""
    n = runs.row.size
    if n == 0:
        return [], 0
    pairs = _touching(runs.row, runs.start, runs.end, 1, w)
    comp = _components(n, pairs)
    cycles = pairs.shape[1] - n + int(comp.max()) + 1
    order = np.argsort(comp, kind="stable")  # by component, raster order within
    comp_sorted, row = comp[order], runs.row[order]
    new_row = np.ones(n, dtype=bool)
    new_row[1:] = (comp_sorted[1:] != comp_sorted[:-1]) | (row[1:] != row[:-1])
    first = np.flatnonzero(new_row)
    last = np.append(first[1:], n) - 1
    g_row, g_left, g_right, g_comp = row[first], runs.start[order][first], runs.end[order][last], comp_sorted[first]
    bounds = np.append(np.flatnonzero(np.r_[True, g_comp[1:] != g_comp[:-1]]), g_comp.size)
    run_bounds = np.append(np.flatnonzero(np.r_[True, comp_sorted[1:] != comp_sorted[:-1]]), n)
    sizes = np.diff(bounds)
    seg = np.repeat(np.arange(sizes.size), sizes)
    points, counts = _hull_paths(seg, sizes, g_row, g_left, g_right)
    paths = np.split(points, np.cumsum(counts)[:-1])
    members = np.split(order, run_bounds[1:-1])
    heads = zip(g_row[bounds[:-1]].tolist(), g_left[bounds[:-1]].tolist(), strict=True)
    return [Contour(path, False, head, m) for path, head, m in zip(paths, heads, members, strict=True)], cycles


def _new_extremes(v: np.ndarray, seg: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per segment of rows (``seg``: the segment of each row, segments in order), the rows whose value is a
    strict new minimum seen from the top or from the bottom; each segment's first and last rows count too."""
    span = int(np.abs(v).max(initial=0)) * 2 + 2  # offsets that keep the running minima inside segments
    down = np.minimum.accumulate(v - seg * span) + seg * span
    rev = sizes.size - 1 - seg[::-1]
    up = (np.minimum.accumulate(v[::-1] - rev * span) + rev * span)[::-1]
    first = np.zeros(v.size, dtype=bool)
    first[np.cumsum(sizes) - sizes] = True
    last = np.zeros(v.size, dtype=bool)
    last[np.cumsum(sizes) - 1] = True
    keep = first | last
    keep[1:] |= ~first[1:] & (v[1:] < down[:-1])
    keep[:-1] |= ~last[:-1] & (v[:-1] < up[1:])
    return keep


def _hull_paths(seg: np.ndarray, sizes: np.ndarray, row: np.ndarray, left: np.ndarray, right: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """For every component (rows grouped by ``seg``): down the left side, up the right side, keeping only the
    row ends that can be hull vertices: a left end that is not a strict new minimum from above or below lies
    between two others (likewise on the right). One-pixel rows appear once, on the way down. The paths
    concatenated, and their lengths."""
    keep_left, keep_right = _new_extremes(left, seg, sizes), _new_extremes(-right, seg, sizes)
    single = left == right
    down = np.flatnonzero(keep_left | (single & keep_right))
    up = np.flatnonzero(keep_right & ~single)[::-1]
    who = np.concatenate([seg[down], seg[up]])
    pick = np.argsort(who, kind="stable")  # per component: the way down, then the way up
    xs = np.concatenate([left[down], right[up]])[pick]
    ys = np.concatenate([row[down], row[up]])[pick]
    return np.stack([xs, ys], axis=1), np.bincount(who, minlength=sizes.size)


def _holes(runs: Runs, h: int, w: int) -> list[tuple[tuple[int, int], tuple[int, int, int, int]]]:
    """Where the raster scan finds each hole border (left of the first pixel of every enclosed background
    region), and the region's bounding box (first row, first column, last row, last column). Background is
    cut into segments between runs; a region is enclosed when none of its segments touches the image edge or
    a row without foreground."""
    n = runs.row.size
    if n < 2:
        return []
    same_row_as_prev = np.r_[False, runs.row[1:] == runs.row[:-1]]
    last_in_row = np.r_[runs.row[1:] != runs.row[:-1], True]
    # the segment before every run, and the one after the last run of each row
    seg_row = np.concatenate([runs.row, runs.row[last_in_row]])
    seg_start = np.concatenate([np.where(same_row_as_prev, np.r_[0, runs.end[:-1] + 1], 0), runs.end[last_in_row] + 1])
    seg_end = np.concatenate([runs.start - 1, np.full(int(last_in_row.sum()), w - 1)])
    keep = seg_start <= seg_end
    order = np.lexsort((seg_start[keep], seg_row[keep]))
    seg_row, seg_start, seg_end = seg_row[keep][order], seg_start[keep][order], seg_end[keep][order]
    if seg_row.size == 0:
        return []
    rows_with_fg = np.zeros(h + 2, dtype=bool)
    rows_with_fg[runs.row + 1] = True
    open_ = (
        (seg_start == 0)
        | (seg_end == w - 1)
        | ~rows_with_fg[seg_row]  # the row above has no foreground (or is outside the image)
        | ~rows_with_fg[seg_row + 2]  # the row below
    )
    comp = _components(seg_row.size, _touching(seg_row, seg_start, seg_end, 0, w))
    open_comp = np.zeros(int(comp.max()) + 1, dtype=bool)
    open_comp[comp[open_]] = True
    enclosed = np.flatnonzero(~open_comp[comp])
    if not enclosed.size:
        return []
    labels, first, inverse = np.unique(comp[enclosed], return_index=True, return_inverse=True)
    idx = enclosed[first]  # segments are in raster order: each region's first segment
    box = np.empty((4, labels.size), np.int64)
    box[0], box[2] = seg_row[idx], -1
    box[1], box[3] = w, -1
    np.maximum.at(box[2], inverse, seg_row[enclosed])
    np.minimum.at(box[1], inverse, seg_start[enclosed])
    np.maximum.at(box[3], inverse, seg_end[enclosed])
    return [((r0, c0_first - 1), (r0, c0, r1, c1)) for r0, c0_first, c0, r1, c1
            in zip(box[0].tolist(), seg_start[idx].tolist(), box[1].tolist(), box[2].tolist(), box[3].tolist(),
                   strict=True)]


class _RunLookup:
    """Whether a pixel is foreground, by binary search among its row's runs: hole tracing reads a few hundred
    pixels, far fewer than a dense map of the band would have to fill."""

    def __init__(self, runs: Runs, width: int) -> None:
        self.width = width
        self.starts, self.ends = runs.start.tolist(), runs.end.tolist()
        rows, first = np.unique(runs.row, return_index=True)
        last = np.append(first[1:], runs.row.size)
        self.rows = dict(zip(rows.tolist(), zip(first.tolist(), last.tolist(), strict=True), strict=True))

    def __call__(self, x: int, y: int) -> bool:
        span = self.rows.get(y)
        if span is None or not 0 <= x < self.width:
            return False
        i = bisect_right(self.starts, x, *span) - 1
        return i >= span[0] and self.ends[i] >= x


def _trace_hole(on: Callable[[int, int], bool], start: tuple[int, int]) -> np.ndarray:
    """The hole border from ``start`` (the foreground pixel left of the hole's first pixel), as OpenCV's
    ``icvFetchContour`` follows it, keeping the points where the direction changes (CHAIN_APPROX_SIMPLE).
    ``on(x, y)``: whether a pixel is foreground (False outside the map)."""
    y0, x0 = start
    s = s_end = 0  # a hole border starts looking right, at the hole
    while True:  # clockwise search for the first neighbour on the border
        s = (s - 1) & 7
        x1, y1 = x0 + _STEPS[s][0], y0 + _STEPS[s][1]
        if on(x1, y1) or s == s_end:
            break
    if s == s_end:
        return np.array([[x0, y0]], dtype=np.int64)
    points = []
    x3, y3 = x0, y0
    prev = s ^ 4
    while True:
        first = s
        for k in range(first + 1, first + 9):  # counter-clockwise search from the last direction
            s = k & 7
            x4, y4 = x3 + _STEPS[s][0], y3 + _STEPS[s][1]
            if on(x4, y4):
                break
        if s != prev:
            points.append((x3, y3))
            prev = s
        if (x4, y4) == (x0, y0) and (x3, y3) == (x1, y1):
            break
        x3, y3 = x4, y4
        s = (s + 4) & 7
    return np.array(points, dtype=np.int64)
