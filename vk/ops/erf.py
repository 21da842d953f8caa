"""The error function, which NumPy lacks: ONNX Erf, and the exact GELU."""

from __future__ import annotations

import numpy as np


def erf(x: np.ndarray) -> np.ndarray:
    """Error function, |error| < ~1e-7 relative: Maclaurin series for |x| < 1, else 1 - erfc (Numerical
    Recipes Chebyshev fit, fractional error < 1.2e-7). Evaluated in float64, returned in x's dtype."""
    z = np.abs(x.astype(np.float64))
    zs = np.minimum(z, 1.0)
    term, series = zs.copy(), zs.copy()
    for k in range(1, 18):  # sum (-1)^k z^(2k+1) / (k! (2k+1))
        term *= -zs * zs / k
        series += term / (2 * k + 1)
    series *= 2 / np.sqrt(np.pi)
    t = 1 / (1 + 0.5 * z)
    poly: np.ndarray | float = 0.17087277
    for c in (-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196,
              1.00002368, -1.26551223):
        poly = c + t * poly
    tail = 1 - t * np.exp(-z * z + poly)
    return (np.sign(x) * np.where(z < 1, series, tail)).astype(x.dtype, copy=False)  # type: ignore[no-any-return]  # NumPy gives Any for dtype[Any] operands
