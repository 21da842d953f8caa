"""DB postprocessing alone on the host CPU: vkocr's db_boxes against RapidOCR 1.4.4's DBPostProcess, same run.

Inputs: the det probability maps of the compat images (../shared/compat/rapidocr-1.4.4/images) and of rendered
pages, prepared as the pipeline prepares them (RapidOCR's side limits and letterbox), then made by
onnxruntime from RapidOCR's own DetPreProcess (short side 736, "min"). Each call is timed
alone; the table gives the median of --calls calls per map. "same" says whether our boxes equal RapidOCR's
after its filter_tag_det_res (the peer's time is DBPostProcess alone, as BENCHMARKS.md measures it).

    .venv/bin/python scripts/bench_db.py [--calls 30] [--pages 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.postproc.reference: RapidOCR's DB and filter, as parity tests run it


def det_maps(pages: int) -> list[tuple[str, np.ndarray, int, int]]:
    """(name, H×W float32 probability map, prepared width, prepared height) of every input, each image
    prepared as the pipeline prepares it (RapidOCR's side limits and letterbox) before DetPreProcess."""
    import onnxruntime as ort
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DetPreProcess

    from tests.paths import COMPAT_IMAGES, MODELS
    from vkocr.agent.cli.bench_pipeline import rendered_pages
    from vkocr.agent.ocr.image_reference import resize_linear_u8
    from vkocr.agent.ocr.images import decode_image
    from vkocr.agent.ocr.options import OcrOptions
    from vkocr.agent.ocr.prep import preparation, prepared_image

    model = str(MODELS / "ch_PP-OCRv4_det_infer.onnx")
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    pre = DetPreProcess(736, "min", [0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
    opts = OcrOptions()
    paths = [p for p in sorted(COMPAT_IMAGES.iterdir()) if p.suffix in (".jpg", ".png")]
    images = [(p.name, decode_image(str(p))) for p in paths]
    maps = []
    for name, rgb in images + rendered_pages(pages):
        prep = preparation(*rgb.shape[:2], max_side_len=opts.max_side_len, min_side_len=opts.min_side_len,
                           min_height=opts.min_height, width_height_ratio=opts.width_height_ratio,
                           letterbox=True)
        # BGR, as RapidOCR's LoadImage gives
        bgr = np.ascontiguousarray(prepared_image(rgb, prep, resize_linear_u8)[..., ::-1])
        prob = session.run(None, {session.get_inputs()[0].name: pre(bgr)})[0][0, 0]
        maps.append((name, np.ascontiguousarray(prob), bgr.shape[1], bgr.shape[0]))
    return maps


def median_ms(fn: Callable[[], object], calls: int) -> float:
    fn()  # warm-up: first-call imports and caches
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(samples)


def run(calls: int, pages: int, compare: str | None = None) -> dict[str, Any]:
    import importlib

    import cv2
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DBPostProcess

    from tests.postproc.reference import rapid_db
    from vkocr.postproc.db import db_boxes

    peer = DBPostProcess(thresh=0.3, box_thresh=0.5, max_candidates=1000, unclip_ratio=1.6, score_mode="fast",
                         use_dilation=True)
    other = importlib.import_module(compare).db_boxes if compare else None
    rows = []
    for name, prob, w, h in det_maps(pages):
        ours, _ = db_boxes(prob, w, h)
        ref, _ = rapid_db(prob, w, h)
        rows.append({
            "image": name, "map": f"{prob.shape[0]}×{prob.shape[1]}", "boxes": len(ours),
            "same": bool(ours.shape == ref.shape and np.array_equal(ours, ref)),
            "ours_ms": median_ms(lambda p=prob, w=w, h=h: db_boxes(p, w, h), calls),
            "rapidocr_ms": median_ms(lambda p=prob, w=w, h=h: peer(p[None, None], (h, w)), calls),
        })
        if other is not None:
            rows[-1]["compare_ms"] = median_ms(lambda p=prob, w=w, h=h: other(p, w, h), calls)
    return {"calls": calls, "compare": compare, "python": platform.python_version(), "numpy": np.__version__,
            "opencv": cv2.__version__, "machine": platform.processor() or platform.machine(), "rows": rows}


def table(result: dict[str, Any]) -> str:
    lines = [f"median of {result['calls']} calls; Python {result['python']}, NumPy {result['numpy']}, "
             f"OpenCV {result['opencv']}",
             "| image | map | boxes | same | ours db_boxes ms | RapidOCR DBPostProcess ms |"
             + (f" {result['compare']}.db_boxes ms |" if result["compare"] else ""),
             "|---|---|---:|:---:|---:|---:|" + ("---:|" if result["compare"] else "")]
    keys = ["ours_ms", "rapidocr_ms"] + (["compare_ms"] if result["compare"] else [])
    for r in result["rows"]:
        lines.append(f"| {r['image']} | {r['map']} | {r['boxes']} | {'yes' if r['same'] else 'NO'} | "
                     + " | ".join(f"{r[k]:.2f}" for k in keys) + " |")
    medians = [statistics.median(r[k] for r in result["rows"]) for k in keys]
    lines.append("| median | | | | " + " | ".join(f"{m:.2f}" for m in medians) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="timed calls per map (median)")
    parser.add_argument("--pages", type=int, default=2, help="rendered pages added to the compat images")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--compare", metavar="MODULE",
                        help="also time MODULE.db_boxes (e.g. an earlier postproc's copy on PYTHONPATH)")
    args = parser.parse_args()
    result = run(args.calls, args.pages, args.compare)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return 0 if all(r["same"] for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
