"""DB's unclip: grow a box by ``area * ratio / perimeter`` with pyclipper's round joins, as RapidOCR does."""

from __future__ import annotations

import numpy as np
import pyclipper
from shapely.geometry import Polygon


def unclip(box: np.ndarray, ratio: float) -> list[tuple[int, int]]:
    """The offset polygon's integer vertices (all output paths, concatenated as RapidOCR's reshape does).

    The float32 corners go to pyclipper unchanged, so its integer conversion is RapidOCR's too.
    """
    poly = Polygon(box)
    distance = poly.area * ratio / poly.length
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(box, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    return [(int(x), int(y)) for path in offset.Execute(distance) for x, y in path]
