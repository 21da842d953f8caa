"""`vkocr bench pipeline`: the whole OCR pipeline per image, ours against RapidOCR 1.4.4 (onnxruntime on the CPU)
in the same run: median and p99 per image, our per-stage breakdown, and the Python time outside GPU waits."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from vkocr.agent.cli.bench_words import RAPIDOCR_ABSENT, on_gpu, python_time
from vkocr.agent.ocr.images import decode_image


def rendered_pages(count: int, seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """Synthetic document pages: lines of Chinese and Latin text in WenQuanYi and DejaVu (Debian fonts)."""
    from PIL import Image, ImageDraw, ImageFont

    from vkocr.agent.ocr.fonts import find_font

    font_path = find_font()
    phrases = ["生产日期 2026-11-29", "批号 LOT A2391-7", "有效期至 2028-05-31", "Serial No. 4471-0093-22",
               "上海市浦东新区张江路 88 号", "Net weight 500 g", "保质期十二个月", "Made in China",
               "产品名称：工业清洗剂", "Store below 25°C", "执行标准 GB/T 13173", "Batch 20261129-03"]
    rng = np.random.default_rng(seed)
    pages = []
    for i in range(count):
        page = Image.new("RGB", (1240, 1754), "white")  # A4 at 150 dpi
        draw = ImageDraw.Draw(page)
        y = 80
        while y < 1650:
            size = int(rng.integers(24, 44))
            font = ImageFont.truetype(font_path, size) if font_path else ImageFont.load_default()
            text = "  ".join(rng.choice(phrases, size=int(rng.integers(1, 3))))
            draw.text((int(rng.integers(60, 200)), y), text, fill=(20, 20, 20), font=font)
            y += int(size * 1.8)
        pages.append((f"page-{i + 1}", np.asarray(page)))
    return pages


def percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples), q))


def _timed_calls(ocr: Any, rgb: np.ndarray, runs: int
                 ) -> tuple[list[float], list[float], list[dict[str, float]], list[dict[str, float]]]:
    """Wall ms, wall minus GPU fence waits ms, stage timings, and each stage's time minus its GPU waits, of
    `runs` calls (every fence wait of a call falls in one of its stages)."""
    walls, pythons, stages, stage_pythons = [], [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        result = ocr(rgb)
        wall_ms = (time.perf_counter() - start) * 1e3
        walls.append(wall_ms)
        pythons.append(wall_ms - sum(result.gpu_wait_ms.values()))
        stages.append(result.timings_ms)
        stage_pythons.append({k: v - result.gpu_wait_ms.get(k, 0.0) for k, v in result.timings_ms.items()})
    return walls, pythons, stages, stage_pythons


def _medians(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median([s.get(k, 0.0) for s in samples]) for k in samples[-1]}


def run_pipeline_bench(device: str | None, images: list[str], *, pages: int = 4, runs: int = 10,
                       progress: bool = True, warm_s: float = 0.5) -> dict[str, Any]:
    from vkocr.agent.ocr.pipeline import OcrPipeline

    inputs = [(Path(p).name, decode_image(p)) for p in images] + rendered_pages(pages)
    try:
        from rapidocr_onnxruntime import RapidOCR

        rapid: Any = RapidOCR()
    except ImportError:
        rapid = None
    rows = []
    with OcrPipeline.open(device) as ocr:
        for name, rgb in inputs:
            if progress:
                print(f"bench: {name}", file=sys.stderr, flush=True)
            result = ocr(rgb)  # first call: plans are recorded here, not timed
            walls, pythons, stages, stage_pythons = _timed_calls(ocr, rgb, runs)
            row: dict[str, Any] = {
                "image": name, "size": f"{rgb.shape[1]}x{rgb.shape[0]}", "lines": len(result.lines),
                "ours_median_ms": statistics.median(walls), "ours_p99_ms": percentile(walls, 99),
                "python_outside_gpu_waits_ms": statistics.median(pythons), "python_min_ms": min(pythons),
                "stages_ms": _medians(stages), "python_stages_ms": _medians(stage_pythons),
            }
            if warm_s > 0:
                # The runs above follow seconds of idle GPU (RapidOCR's turn), so the GPU starts them at idle
                # clocks; these follow warm_s of back-to-back calls, as under sustained load.
                until = time.perf_counter() + warm_s
                while time.perf_counter() < until:
                    ocr(rgb)
                walls, pythons, stages, stage_pythons = _timed_calls(ocr, rgb, runs)
                row["ours_warm_median_ms"] = statistics.median(walls)
                row["ours_warm_p99_ms"] = percentile(walls, 99)
                row["python_warm_ms"] = statistics.median(pythons)
                row["python_warm_min_ms"] = min(pythons)
                row["stages_warm_ms"] = _medians(stages)
                row["python_stages_warm_ms"] = _medians(stage_pythons)
            if rapid is not None:
                bgr = np.ascontiguousarray(rgb[..., ::-1])
                rapid(bgr)
                times = []
                for _ in range(runs):
                    start = time.perf_counter()
                    res, _ = rapid(bgr)
                    times.append((time.perf_counter() - start) * 1e3)
                row["rapidocr_median_ms"] = statistics.median(times)
                row["rapidocr_p99_ms"] = percentile(times, 99)
                row["rapidocr_lines"] = len(res or [])
            rows.append(row)
        backend = ocr.backend
    summary: dict[str, Any] = {"backend": backend, "images": rows,
                               "ours_median_of_medians_ms": statistics.median(r["ours_median_ms"] for r in rows)}
    if warm_s > 0:
        summary["ours_warm_median_of_medians_ms"] = statistics.median(r["ours_warm_median_ms"] for r in rows)
    if rapid is not None:
        summary["rapidocr_median_of_medians_ms"] = statistics.median(r["rapidocr_median_ms"] for r in rows)
    return summary


def format_pipeline_results(r: dict[str, Any]) -> str:
    lines = [f"backend: {r['backend']}",
             (f"{'image':<34} {'size':>10} {'lines':>5} {'ours med':>9} {'p99':>8} {'py ms':>6} {'min':>5} "
             f"{'RapidOCR med':>12} {'p99':>8} {'ratio':>6}  stages (median ms)")]
    for row in r["images"]:
        rapid = row.get("rapidocr_median_ms")
        ratio = f"{rapid / row['ours_median_ms']:.1f}x" if rapid else "-"
        stages = " ".join(f"{k}={v:.1f}" for k, v in row["stages_ms"].items())
        lines.append(
            f"{row['image'][:34]:<34} {row['size']:>10} {row['lines']:>5} {row['ours_median_ms']:>9.1f} "
            f"{row['ours_p99_ms']:>8.1f} {row['python_outside_gpu_waits_ms']:>6.1f} "
            f"{row.get('python_min_ms', 0):>5.1f} "
            f"{(f'{rapid:.1f}' if rapid else 'n/a'):>12} {row.get('rapidocr_p99_ms', 0):>8.1f} {ratio:>6}  {stages}"
        )
        if "ours_warm_median_ms" in row:
            warm = row["ours_warm_median_ms"]
            stages = " ".join(f"{k}={v:.1f}" for k, v in row["stages_warm_ms"].items())
            label = "  warm GPU" if on_gpu(r["backend"]) else "  warm"
            lines.append(f"{label:<51} {warm:>9.1f} {row['ours_warm_p99_ms']:>8.1f} "
                         f"{row['python_warm_ms']:>6.1f} {row.get('python_warm_min_ms', 0):>5.1f} "
                         f"{'':>12} {'':>8} {(f'{rapid / warm:.1f}x' if rapid else '-'):>6}  {stages}")
        python = row.get("python_stages_warm_ms", row.get("python_stages_ms"))
        if python:
            by_stage = "  Python by stage (ms, GPU waits left out)" if on_gpu(r["backend"]) else "  by stage (ms)"
            lines.append(f"{by_stage:<51} "
                         + " ".join(f"{k}={v:.2f}" for k, v in python.items()))
    ours = r["ours_median_of_medians_ms"]
    rapid_all = r.get("rapidocr_median_of_medians_ms")
    tail = f"median per image: ours {ours:.1f} ms"
    if rapid_all:
        tail += f", RapidOCR {rapid_all:.1f} ms ({rapid_all / ours:.1f}x)"
    if "ours_warm_median_of_medians_ms" in r:
        warm = r["ours_warm_median_of_medians_ms"]
        tail += f"; after warm-up ours {warm:.1f} ms" + (f" ({rapid_all / warm:.1f}x)" if rapid_all else "")
    lines.append(tail)
    pythons = [row["python_outside_gpu_waits_ms"] for row in r["images"]]
    if r.get("rapidocr_median_of_medians_ms") is None:
        lines.append(RAPIDOCR_ABSENT)
    lines.append(f"{python_time(r['backend'])} per image: median {statistics.median(pythons):.1f} ms, "
                 f"max {max(pythons):.1f} ms" + (
                     f"; after warm-up median {statistics.median(row['python_warm_ms'] for row in r['images']):.1f} ms"
                     if "ours_warm_median_of_medians_ms" in r else ""))
    return "\n".join(lines)
