"""DB text-detection postprocessing, reproducing RapidOCR 1.4.4's ``DBPostProcess`` and
``TextDetector.filter_tag_det_res`` without OpenCV.

Steps, each matching RapidOCR (and through it OpenCV 5) exactly:

1. bitmap = prob > thresh, dilated by the 2×2 all-ones kernel anchored at its centre (1, 1): a pixel turns on
   when it or its left, upper or upper-left neighbour is on (``dilate``).
2. contours as ``cv2.findContours(RETR_LIST, CHAIN_APPROX_SIMPLE)`` lists them, holes included, in OpenCV's
   order (last found first); the first ``max_candidates`` are kept (``contours``).
3. min-area box of each contour, corners ordered as ``get_mini_boxes`` (``minrect``); shorter side < min_size
   → dropped.
4. score: mean probability inside the box (``fast``) or the contour (``slow``) (``score``); < box_thresh →
   dropped.
5. unclip by area·ratio/perimeter with round joins (``unclip``), min-area box again; shorter side
   < min_size + 2 → dropped.
6. scaled to the destination size in float32, rounded, clipped to [0, dest], truncated to int32.
7. ``filter_tag_det_res``: corners ordered clockwise, clipped to [0, dest-1], boxes whose sides are ≤ 3 pixels
   dropped (``detfilter``).
"""

from __future__ import annotations

import numpy as np

from vkocr.postproc.contours import Runs, contours_of_runs, find_runs
from vkocr.postproc.detfilter import clip_quads, keep_boxes, order_points_clockwise
from vkocr.postproc.minrect import mini_boxes
from vkocr.postproc.score import box_score_slow, box_scores_fast
from vkocr.postproc.unclip import unclip_boxes, unclip_distances


def dilate(bitmap: np.ndarray) -> np.ndarray:
    """``cv2.dilate(bitmap, np.ones((2, 2)))``: the default anchor of a 2×2 kernel is (1, 1), so each pixel
    takes the maximum over itself and its left, upper and upper-left neighbours (the image edge adds none)."""
    b = np.asarray(bitmap, dtype=bool)
    out = b.copy()
    out[1:, :] |= b[:-1, :]
    out[:, 1:] |= b[:, :-1]
    out[1:, 1:] |= b[:-1, :-1]
    return out


def _to_dest(boxes: np.ndarray, width: int, height: int, dest_w: int, dest_h: int) -> np.ndarray:
    """RapidOCR's scaling of (N, 4, 2) boxes, in float32 as NumPy computes it there, then truncation to int32."""
    boxes = boxes.copy()
    boxes[..., 0] = np.clip(np.round(boxes[..., 0] / width * dest_w), 0, dest_w)
    boxes[..., 1] = np.clip(np.round(boxes[..., 1] / height * dest_h), 0, dest_h)
    return boxes.astype(np.int32)


def bitmap_runs(prob: np.ndarray, thresh: float, use_dilation: bool) -> Runs:
    """Runs of the thresholded (and dilated) map, computed here; the GPU stage returns the same runs packed
    as edge bits (vkocr.agent.ocr.threshold_reference.threshold_edges, unpacked by vkocr.postproc.contours.runs_from_edges)."""
    # Only the band of rows with foreground (dilation adds one row below it) is thresholded: the letterbox and
    # margins of most maps are empty.
    live = np.flatnonzero(np.fmax.reduce(prob, axis=1) > np.float32(thresh))
    if not live.size:
        return find_runs(np.zeros((0, prob.shape[1]), dtype=bool))
    top, stop = int(live[0]), min(int(live[-1]) + (2 if use_dilation else 1), prob.shape[0])
    bitmap = prob[top:stop] > np.float32(thresh)
    if use_dilation:
        bitmap = dilate(bitmap)
    runs = find_runs(bitmap)
    return Runs(runs.row + top, runs.start, runs.end)


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
    runs: Runs | None = None,
) -> tuple[np.ndarray, list[float]]:
    """Text boxes from a DB probability map (H×W float32; leading axes of size 1 are dropped).

    Returns (N, 4, 2) float32 quads in destination pixels, corners clockwise from the top-left, in RapidOCR's
    (unsorted) order, and each box's score. Defaults are RapidOCR 1.4.4's. ``runs``: the runs of the
    thresholded, dilated map when the GPU already made them (``bitmap_runs`` otherwise); ``prob`` is then only
    read inside the boxes.

    Each step runs over all surviving candidates at once (the filters are per box, so the order is kept).
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
    if runs is None:
        runs = bitmap_runs(prob, thresh, use_dilation)
    # holes one pixel thin cannot reach min_size (their rectangles' shorter sides are at most 2·√2)
    found = contours_of_runs(runs, width, trace_thin_holes=min_size * min_size <= 8)
    if not found.contours:
        return np.zeros((0, 4, 2), dtype=np.float32), []
    contours = found.contours[:max_candidates]
    boxes, ssides = mini_boxes([c.points for c in contours])
    kept = [i for i, sside in enumerate(ssides) if sside >= min_size]
    boxes = boxes[kept]
    if score_mode == "fast":
        scores = box_scores_fast(prob, boxes).tolist()
    else:
        scores = [box_score_slow(prob, found, contours[i]) for i in kept]
    passed = [i for i, score in enumerate(scores) if not box_thresh > score]
    distances = unclip_distances(boxes[passed], unclip_ratio).tolist()
    grown, ssides = mini_boxes(unclip_boxes(boxes[passed], distances))
    big = [k for k, sside in enumerate(ssides) if sside >= min_size + 2]
    if not big:
        return np.zeros((0, 4, 2), dtype=np.float32), []
    quads = clip_quads(order_points_clockwise(_to_dest(grown[big], width, height, dest_w, dest_h)), dest_h, dest_w)
    keep = keep_boxes(quads)
    return quads[keep], [scores[passed[k]] for k, ok in zip(big, keep.tolist(), strict=True) if ok]
