"""The cell mapping both releases' CalRecBoxes share (postproc/cell_geometry.py) against each release's own
reverse_rotate_crop_image, on fresh random boxes and cells: 1.4.4 multiplies the points in float32, 3.10 in
float64, which changes a truncated coordinate now and then (about one line in 500)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from tests.engine.kernels.harness import fresh_rng
from vkocr.postproc.cell_geometry import separate, to_detection_box

rapidocr = pytest.importorskip("rapidocr")
rapidocr_onnxruntime = pytest.importorskip("rapidocr_onnxruntime")
from rapidocr.cal_rec_boxes.main import CalRecBoxes, Direction  # noqa: E402 - after the skips: test-only deps
from rapidocr_onnxruntime.cal_rec_boxes import CalRecBoxes as CalRecBoxes144  # noqa: E402


def random_quad(rng: np.random.Generator) -> np.ndarray:
    """A text box, corners clockwise from the top-left: wide, tall (a vertical line), near the 1.5:1 rule for
    turning a crop, or wide and turned by 90°; often turned by up to ±0.3 rad, half of them on whole pixels."""
    centre = rng.uniform(20, 500, 2)
    kind = rng.integers(4)
    angle = rng.uniform(-0.3, 0.3) * (rng.random() < 0.5) + (np.pi / 2 if kind == 3 else 0.0)
    length = rng.uniform(10, 400) if kind in (0, 3) else rng.uniform(8, 60)
    thickness = {0: rng.uniform(8, 60), 1: length * rng.uniform(1.6, 8), 2: length * rng.uniform(1.45, 1.55),
                 3: rng.uniform(8, 60)}[int(kind)]
    u = np.array([np.cos(angle), np.sin(angle)]) * length
    v = np.array([-np.sin(angle), np.cos(angle)]) * thickness
    quad = np.array([centre, centre + u, centre + u + v, centre + v])
    return (np.round(quad) if rng.random() < 0.5 else quad).astype(np.float32)


def random_cells(rng: np.random.Generator, width: int, height: int) -> list[list[list[float]]]:
    """Cells as CalRecBoxes makes them: integer edges (halves once overlaps are split), the crop's height."""
    cells = []
    for _ in range(int(rng.integers(1, 12))):
        x0 = float(rng.integers(0, max(width, 2)))
        x1 = x0 + float(rng.integers(0, 30))
        cells.append([[x0, 0.0], [x1, 0.0], [x1, float(height)], [x0, float(height)]])
    return sorted(cells, key=lambda c: c[0][0])


def test_mapping_matches_both_releases() -> None:
    rng, seed = fresh_rng()
    for case in range(1500):
        box = random_quad(rng)
        cells = random_cells(rng, int(np.linalg.norm(box[0] - box[1])), int(np.linalg.norm(box[0] - box[3])))
        vertical = bool(rng.random() < 0.7)  # where the dtypes differ
        theirs = CalRecBoxes().reverse_rotate_crop_image(
            box.copy(), CalRecBoxes.adjust_box_overlap(copy.deepcopy(cells)),
            Direction.VERTICAL if vertical else Direction.HORIZONTAL)
        old = CalRecBoxes144().reverse_rotate_crop_image(
            box.copy(), CalRecBoxes144.adjust_box_overlap(copy.deepcopy(cells)), "h" if vertical else "w")
        assert to_detection_box(box, separate(copy.deepcopy(cells)), vertical, np.float64) == theirs, \
            f"seed {seed}, case {case}"
        assert to_detection_box(box, separate(copy.deepcopy(cells)), vertical, np.float32) == old, \
            f"seed {seed}, case {case}"
