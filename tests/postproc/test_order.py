"""sort_boxes against RapidOCR's sorted_boxes on random box sets."""

from __future__ import annotations

import numpy as np
from rapidocr_onnxruntime.main import RapidOCR

from vkocr.postproc.order import sort_box_indices, sort_boxes


def test_matches_rapidocr_sorted_boxes(rng: np.random.Generator) -> None:
    for case in range(500):
        n = int(rng.integers(1, 40))
        boxes = rng.integers(0, 200, (n, 4, 2)).astype(np.float32)
        if case % 2:  # crowd the rows so the |Δy| < 10 swap pass does work
            boxes[:, :, 1] = rng.integers(0, 40, (n, 1))
        ref = RapidOCR.sorted_boxes(boxes)
        ours = sort_boxes(boxes)
        assert len(ours) == len(ref)
        for a, b in zip(ours, ref, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"case {case}")
        order = sort_box_indices(boxes)
        assert sorted(order) == list(range(n))
        for i, b in zip(order, ref, strict=True):
            np.testing.assert_array_equal(boxes[i], b)


def test_plain_lists_and_empty_input() -> None:
    boxes = [[[50, 12], [90, 12], [90, 30], [50, 30]], [[5, 10], [40, 10], [40, 28], [5, 28]],
             [[5, 60], [40, 60], [40, 80], [5, 80]]]
    assert sort_boxes(boxes) == [boxes[1], boxes[0], boxes[2]]
    assert sort_boxes([]) == []
    assert sort_box_indices(np.zeros((0, 4, 2))) == []
