"""Run one kernel against its NumPy reference: fresh random inputs, outputs poisoned with NaN first."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from vkocr.engine.device import Device
from vkocr.engine.recorder import Recorder
from vkocr.engine.tensor import Tensor

TOLERANCE = 1e-5
# Per storage dtype. fp16 kernels load fp16 inputs, accumulate in fp32 and round once on store, and their
# reference is the exact result on the same fp16 inputs, rounded to fp16: the two differ by at most one fp16
# step (2^-11 relative) in a few elements, far below 1e-3 over the whole tensor.
TOLERANCES = {np.dtype(np.float32): TOLERANCE, np.dtype(np.float16): 1e-3}
STORAGE_DTYPES = [np.float32, np.float16]


def fresh_rng() -> tuple[np.random.Generator, int]:
    """A generator with a new seed every run; the seed goes into failure messages to replay a case."""
    seed = int(np.random.SeedSequence().entropy % (1 << 63))
    return np.random.default_rng(seed), seed


def poisoned(device: Device, shape: tuple[int, ...], dtype: type = np.float32) -> Tensor:
    """An output tensor pre-filled with NaN (or -1 for integers), so an element the kernel skips fails."""
    fill = np.nan if np.dtype(dtype).kind == "f" else -1
    return device.upload(np.full(shape, fill, dtype=dtype))


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    """‖out − ref‖ / ‖ref‖ in float64; NaN anywhere in `out` gives NaN (which fails every ≤ check)."""
    ref64 = np.asarray(ref, np.float64)
    diff = np.linalg.norm(np.asarray(out, np.float64) - ref64)
    return float(diff / max(np.linalg.norm(ref64), 1e-30))


def storage_ref(ref: np.ndarray, dtype: type) -> np.ndarray:
    """What a kernel storing `dtype` should write for the exact result `ref` (computed on inputs already in
    `dtype`): the same, rounded once."""
    return np.asarray(ref).astype(dtype)


def run(device: Device, record: Callable[[Recorder], None]) -> None:
    with Recorder(device) as rec:
        record(rec)
        rec.run()


def check(out: np.ndarray, ref: np.ndarray, what: str, seed: int, tol: float = TOLERANCE) -> None:
    assert out.shape == ref.shape, f"{what}: shape {out.shape} != {ref.shape}"
    assert not np.isnan(out).any() or np.isnan(ref).any(), f"{what}: unwritten (NaN) outputs; seed {seed}"
    err = rel_err(out, ref)
    assert err <= tol, f"{what}: rel error {err:.3g} > {tol}; seed {seed}"


def check_bounded(out: np.ndarray, ref: np.ndarray, magnitude: np.ndarray, what: str, seed: int, tol: float) -> None:
    """Every element within `tol` of the sum of its terms' magnitudes (`magnitude`: the same sum over |a|·|b|),
    the bound a dot product's rounding obeys. A norm relative to the result itself fails by chance where the
    terms cancel: a single output w·x + b of -0.276 + 0.272 carries the products' error 60 times magnified."""
    assert out.shape == ref.shape == magnitude.shape, f"{what}: shapes {out.shape}, {ref.shape}, {magnitude.shape}"
    assert not np.isnan(out).any(), f"{what}: unwritten (NaN) outputs; seed {seed}"
    scaled = np.abs(np.asarray(out, np.float64) - np.asarray(ref, np.float64)) / np.maximum(magnitude, 1e-30)
    worst = float(scaled.max())
    assert worst <= tol, f"{what}: error {worst:.3g} of the terms' magnitude > {tol}; seed {seed}"


def release(device: Device, *tensors: Tensor) -> None:
    for t in tensors:
        device.free(t)
