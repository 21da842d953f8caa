"""The matrix units' ceiling probe (vk/matrix_ceiling.py, shaders/coopmat_peak.comp): every variant's sums against
NumPy on fresh random fragments over NaN-poisoned output (where the test device has cooperative matrices: Mesa
26's lavapipe in test.sh's first run), and no rows where it has none."""

from __future__ import annotations

import numpy as np
import pytest

from vkocr.engine.device import Device
from vkocr.engine.matrix_ceiling import SOURCES, measure, reference


def test_every_variant_sums_right(device: Device) -> None:
    if device.coopmat_shape is None:
        pytest.skip(f"no cooperative matrix on {device.info.name}: {device.coopmat_why_not}")
    rows = measure(device, groups=2, iterations=6, repeats=1, rounds=1, warmup_s=0.0)  # 6 -> 8: whole cycles
    assert [(r["fragments"], r["accumulators"]) for r in rows] == [
        (where, kind) for where in SOURCES.values() for kind in ("named", "array")]
    for row in rows:
        assert row["rel_err"] <= 1e-5, row
        assert row["tflops"] > 0 and row["min_ms"] <= row["median_ms"]


def test_the_reference_cycles_the_fragment_pairs() -> None:
    rng = np.random.default_rng()
    tm, tn, tk = 8, 8, 8
    fragments = rng.uniform(-1, 1, 8 * (tm * tk + tk * tn)).astype(np.float16)
    a = fragments[:8 * tm * tk].astype(np.float64).reshape(8, tm, tk)
    b = fragments[8 * tm * tk:].astype(np.float64).reshape(8, tk, tn)
    np.testing.assert_allclose(reference(fragments, (tm, tn, tk), 0, 4)[3], 4 * a[1] @ b[1])
    np.testing.assert_allclose(reference(fragments, (tm, tn, tk), 1, 8)[1],
                               2 * sum(a[f] @ b[f + 1] for f in (0, 2, 4, 6)))


def test_no_matrices_no_rows(device: Device) -> None:
    if device.coopmat_shape is not None:
        pytest.skip(f"{device.info.name} has cooperative matrices")
    assert measure(device) == []
