"""Fixtures for the postproc tests: a fresh random generator per test, its seed printed for replay."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import numpy as np
import pytest


@pytest.fixture
def rng() -> Iterator[np.random.Generator]:
    seed = secrets.randbits(64)
    print(f"rng seed {seed}")  # shown by pytest when the test fails
    yield np.random.default_rng(seed)
