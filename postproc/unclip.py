"""DB's unclip: grow a box by ``area * ratio / perimeter`` with pyclipper's round joins, as RapidOCR does."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyclipper
import shapely


def unclip_distances(boxes: np.ndarray, ratio: float) -> np.ndarray:
    """``Polygon(box).area * ratio / Polygon(box).length`` of N boxes (N, 4, 2), through shapely's vectorised
    functions (the same GEOS computations as one Polygon at a time)."""
    if not len(boxes):
        return np.zeros(0)
    polys = shapely.polygons(np.asarray(boxes, np.float64).reshape(-1, 4, 2))
    return np.asarray(shapely.area(polys) * ratio / shapely.length(polys), np.float64)


def unclip_boxes(boxes: np.ndarray, distances: Iterable[float]) -> list[np.ndarray]:
    """unclip of each box (N, 4, 2) by its distance: the grown polygon's points, (n, 1, 2) as RapidOCR's
    ``np.array(offset.Execute(distance)).reshape((-1, 1, 2))`` gives them.

    The corners go to pyclipper as Python floats (one ``tolist`` for all boxes): it truncates them to integers
    exactly as it does the float32 scalars RapidOCR passes, and reads a list faster than an array.
    """
    polys = []
    for box, distance in zip(np.asarray(boxes).tolist(), distances, strict=True):
        offset = pyclipper.PyclipperOffset()  # one per box: it would merge the offsets of all its paths
        offset.AddPath(box, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
        points = [p for path in offset.Execute(float(distance)) for p in path]
        polys.append(np.array(points).reshape(-1, 1, 2))
    return polys
