"""Box scores of DB postprocessing: the mean probability inside a polygon, as RapidOCR computes them.

``fast`` (RapidOCR's default) averages the probability map over the rasterised min-area box; ``slow`` over
the rasterised contour. Both crop to the polygon's bounding rectangle first, as RapidOCR does, and rasterise
exactly like ``cv2.fillPoly`` (see ``raster``), so the ``box_thresh`` decision matches pixel for pixel.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from postproc.contours import Contour, ContourSet
from postproc.raster import fill_poly, quad_rows


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
    """box_score_fast of N boxes (N, 4, 2) at once: the same mask, summed row interval by row interval (in
    float64, so the mean differs from box_score_fast's only in the last bits)."""
    h, w = prob.shape
    box = np.asarray(boxes, np.float32).reshape(-1, 4, 2)
    scores = np.zeros(len(box), np.float64)
    if not len(box):
        return scores
    x0 = np.clip(np.floor(box[:, :, 0].min(axis=1)).astype(np.int32), 0, w - 1).astype(np.int64)
    x1 = np.clip(np.ceil(box[:, :, 0].max(axis=1)).astype(np.int32), 0, w - 1).astype(np.int64)
    y0 = np.clip(np.floor(box[:, :, 1].min(axis=1)).astype(np.int32), 0, h - 1).astype(np.int64)
    y1 = np.clip(np.ceil(box[:, :, 1].max(axis=1)).astype(np.int32), 0, h - 1).astype(np.int64)
    # corners shifted into the bounding rectangle in float32, then truncated, as box_score_fast does
    corner = np.stack([x0, y0], axis=-1)[:, None, :]
    quads = (box.astype(np.float64) - corner).astype(np.float32).astype(np.int32)
    who, row, lo, hi, exact = quad_rows(quads, y1 - y0 + 1, x1 - x0 + 1)
    # Each exact box's bounding rectangle, copied into one float64 buffer (a plain conversion: NumPy's
    # reduceat with a float64 accumulator on float32 input is slow on some builds), then one reduceat over
    # every row interval, in buffer order.
    heights, widths = y1 - y0 + 1, x1 - x0 + 1
    size = np.where(exact, heights * widths, 0)
    base = np.cumsum(size) - size
    buf = np.empty(int(size.sum()), np.float64)
    for i in np.flatnonzero(exact).tolist():
        region = prob[y0[i]:y1[i] + 1, x0[i]:x1[i] + 1]
        buf[base[i]:base[i] + size[i]].reshape(region.shape)[...] = region
    start = base[who] + row * widths[who] + lo
    length = hi - lo + 1
    order = np.argsort(start, kind="stable")
    start, length, who = start[order], length[order], who[order]
    bounds = np.empty(2 * start.size, np.int64)
    bounds[0::2], bounds[1::2] = start, start + length
    last = bounds[-1:] == buf.size  # reduceat cannot index one past the end: the last segment runs to it
    sums = np.add.reduceat(buf, bounds[:-1] if last.any() else bounds)[0::2] if start.size else np.zeros(0)
    total = np.bincount(who, weights=sums, minlength=len(box))
    count = np.bincount(who, weights=length.astype(np.float64), minlength=len(box))
    scores[exact] = total[exact] / count[exact]
    for j in np.flatnonzero(~exact).tolist():
        scores[j] = box_score_fast(prob, box[j])
    return scores
