"""The matrix units' ceiling as our kernels reach them (shaders/coopmat_peak.comp), for `vkocr bench kernels`:
cooperative-matrix multiply-adds per second with the fragments in registers, and loaded from shared memory as
the kernels load them (a float16_t array, a uvec4 array), with the accumulators as four named matrices or as an
array. A kernel's TFLOP/s reads against these, not against a datasheet: the gap between them says whether the
matrix units, the fragment loads or the accumulators' storage bound it. Each variant's sums are checked against
NumPy, so a fast wrong variant cannot pass unseen.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from vkocr.engine.bench import time_replays
from vkocr.engine.device import Device
from vkocr.engine.kernels.launch import check_groups, pack, subgroup_threads
from vkocr.engine.pipeline import KernelDef
from vkocr.engine.recorder import Recorder

COOPMAT_PEAK = KernelDef("coopmat_peak", ("r", "w"), 4)  # fragments in, each subgroup's four sums out
SUBGROUPS = 4  # per workgroup
FRAGS = 8  # A and B fragments the shader cycles through (its FRAGS)
ACCUMULATORS = 4
SOURCES = {0: "registers", 1: "shared float16_t", 2: "shared uvec4"}


def reference(fragments: np.ndarray, mnk: tuple[int, int, int], source: int, iterations: int) -> np.ndarray:
    """One subgroup's four TM × TN sums after `iterations` (a multiple of FRAGS // 2) from `fragments`, the
    shader's input: FRAGS A fragments (TM × TK, row-major), then FRAGS B fragments (TK × TN)."""
    tm, tn, tk = mnk
    halves = fragments.astype(np.float64)
    a = halves[:FRAGS * tm * tk].reshape(FRAGS, tm, tk)
    b = halves[FRAGS * tm * tk:].reshape(FRAGS, tk, tn)
    firsts = [0] if source == 0 else list(range(0, FRAGS, 2))  # the fragment pairs the iterations take
    scale = iterations // len(firsts)
    return np.stack([scale * sum(a[f + i] @ b[f + j] for f in firsts) for i in (0, 1) for j in (0, 1)])


def measure(device: Device, *, groups: int = 1024, iterations: int = 512, repeats: int = 5, rounds: int = 3,
            warmup_s: float = 0.5) -> list[dict[str, Any]]:
    """A row per variant (source × named or array accumulators): min and median ms, TFLOP/s at the min, the
    relative error of the sums; [] on a device without cooperative matrices. `iterations` is rounded up to a
    multiple of FRAGS // 2."""
    mnk = device.coopmat_shape
    if mnk is None:
        return []
    tm, tn, tk = mnk
    step = FRAGS // 2
    iterations = -(-iterations // step) * step
    rng = np.random.default_rng()
    fragments = rng.uniform(-1, 1, FRAGS * (tm * tk + tk * tn)).astype(np.float16)
    src = device.upload(fragments)
    subgroups_total = groups * SUBGROUPS
    poison = np.full(subgroups_total * ACCUMULATORS * tm * tn, np.nan, np.float32)
    dst = device.upload(poison)
    flops = 2.0 * tm * tn * tk * ACCUMULATORS * iterations * subgroups_total
    rows: list[dict[str, Any]] = []
    try:
        for source, where in SOURCES.items():
            for named in (True, False):
                constants = (SUBGROUPS * device.info.subgroup_size, 1, 1, tm, tn, tk, source, int(named))

                def record(rec: Recorder, constants: tuple[int, ...] = constants) -> None:
                    subgroup_threads(rec, SUBGROUPS, "coopmat_peak")  # within the device's workgroup limit
                    check_groups(rec, (groups, 1, 1), "coopmat_peak")
                    pipeline = rec.device.pipeline(COOPMAT_PEAK, constants)
                    rec.dispatch(pipeline, [src.view, dst.view], pack("I", iterations), (groups, 1, 1),
                                 label="coopmat_peak")

                device.write(dst, poison)  # every variant writes its own sums: none reads another's
                samples = [t.ms for t in time_replays(device, record, repeats, rounds, warmup_s)]
                got = device.download(dst).reshape(subgroups_total, ACCUMULATORS, tm, tn)
                ref = reference(fragments, mnk, source, iterations)
                err = float(np.abs(got - ref).max() / np.abs(ref).max())
                best = min(samples)
                rows.append({"fragments": where, "accumulators": "named" if named else "array",
                             "min_ms": best, "median_ms": statistics.median(samples),
                             "tflops": flops / (best * 1e-3) / 1e12, "rel_err": err,
                             # the driver's registers and the like, where VKOCR_PIPELINE_STATS=1 and it offers them
                             "stats": device.pipeline(COOPMAT_PEAK, constants).statistics()})
    finally:
        device.free(src)
        device.free(dst)
    return rows


def format_rows(rows: list[dict[str, Any]], mnk: tuple[int, int, int] | None) -> str:
    if not rows:
        return "matrix ceiling: no cooperative matrix on this device"
    lines = [f"matrix ceiling ({'×'.join(map(str, mnk or ()))} fp16 -> fp32, four accumulators per subgroup):"]
    for r in rows:
        lines.append(f"  fragments from {r['fragments']:<17} {r['accumulators']:<5} accumulators "
                     f"{r['tflops']:8.1f} TFLOP/s  (min {r['min_ms']:.4f} ms, rel err {r['rel_err']:.1e})"
                     + (f"  {r['stats'].get('Register Count')} registers" if r.get("stats") else ""))
    return "\n".join(lines)
