"""DB text-detection postprocessing: RapidOCR 1.4.4's ``DBPostProcess`` and
``TextDetector.filter_tag_det_res``, through the OpenCV calls RapidOCR makes, so the boxes are RapidOCR's by
construction.

1. bitmap = prob > thresh, dilated by ``cv2.dilate`` with the 2×2 all-ones kernel (``db_bitmap``; the GPU
   pipeline makes it in a shader and passes it in, ``bitmap=``).
2. ``cv2.findContours(RETR_LIST, CHAIN_APPROX_SIMPLE)`` (``db_contours``, ``bitmap_contours``: with the GPU's
   row spans, only over the boxes around the foreground, with the same contours in the same order); the first
   ``max_candidates`` are kept.
3. ``cv2.minAreaRect`` + ``cv2.boxPoints`` of each contour, corners ordered as ``get_mini_boxes``
   (``minrect``); shorter side < min_size → dropped.
4. score: mean probability inside the box (``fast``) or the contour (``slow``), ``cv2.fillPoly`` +
   ``cv2.mean`` (``score``); < box_thresh → dropped.
5. unclip by area·ratio/perimeter with pyclipper's round joins (``unclip``), min-area box again; shorter side
   < min_size + 2 → dropped.
6. scaled to the destination size in float32, rounded, clipped to [0, dest], truncated to int32.
7. ``filter_tag_det_res``: corners ordered clockwise, clipped to [0, dest-1], boxes whose sides are ≤ 3 pixels
   dropped (``detfilter``).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from vkocr.postproc.detfilter import clip_quads, keep_boxes, order_points_clockwise
from vkocr.postproc.minrect import min_area_rects, mini_boxes, rect_boxes
from vkocr.postproc.score import box_score_slow, box_scores_fast
from vkocr.postproc.unclip import unclip_boxes, unclip_distances

DILATION_KERNEL = np.array([[1, 1], [1, 1]])  # RapidOCR's, as it passes it


def db_bitmap(prob: np.ndarray, thresh: float, use_dilation: bool) -> np.ndarray:
    """The uint8 bitmap DBPostProcess hands to findContours: ``prob > thresh``, dilated when asked."""
    bitmap = (prob > thresh).view(np.uint8)  # the bools' bytes are 0 and 1: no copy
    return cv2.dilate(bitmap, DILATION_KERNEL) if use_dilation else bitmap


def db_contours(prob: np.ndarray, thresh: float, use_dilation: bool) -> Sequence[np.ndarray]:
    """``cv2.findContours(db_bitmap(...), RETR_LIST, CHAIN_APPROX_SIMPLE)``'s contours, found in the band of
    rows with foreground (the letterbox and margins of most maps are empty: no bitmap is made for them).

    The band keeps one empty row above and below where the map has them: the rows left out are 0 in the whole
    map's bitmap (the 2×2 kernel, anchored at (1, 1), spreads foreground one row down only), and findContours
    sees zeros beyond an image's edge as well."""
    live = np.flatnonzero(np.fmax.reduce(prob, axis=1) > thresh)
    if not live.size:
        return ()
    top, stop = max(int(live[0]) - 1, 0), min(int(live[-1]) + 3, prob.shape[0])
    bitmap = db_bitmap(prob[top:stop], thresh, use_dilation)
    return cv2.findContours(bitmap, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE, offset=(0, top))[-2]


MAX_BANDS = 32  # boxes of foreground findContours traces at most, split at the widest gaps between rows


def foreground_bands(row_spans: np.ndarray, height: int, width: int, max_bands: int = MAX_BANDS
                     ) -> list[tuple[int, int, int, int]]:
    """(top, bottom, left, right) boxes, top to bottom, that hold every set pixel of a height × width bitmap
    whose rows hold theirs in ``row_spans`` ((height, 2) [start, stop) columns, start ≥ stop for an empty row):
    the runs of rows with set pixels, split where one or more empty rows lie between them (at the widest such
    gaps, when there are more than max_bands runs), each with the columns of its rows, and one empty row and
    column kept around it where the bitmap has them."""
    starts, stops = row_spans[:, 0], row_spans[:, 1]
    live = np.flatnonzero(stops > starts)
    if not live.size:
        return []
    gaps = np.diff(live)
    cuts = np.flatnonzero(gaps > 1)  # an empty row between live[k] and live[k + 1]
    if len(cuts) >= max_bands:
        cuts = np.sort(cuts[np.argsort(gaps[cuts], kind="stable")[len(cuts) - (max_bands - 1):]])
    first = np.concatenate(([0], cuts + 1))  # each band's first live row, as an index into live
    last = np.concatenate((cuts, [len(live) - 1]))
    left = np.minimum.reduceat(starts[live], first).tolist()  # Python ints from here: no unsigned wrap below
    right = np.maximum.reduceat(stops[live], first).tolist()
    return [(max(top - 1, 0), min(bottom + 2, height), max(x0 - 1, 0), min(x1 + 1, width))
            for top, bottom, x0, x1 in zip(live[first].tolist(), live[last].tolist(), left, right, strict=True)]


def bitmap_contours(bitmap: np.ndarray, row_spans: np.ndarray | None = None, max_bands: int = MAX_BANDS
                    ) -> Sequence[np.ndarray]:
    """``db_contours``' contours from a ready bitmap (db_bitmap's, made on the GPU). With the columns of each
    row that hold its set pixels (``row_spans``, made on the GPU too), findContours traces only the boxes around
    the foreground (``foreground_bands``), and the box contours come out as those of the whole bitmap: no
    contour crosses the empty rows between two boxes, OpenCV sees zeros beyond a box's edge as it does beyond
    the bitmap's, and it lists the contours of a raster scan last found first, so the boxes' lists go
    bottom box first. Most of a map is empty (64 % of the rows of the default stream's median map)."""
    if row_spans is None:
        return cv2.findContours(bitmap, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)[-2]
    contours: list[np.ndarray] = []
    height, width = bitmap.shape
    for top, bottom, left, right in reversed(foreground_bands(row_spans, height, width, max_bands)):
        contours += cv2.findContours(bitmap[top:bottom, left:right], cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE,
                                     offset=(left, top))[-2]
    return contours


def _to_dest(boxes: np.ndarray, width: int, height: int, dest_w: int, dest_h: int) -> np.ndarray:
    """RapidOCR's scaling of (N, 4, 2) boxes, in float32 as NumPy computes it there, then truncation to
    int32."""
    boxes = boxes.copy()
    boxes[..., 0] = np.clip(np.round(boxes[..., 0] / width * dest_w), 0, dest_w)
    boxes[..., 1] = np.clip(np.round(boxes[..., 1] / height * dest_h), 0, dest_h)
    return boxes.astype(np.int32)


def db_boxes(
    prob: np.ndarray,
    dest_w: int,
    dest_h: int,
    *,
    thresh: float = 0.3,
    box_thresh: float = 0.5,
    max_candidates: int = 1000,
    unclip_ratio: float = 1.6,
    use_dilation: bool = True,
    score_mode: str = "fast",
    min_size: int = 3,
    bitmap: np.ndarray | None = None,
    row_spans: np.ndarray | None = None,
) -> tuple[np.ndarray, list[float]]:
    """Text boxes from a DB probability map (H×W float32; leading axes of size 1 are dropped). `bitmap`: the
    map's ``db_bitmap(prob, thresh, use_dilation)`` when it was made elsewhere (on the GPU), H×W uint8;
    `row_spans`: with it, the columns of each of its rows that hold the row's set pixels (H×2, ``bitmap_contours``).

    Returns (N, 4, 2) float32 quads in destination pixels, corners clockwise from the top-left, in RapidOCR's
    (unsorted) order, and each box's score. Defaults are RapidOCR 1.4.4's as vkocr configures it.
    """
    if score_mode not in ("fast", "slow"):
        raise ValueError(f"score_mode must be 'fast' or 'slow', got {score_mode!r}")
    prob = np.asarray(prob, dtype=np.float32)
    while prob.ndim > 2 and prob.shape[0] == 1:
        prob = prob[0]
    if prob.ndim != 2:
        raise ValueError(f"expected an H×W probability map, got shape {prob.shape}")
    height, width = prob.shape
    dest_w, dest_h = int(dest_w), int(dest_h)
    if bitmap is None:
        contours = db_contours(prob, thresh, use_dilation)[:max_candidates]
    elif bitmap.shape != prob.shape:
        raise ValueError(f"bitmap of shape {bitmap.shape} for a map of shape {prob.shape}")
    elif row_spans is not None and np.shape(row_spans) != (bitmap.shape[0], 2):
        raise ValueError(f"row spans of shape {np.shape(row_spans)} for a bitmap of {bitmap.shape[0]} rows")
    else:
        contours = bitmap_contours(bitmap, row_spans)[:max_candidates]
    rects, ssides = min_area_rects(contours)
    kept = [i for i, sside in enumerate(ssides) if sside >= min_size]
    boxes = rect_boxes([rects[i] for i in kept])  # only boxes that are kept need their corners
    if score_mode == "fast":
        scores = box_scores_fast(prob, boxes)
    else:
        scores = [box_score_slow(prob, contours[i]) for i in kept]
    passed = [i for i, score in enumerate(scores) if not box_thresh > score]
    distances = unclip_distances(boxes[passed], unclip_ratio).tolist()
    grown, ssides = mini_boxes(unclip_boxes(boxes[passed], distances))
    big = [k for k, sside in enumerate(ssides) if sside >= min_size + 2]
    if not big:
        return np.zeros((0, 4, 2), dtype=np.float32), []
    scaled = _to_dest(grown[big], width, height, dest_w, dest_h)
    quads = clip_quads(order_points_clockwise(scaled), dest_h, dest_w)
    keep = keep_boxes(quads)
    return quads[keep], [scores[passed[k]] for k, ok in zip(big, keep.tolist(), strict=True) if ok]
