"""RapidOCR 1.4.4 as the reference (test-only import), and the synthetic probability maps it is run on."""

from __future__ import annotations

from typing import Any

import numpy as np
from rapidocr_onnxruntime.ch_ppocr_det.text_detect import TextDetector
from rapidocr_onnxruntime.ch_ppocr_det.utils import DBPostProcess
from shapely.geometry import Polygon


def rapid_db(prob: np.ndarray, dest_w: int, dest_h: int, **kw: Any) -> tuple[np.ndarray, list[float]]:
    """RapidOCR's DBPostProcess + TextDetector.filter_tag_det_res, keeping each kept box's score."""
    post = DBPostProcess(
        thresh=kw.get("thresh", 0.3),
        box_thresh=kw.get("box_thresh", 0.5),
        max_candidates=kw.get("max_candidates", 1000),
        unclip_ratio=kw.get("unclip_ratio", 1.6),
        score_mode=kw.get("score_mode", "fast"),
        use_dilation=kw.get("use_dilation", True),
    )
    boxes, scores = post(prob[None, None], (dest_h, dest_w))
    detector = object.__new__(TextDetector)  # only its filter methods are used
    kept, kept_scores = [], []
    for box, score in zip(boxes, scores, strict=True):
        out = detector.filter_tag_det_res(np.array([box]), (dest_h, dest_w))
        if len(out):
            kept.append(out[0])
            kept_scores.append(score)
    return np.array(kept, dtype=np.float32).reshape(-1, 4, 2), kept_scores


def iou(a: np.ndarray, b: np.ndarray) -> float:
    pa, pb = Polygon(a).buffer(0), Polygon(b).buffer(0)
    union = pa.union(pb).area
    return pa.intersection(pb).area / union if union else float(np.array_equal(a, b))


def _shape_mask(rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray | None]:
    """A random shape (rotated rectangle, ellipse, ring, blob, or block with a hole) and its hole, if any."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    cx, cy = rng.uniform(-5, w + 5), rng.uniform(-5, h + 5)
    theta = rng.uniform(0, np.pi)
    u = (xx - cx) * np.cos(theta) + (yy - cy) * np.sin(theta)
    v = -(xx - cx) * np.sin(theta) + (yy - cy) * np.cos(theta)
    kind = rng.integers(0, 5)
    if kind == 0:  # rotated rectangle, text-line like
        a, b = rng.uniform(1, w / 2), rng.uniform(0.5, 15)
        return (np.abs(u) <= a) & (np.abs(v) <= b), None
    if kind == 1:  # ellipse
        a, b = rng.uniform(1, 40), rng.uniform(1, 20)
        return (u / a) ** 2 + (v / b) ** 2 <= 1, None
    if kind == 2:  # thin ring
        a, b, t = rng.uniform(5, 40), rng.uniform(5, 20), rng.uniform(1, 4)
        outer = (u / a) ** 2 + (v / b) ** 2 <= 1
        return outer & ((u / max(a - t, 0.5)) ** 2 + (v / max(b - t, 0.5)) ** 2 > 1), None
    if kind == 3:  # irregular blob of disks
        mask = np.zeros((h, w), dtype=bool)
        for _ in range(rng.integers(2, 8)):
            r = rng.uniform(1, 8)
            mask |= (xx - cx - rng.uniform(-15, 15)) ** 2 + (yy - cy - rng.uniform(-8, 8)) ** 2 <= r * r
        return mask, None
    a, b = rng.uniform(4, 30), rng.uniform(4, 15)  # solid block with a small hole inside
    block = (np.abs(u) <= a) & (np.abs(v) <= b)
    ha, hb = rng.uniform(1, a * 0.7), rng.uniform(1, b * 0.7)
    hole = ((u - rng.uniform(-a / 3, a / 3)) / ha) ** 2 + ((v - rng.uniform(-b / 3, b / 3)) / hb) ** 2 <= 1
    return block, block & hole


def synthetic_map(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A DB-like probability map: low noise, and random shapes of random probability levels."""
    prob = rng.uniform(0, 0.25, (h, w)).astype(np.float32)
    for _ in range(rng.integers(1, 20)):
        mask, hole = _shape_mask(rng, h, w)
        lo, hi = np.sort(rng.uniform(0.2, 1.0, 2))
        if hole is not None:
            lo, hi = 0.8, 1.0
        prob[mask] = rng.uniform(lo, hi, int(mask.sum()))
        if hole is not None:
            prob[hole] = rng.uniform(0.0, 0.29, int(hole.sum()))
    return prob
