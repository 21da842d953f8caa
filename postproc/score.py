"""Box scores of DB postprocessing: the mean probability inside a polygon, as RapidOCR computes them.

``fast`` (RapidOCR's default) averages the probability map over the rasterised min-area box; ``slow`` over
the rasterised contour. Both crop to the polygon's bounding rectangle first, as RapidOCR does, and rasterise
exactly like ``cv2.fillPoly`` (see ``raster``), so the ``box_thresh`` decision matches pixel for pixel.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from vkocr.postproc.contours import Contour, ContourSet
from vkocr.postproc.raster import fill_poly, quad_rows


def _masked_mean(region: np.ndarray, mask: np.ndarray) -> float:
    """``cv2.mean(region, mask)[0]``: the mean over the mask in float64, 0 for an empty mask."""
    picked = region[mask.astype(bool)]
    return float(picked.astype(np.float64).mean()) if picked.size else 0.0


def box_score_fast(prob: np.ndarray, box: np.ndarray) -> float:
    """RapidOCR's ``box_score_fast``: corners truncated toward zero after shifting into the box's bounding
    rectangle (floor/ceil of the float corners, clipped to the map)."""
    h, w = prob.shape
    box = np.array(box, dtype=np.float32)
    xmin = np.clip(np.floor(box[:, 0].min()).astype(np.int32), 0, w - 1)
    xmax = np.clip(np.ceil(box[:, 0].max()).astype(np.int32), 0, w - 1)
    ymin = np.clip(np.floor(box[:, 1].min()).astype(np.int32), 0, h - 1)
    ymax = np.clip(np.ceil(box[:, 1].max()).astype(np.int32), 0, h - 1)
    mask = np.zeros((int(ymax - ymin) + 1, int(xmax - xmin) + 1), dtype=np.uint8)
    box[:, 0] = box[:, 0] - xmin
    box[:, 1] = box[:, 1] - ymin
    fill_poly(mask, [(int(x), int(y)) for x, y in box.astype(np.int32)])
    return _masked_mean(prob[int(ymin) : int(ymax) + 1, int(xmin) : int(xmax) + 1], mask)


def box_score_slow(prob: np.ndarray, contours: ContourSet, contour: Contour) -> float:
    """RapidOCR's ``box_score_slow``: the mean over the filled contour polygon. For an outer border that
    polygon covers the component and everything it encloses; a hole border is rasterised directly."""
    if contour.hole:
        pts = contour.points
        x0, y0 = pts.min(axis=0)
        x1, y1 = pts.max(axis=0)
        mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), dtype=np.uint8)
        fill_poly(mask, [(int(x), int(y)) for x, y in pts - np.array([x0, y0])])
        return _masked_mean(prob[y0 : y1 + 1, x0 : x1 + 1], mask)
    runs = contours.runs
    row, start, end = runs.row[contour.runs], runs.start[contour.runs], runs.end[contour.runs]
    y0, x0 = int(row.min()), int(start.min())
    mask = np.zeros((int(row.max()) - y0 + 1, int(end.max()) - x0 + 2), dtype=np.int8)
    np.add.at(mask, (row - y0, start - x0), 1)
    np.add.at(mask, (row - y0, end - x0 + 1), -1)
    region = ndimage.binary_fill_holes(np.cumsum(mask, axis=1)[:, :-1] > 0)
    return _masked_mean(prob[y0 : y0 + region.shape[0], x0 : x0 + region.shape[1]], region)


def box_scores_fast(prob: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """box_score_fast of N boxes (N, 4, 2) at once: the same mask, as row intervals (quad_rows), each summed in
    float64 by one reduceat, then added up row by row in row order per box. (The mean can differ from
    box_score_fast's, which sums all pixels in one pairwise sum, in the last bits.)

    Only the boxes' bounding rectangles of ``prob`` are read, so it may be a large read-only view."""
    h, w = prob.shape
    box = np.asarray(boxes, np.float32).reshape(-1, 4, 2)
    n = len(box)
    scores = np.zeros(n, np.float64)
    if not n:
        return scores
    # bounding rectangle, clipped to the map; corners shifted into it in float32, then truncated
    limit = np.array([w - 1, h - 1])
    low = np.minimum(np.maximum(np.floor(box.min(axis=1)).astype(np.int32), 0), limit)
    high = np.minimum(np.maximum(np.ceil(box.max(axis=1)).astype(np.int32), 0), limit)
    quads = (box.astype(np.float64) - low[:, None]).astype(np.float32).astype(np.int32)
    widths, heights = (high - low + 1).T
    who, row, lo, hi, exact = quad_rows(quads, heights, widths)
    # Each exact box's bounding rectangle, converted into one float64 buffer (one strided copy per box: a
    # gather of just the intervals would take a second pass, and reduceat on float32 input with a float64
    # accumulator converts all of its input first), then one reduceat over every interval. A spare 0 at the
    # end keeps every interval's end a valid reduceat index.
    size = np.where(exact, heights * widths, 0)
    base = np.cumsum(size) - size
    buf = np.empty(int(base[-1] + size[-1]) + 1, np.float64)
    buf[-1] = 0.0
    rects = np.concatenate([low, high + 1, base[:, None], widths[:, None]], axis=1)[exact].tolist()
    for x0, y0, x1, y1, at, width in rects:
        buf[at:at + (y1 - y0) * width].reshape(y1 - y0, width)[...] = prob[y0:y1, x0:x1]
    length = hi - lo + 1
    bounds = np.empty((who.size, 2), np.int64)
    bounds[:, 0] = base[who] + row * widths[who] + lo
    bounds[:, 1] = bounds[:, 0] + length
    sums = np.add.reduceat(buf, bounds.reshape(-1))[0::2]
    # bincount adds each box's rows in order, from 0.0
    total = np.bincount(who, weights=sums, minlength=n)
    count = np.bincount(who, weights=length, minlength=n)
    scores[exact] = total[exact] / count[exact]
    for j in np.flatnonzero(~exact).tolist():
        scores[j] = box_score_fast(prob, box[j])
    return scores
