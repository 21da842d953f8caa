"""db_boxes against RapidOCR's DBPostProcess on random synthetic probability maps: identical boxes and order."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.postproc.reference import iou, rapid_db, synthetic_map
from vkocr.postproc.db import db_boxes

cv2 = pytest.importorskip("cv2")
# The port follows OpenCV 5 (RapidOCR's boxes depend on its minAreaRect); with another OpenCV, corners may
# move by a pixel, so only the geometry is compared there.
EXACT = int(cv2.__version__.split(".")[0]) >= 5

PARAMS: list[dict[str, Any]] = [
    {},
    {"score_mode": "slow"},
    {"use_dilation": False, "thresh": 0.4, "box_thresh": 0.6},
    {"unclip_ratio": 2.2, "box_thresh": 0.3},
    {"max_candidates": 3},
]


@pytest.mark.parametrize("params", PARAMS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "defaults")
def test_matches_rapidocr_on_random_maps(rng: np.random.Generator, params: dict[str, Any]) -> None:
    total = 0
    for case in range(60):
        h, w = (int(v) for v in rng.integers(12, 160, 2))
        prob = synthetic_map(rng, h, w)
        dest_w, dest_h = int(w * rng.uniform(0.5, 3)), int(h * rng.uniform(0.5, 3))
        ref_boxes, ref_scores = rapid_db(prob, dest_w, dest_h, **params)
        boxes, scores = db_boxes(prob, dest_w, dest_h, **params)
        assert boxes.dtype == np.float32 and boxes.shape == (len(scores), 4, 2)
        total += len(boxes)
        if not EXACT:
            matched = sum(max((iou(b, r) for r in ref_boxes), default=0.0) >= 0.9 for b in boxes)
            assert matched >= max(len(boxes), len(ref_boxes)) - 1, f"case {case}"
            continue
        assert boxes.shape == ref_boxes.shape, f"case {case}: {len(boxes)} boxes, RapidOCR {len(ref_boxes)}"
        np.testing.assert_array_equal(boxes, ref_boxes, err_msg=f"case {case}")
        np.testing.assert_allclose(scores, ref_scores, rtol=0, atol=1e-9, err_msg=f"case {case}")
    assert total > 0


def test_empty_and_blank_maps() -> None:
    boxes, scores = db_boxes(np.zeros((64, 64), np.float32), 64, 64)
    assert boxes.shape == (0, 4, 2) and scores == []
    boxes, _ = db_boxes(np.ones((1, 1, 40, 50), np.float32), 100, 80)  # leading axes of size 1 are dropped
    np.testing.assert_array_equal(boxes, rapid_db(np.ones((40, 50), np.float32), 100, 80)[0])


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="score_mode"):
        db_boxes(np.zeros((8, 8), np.float32), 8, 8, score_mode="exact")
    with pytest.raises(ValueError, match="H×W"):
        db_boxes(np.zeros((2, 8, 8), np.float32), 8, 8)
