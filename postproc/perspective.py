"""``cv2.getPerspectiveTransform`` and ``cv2.invert`` of a 3×3 matrix, bit for bit, in Python.

Per-character boxes map points from a crop back into the image through the inverse of the crop's perspective
transform and truncate them to integers, so the solver's rounding decides pixels: this follows OpenCV's own
arithmetic (the 8×8 system built from float32 products, solved by OpenCV's Gaussian elimination with partial
pivoting; the 3×3 inverse by cofactors).
"""

from __future__ import annotations

import numpy as np

_EPS = 2.220446049250313e-16 * 10  # OpenCV's DBL_EPSILON*10 singularity threshold for LU


def _lu_solve(a: list[list[float]], b: list[float]) -> list[float]:
    """``hal::LU64f`` followed by its back substitution: solves a·x = b in place."""
    m = len(a)
    for i in range(m):
        k = max(range(i, m), key=lambda j: (abs(a[j][i]), -j))  # first row with the largest pivot
        if abs(a[k][i]) < _EPS:
            raise np.linalg.LinAlgError("singular perspective system")
        if k != i:
            a[i], a[k] = a[k], a[i]
            b[i], b[k] = b[k], b[i]
        d = -1.0 / a[i][i]
        for j in range(i + 1, m):
            alpha = a[j][i] * d
            row_i, row_j = a[i], a[j]
            for c in range(i + 1, m):
                row_j[c] += alpha * row_i[c]
            b[j] += alpha * b[i]
    for i in range(m - 1, -1, -1):
        s = b[i]
        for c in range(i + 1, m):
            s -= a[i][c] * b[c]
        b[i] = s / a[i][i]
    return b


def perspective_transform(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 3×3 float64 matrix mapping the four ``src`` points to ``dst`` (``cv2.getPerspectiveTransform``)."""
    s = np.asarray(src, dtype=np.float32).reshape(4, 2)
    t = np.asarray(dst, dtype=np.float32).reshape(4, 2)
    a = [[0.0] * 8 for _ in range(8)]
    b = [0.0] * 8
    for i in range(4):
        sx, sy, dx, dy = s[i, 0], s[i, 1], t[i, 0], t[i, 1]
        a[i][0] = a[i + 4][3] = float(sx)
        a[i][1] = a[i + 4][4] = float(sy)
        a[i][2] = a[i + 4][5] = 1.0
        a[i][6], a[i][7] = float(-sx * dx), float(-sy * dx)  # float32 products, as OpenCV computes them
        a[i + 4][6], a[i + 4][7] = float(-sx * dy), float(-sy * dy)
        b[i], b[i + 4] = float(dx), float(dy)
    return np.array([*_lu_solve(a, b), 1.0], dtype=np.float64).reshape(3, 3)


def invert3(m: np.ndarray) -> np.ndarray:
    """``cv2.invert(m)`` (DECOMP_LU) for a 3×3 float64 matrix: cofactors over the determinant."""
    s = [[float(v) for v in row] for row in np.asarray(m, dtype=np.float64)]
    det = (
        s[0][0] * (s[1][1] * s[2][2] - s[1][2] * s[2][1])
        - s[0][1] * (s[1][0] * s[2][2] - s[1][2] * s[2][0])
        + s[0][2] * (s[1][0] * s[2][1] - s[1][1] * s[2][0])
    )
    if det == 0.0:
        return np.zeros((3, 3), dtype=np.float64)  # OpenCV's result for a singular matrix
    d = 1.0 / det
    return np.array(
        [
            [
                (s[1][1] * s[2][2] - s[1][2] * s[2][1]) * d,
                (s[0][2] * s[2][1] - s[0][1] * s[2][2]) * d,
                (s[0][1] * s[1][2] - s[0][2] * s[1][1]) * d,
            ],
            [
                (s[1][2] * s[2][0] - s[1][0] * s[2][2]) * d,
                (s[0][0] * s[2][2] - s[0][2] * s[2][0]) * d,
                (s[0][2] * s[1][0] - s[0][0] * s[1][2]) * d,
            ],
            [
                (s[1][0] * s[2][1] - s[1][1] * s[2][0]) * d,
                (s[0][1] * s[2][0] - s[0][0] * s[2][1]) * d,
                (s[0][0] * s[1][1] - s[0][1] * s[1][0]) * d,
            ],
        ],
        dtype=np.float64,
    )
