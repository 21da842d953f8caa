"""unclip_boxes (corners passed to pyclipper as Python floats) against RapidOCR's unclip (one float32 box
array per offset, ``np.array(Execute(d)).reshape(-1, 1, 2)``): the same integer polygons, including
negative, half and large coordinates."""

from __future__ import annotations

import numpy as np
import pyclipper

from vkocr.postproc.unclip import unclip_boxes, unclip_distances


def _rapidocr_unclip(box: np.ndarray, distance: float) -> np.ndarray:
    """RapidOCR's; where the offset has several paths (a self-intersecting box: np.array fails there on
    paths of different lengths), their points one after the other."""
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(box, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    paths = offset.Execute(distance)
    return np.array(paths if len(paths) == 1 else [p for path in paths for p in path]).reshape((-1, 1, 2))


def test_unclip_boxes_match_pyclipper_on_float32(rng: np.random.Generator) -> None:
    for case in range(200):
        n = int(rng.integers(1, 12))
        c = rng.uniform(-20, 3000, (n, 1, 2))
        boxes = (c + rng.uniform(-60, 60, (n, 4, 2)) * rng.choice([0.1, 1, 5])).astype(np.float32)
        if case % 4 == 0:
            boxes = np.round(boxes * 2) / 2  # halves and integers
        distances = unclip_distances(boxes, float(rng.choice([1.6, 2.0])))
        got = unclip_boxes(boxes, distances)
        assert len(got) == n
        for box, d, poly in zip(boxes, distances.tolist(), got, strict=True):
            ref = _rapidocr_unclip(box, d)
            assert poly.dtype == ref.dtype, f"case {case}: {box.tolist()} {d}"
            np.testing.assert_array_equal(poly, ref, err_msg=f"case {case}: {box.tolist()} {d}")


def test_unclip_boxes_without_boxes() -> None:
    assert unclip_boxes(np.zeros((0, 4, 2), np.float32), []) == []
