"""DB's unclip: grow a box by ``area * ratio / perimeter`` with pyclipper's round joins, as RapidOCR does."""

from __future__ import annotations

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


def unclip(box: np.ndarray, distance: float) -> list[tuple[int, int]]:
    """The polygon offset by ``distance`` (unclip_distances): its integer vertices (all output paths,
    concatenated as RapidOCR's reshape does).

    The float32 corners go to pyclipper unchanged, so its integer conversion is RapidOCR's too.
    """
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(box, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    return [(int(x), int(y)) for path in offset.Execute(float(distance)) for x, y in path]
