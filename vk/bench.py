"""`vkocr bench kernels`: GPU time of the core kernels (timestamps), against ceilings measured in the same run.

Each case records `repeats` back-to-back dispatches of one kernel into one command buffer (each writes the same
output, so the recorder puts a barrier between them), replays it once to warm up and then `rounds` times, and
reports min and median per dispatch. Ceilings: a large device-to-device copy for bandwidth, our GEMM for
arithmetic, and the matrix units' multiply-adds as our cooperative-matrix kernels reach them
(vk/matrix_ceiling.py). Every case also checks its output against NumPy once, so a fast wrong kernel cannot pass unseen.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vkocr.engine.device import Device
from vkocr.engine.kernels.layout import record_copy
from vkocr.engine.recorder import Recorder, Timing
from vkocr.engine.tensor import Tensor

WARMUP_S = 0.5


@dataclass
class Case:
    name: str
    shape: str
    flops: float  # per dispatch
    bytes: float  # minimum global traffic per dispatch
    inputs: list[np.ndarray]
    out_shape: tuple[int, ...]
    record: Callable[[Recorder, list[Tensor], Tensor], None]
    reference: Callable[[list[np.ndarray]], np.ndarray]
    out_dtype: type = np.float32


CASE_NAMES = ("gemm", "gemm_fp16", "conv3x3", "depthwise3x3", "depthwise7x7", "conv1x1", "add")  # _cases order


def _cases(rng: np.random.Generator) -> list[Case]:
    from vkocr.engine.kernels.conv import record_conv2d
    from vkocr.engine.kernels.depthwise import record_conv2d_depthwise
    from vkocr.engine.kernels.elementwise import record_binary
    from vkocr.engine.kernels.matmul import record_gemm, record_matmul
    from vkocr.engine.ops.conv import conv2d

    def rand(*shape: int) -> np.ndarray:
        return rng.uniform(-1, 1, shape).astype(np.float32)

    n = 2048
    hw = 160 * 160
    add_n = (64 << 20) // 4
    return [
        Case("gemm", f"{n}x{n}x{n}", 2.0 * n**3, 3 * 4 * n * n, [rand(n, n), rand(n, n)], (n, n),
             lambda r, t, o: record_matmul(r, t[0], t[1], o), lambda a: a[0] @ a[1]),
        # fp16 storage: on a device with cooperative matrices the staged kernel takes it (read it against the
        # matrix ceiling above), elsewhere gemm.comp's fp16 variant
        Case("gemm_fp16", f"{n}x{n}x{n} fp16", 2.0 * n**3, 3 * 2 * n * n,
             [rand(n, n).astype(np.float16), rand(n, n).astype(np.float16)], (n, n),
             lambda r, t, o: record_gemm(r, t[0], t[1], o),
             lambda a: a[0].astype(np.float32) @ a[1].astype(np.float32), np.float16),
        Case("conv3x3", "64->64 @160x160", 2.0 * 64 * 64 * 9 * hw, 4 * (2 * 64 * hw + 64 * 64 * 9),
             [rand(1, 64, 160, 160), rand(64, 64, 3, 3), rand(64)], (1, 64, 160, 160),
             lambda r, t, o: record_conv2d(r, t[0], t[1], o, t[2], pads=(1, 1, 1, 1)),
             lambda a: conv2d(a[0], a[1], a[2], pads=(1, 1, 1, 1))),
        Case("depthwise3x3", "128 @160x160", 2.0 * 128 * 9 * hw, 4 * (2 * 128 * hw + 128 * 9),
             [rand(1, 128, 160, 160), rand(128, 1, 3, 3), rand(128)], (1, 128, 160, 160),
             lambda r, t, o: record_conv2d_depthwise(r, t[0], t[1], o, t[2], strides=(1, 1), pads=(1, 1, 1, 1),
                                                     dilations=(1, 1)),
             lambda a: conv2d(a[0], a[1], a[2], pads=(1, 1, 1, 1), group=128)),
        # PP-OCRv6 det's neck at 960 px: a 7x7 window over 96 channels at a quarter of the resolution
        Case("depthwise7x7", "96 @240x240", 2.0 * 96 * 49 * 240 * 240, 4 * (2 * 96 * 240 * 240 + 96 * 49),
             [rand(1, 96, 240, 240), rand(96, 1, 7, 7), rand(96)], (1, 96, 240, 240),
             lambda r, t, o: record_conv2d_depthwise(r, t[0], t[1], o, t[2], strides=(1, 1), pads=(3, 3, 3, 3),
                                                     dilations=(1, 1)),
             lambda a: conv2d(a[0], a[1], a[2], pads=(3, 3, 3, 3), group=96)),
        Case("conv1x1", "128->128 @160x160", 2.0 * 128 * 128 * hw, 4 * (2 * 128 * hw + 128 * 128),
             [rand(1, 128, 160, 160), rand(128, 128, 1, 1), rand(128)], (1, 128, 160, 160),
             lambda r, t, o: record_conv2d(r, t[0], t[1], o, t[2]), lambda a: conv2d(a[0], a[1], a[2])),
        Case("add", "2 x 64 MiB", float(add_n), 3.0 * 4 * add_n, [rand(add_n), rand(add_n)], (add_n,),
             lambda r, t, o: record_binary(r, "add", t[0], t[1], o), lambda a: a[0] + a[1]),
    ]


def time_replays(device: Device, record: Callable[[Recorder], None], repeats: int, rounds: int,
                 warmup_s: float = WARMUP_S) -> list[Timing]:
    """Every command's GPU time over `rounds` replays of one profiled recording of `record` called `repeats`
    times, after `warmup_s` of replays (scripts/sweep_conv_tiles.py and check_coopmat.py time with it too)."""
    samples: list[Timing] = []
    with Recorder(device, profile=True) as rec:
        for _ in range(repeats):
            record(rec)
        # Warm-up for at least half a second: short bursts leave the GPU at idle clocks and read 3-6x slow.
        start = time.perf_counter()
        while time.perf_counter() - start < warmup_s:
            rec.run()
        for _ in range(rounds):
            rec.run()
            samples += rec.timings()
    return samples


def _time(device: Device, record: Callable[[Recorder], None], repeats: int, rounds: int) -> list[float]:
    return [t.ms for t in time_replays(device, record, repeats, rounds)]


def _summary(name: str, shape: str, samples: list[float]) -> dict[str, Any]:
    return {"name": name, "shape": shape, "min_ms": min(samples), "median_ms": statistics.median(samples)}


def run_kernel_bench(
    override: str | None = None, *, repeats: int = 20, rounds: int = 3, only: list[str] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    rng = np.random.default_rng()
    with Device(override) as device:
        results: dict[str, Any] = {"device": device.info.name, "driver": device.info.driver_version,
                                   "device_type": device.info.type, "cases": []}
        # Bandwidth ceiling: the faster of two large device-local copies (each reads and writes 256 MiB):
        # vkCmdCopyBuffer, and a shader moving 16 bytes per invocation (NVIDIA's copy command is far slower).
        copy_bytes = min(256 << 20, device.info.max_storage_buffer_range)  # lavapipe binds at most 128 MiB
        copy_mib = copy_bytes >> 20
        src, dst = device.tensor((copy_bytes // 4,)), device.tensor((copy_bytes // 4,))
        copies = []
        for how, record_copy_cmd in (
            ("vkCmdCopyBuffer", lambda r: r.copy(src.view, dst.view)),
            ("copy shader", lambda r: record_copy(r, src, dst)),
        ):
            row = _summary(f"copy ({how})", f"{copy_mib} MiB device->device",
                           _time(device, record_copy_cmd, repeats, rounds))
            row["gbps"] = 2 * copy_bytes / (row["min_ms"] * 1e6)
            copies.append(row)
        results["copies"] = copies
        copy = results["copy"] = max(copies, key=lambda c: c["gbps"])
        device.free(src)
        device.free(dst)
        # The matrix units' ceiling, where the device has them (a CPU driver's few workgroups only check the sums)
        from vkocr.engine.matrix_ceiling import measure

        on_cpu = device.info.type == "cpu"
        results["coopmat_shape"] = device.coopmat_shape
        results["matrix"] = measure(device, groups=4 if on_cpu else 1024, iterations=8 if on_cpu else 512,
                                    repeats=1 if on_cpu else repeats, rounds=1 if on_cpu else rounds)
        for case in _cases(rng):
            if only and case.name not in only:
                continue
            if progress:
                print(f"bench: {case.name} {case.shape}", file=sys.stderr, flush=True)
            tensors = [device.upload(a) for a in case.inputs]
            out = device.upload(np.full(case.out_shape, np.nan, case.out_dtype))
            def record(r: Recorder, c: Case = case, t: list[Tensor] = tensors, o: Tensor = out) -> None:
                c.record(r, t, o)

            samples = _time(device, record, repeats, rounds)
            got = device.download(out).astype(np.float32)
            ref = case.reference(case.inputs)
            row = _summary(case.name, case.shape, samples)
            row["rel_err"] = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
            row["tflops"] = case.flops / (row["min_ms"] * 1e9)
            row["gbps"] = case.bytes / (row["min_ms"] * 1e6)
            results["cases"].append(row)
            for t in [*tensors, out]:
                device.free(t)
        gemm = next((c for c in results["cases"] if c["name"] == "gemm"), None)
        for row in results["cases"]:
            row["pct_bandwidth"] = 100 * row["gbps"] / copy["gbps"]
            row["pct_gemm"] = 100 * row["tflops"] / gemm["tflops"] if gemm else None
    return results


def format_results(results: dict[str, Any]) -> str:
    from vkocr.engine.matrix_ceiling import format_rows

    copy = results["copy"]
    copies = "; ".join(f"{c['name']} {c['gbps']:.0f} GB/s" for c in results["copies"])
    header = (
        f"{'kernel':<13} {'shape':<20} {'min ms':>9} {'median ms':>10} {'TFLOP/s':>8} {'GB/s':>8} "
        f"{'%copy BW':>8} {'%GEMM':>6} {'rel err':>8}"
    )
    lines = [
        f"device: {results['device']} ({results['device_type']}, driver {results['driver']})",
        f"bandwidth ceiling: {copy['gbps']:.0f} GB/s, the faster of: {copies} "
        f"(each reads and writes {copy['shape'].split()[0]} MiB)",
        header,
    ]
    lines.insert(2, format_rows(results.get("matrix", []), results.get("coopmat_shape")))
    for r in results["cases"]:
        pct_gemm = f"{r['pct_gemm']:.0f}" if r["pct_gemm"] is not None else "-"
        lines.append(
            f"{r['name']:<13} {r['shape']:<20} {r['min_ms']:>9.4f} {r['median_ms']:>10.4f} {r['tflops']:>8.2f} "
            f"{r['gbps']:>8.0f} {r['pct_bandwidth']:>8.0f} {pct_gemm:>6} {r['rel_err']:>8.1e}"
        )
    if results["device_type"] == "cpu":
        lines.append("note: a CPU Vulkan driver (lavapipe): these numbers are not speed claims")
    return "\n".join(lines)
