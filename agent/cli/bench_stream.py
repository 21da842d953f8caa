"""`vkocr bench stream`: the whole pipeline on a stream of distinct images, each read once per pass, as real
traffic comes (DESIGN.md, "Performance method"). Pass 1 meets every image's shapes for the first time, so it pays
for the det plan of each new aspect and the rec plan of each new line-batch width; pass 2 reads the same images
again with those plans cached. Per pass: median, p99 and min wall time, the Python time outside GPU waits (in all
and per stage) and the plans built; overall: the host time a new shape costs, the memory the plans hold, the model
set's reference (RapidOCR 1.4.4 for ppocrv4, 3.10.0 for ppocrv6-small; CPU) on the same stream, and how many lines
are identical to the reference's."""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vkocr.agent.cli.bench_words import NO_PLANS, not_applicable, python_time
from vkocr.agent.cli.reference_ocr import Reference, reference_for
from vkocr.agent.cli.stream_images import find_font, varied_images
from vkocr.agent.ocr.images import decode_image

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
ROLES = ("det", "cls", "rec")
MATCH_IOU = 0.5


def stream_paths(items: list[str]) -> list[str]:
    """Files as given; directories replaced by their image files (IMAGE_SUFFIXES, sorted by name). Raises
    FileNotFoundError for a path that does not exist."""
    paths: list[str] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            paths += sorted(str(p) for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        elif path.is_file():
            paths.append(item)
        else:
            raise FileNotFoundError(f"{item}: no such file or directory")
    return paths


def warm_image() -> np.ndarray:
    """One small image outside the stream, read before pass 1 so that device start-up and first-call costs stay
    out of it while pass 1 still meets its own shapes for the first time (272×232: an aspect unlike the camera,
    screen and page formats of the varied set, so its det plan is not one of theirs)."""
    font_path, _ = find_font()
    font = ImageFont.truetype(font_path, 26) if font_path else ImageFont.load_default(26)
    image = Image.new("RGB", (272, 232), (245, 245, 240))
    ImageDraw.Draw(image).text((24, 96), "WARM UP 0417", fill=(20, 20, 20), font=font)
    return np.asarray(image)


def percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q))


def plan_stats(ocr: Any) -> dict[str, dict[str, Any]] | None:
    """The GPU stages' plan counters per role; None on the CPU backend, which has no plans."""
    stats: dict[str, dict[str, Any]] = ocr.stages.plan_stats()
    return stats or None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def summary(samples: list[float]) -> dict[str, float] | None:
    if not samples:
        return None
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "count": len(samples)}


# -- matching our lines to RapidOCR's --------------------------------------------------------------------------

def polygon_iou(a: Any, b: Any) -> float:
    """IoU of two quadrilaterals as polygons (shapely; buffer(0) repairs a self-crossing quad), not of their
    axis-aligned bounding boxes: turned lines' bounding boxes overlap their neighbours'."""
    from shapely.geometry import Polygon

    pa, pb = Polygon(np.asarray(a, np.float64)).buffer(0), Polygon(np.asarray(b, np.float64)).buffer(0)
    union = pa.union(pb).area
    return float(pa.intersection(pb).area / union) if union > 0 else 0.0


def identical_lines(ours: list[tuple[Any, str]], theirs: list[tuple[Any, str]]) -> int:
    """Lines paired greedily by box IoU (highest first, each line in one pair, IoU ≥ MATCH_IOU) whose texts
    are equal."""
    pairs = sorted(((polygon_iou(a, b), i, j) for i, (a, _) in enumerate(ours) for j, (b, _) in enumerate(theirs)),
                   reverse=True)
    used_ours: set[int] = set()
    used_theirs: set[int] = set()
    same = 0
    for iou, i, j in pairs:
        if iou < MATCH_IOU:
            break
        if i in used_ours or j in used_theirs:
            continue
        used_ours.add(i)
        used_theirs.add(j)
        same += ours[i][1] == theirs[j][1]
    return same


# -- the runs -------------------------------------------------------------------------------------------------

def run_pass(ocr: Any, inputs: list[tuple[str, np.ndarray]], number: int, progress: bool
             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Each image once, in order: per image wall ms, Python ms outside GPU waits and the lines; per pass the
    plans built and their build times (from the stages' counters before and after)."""
    before = plan_stats(ocr)
    rows = []
    for k, (name, rgb) in enumerate(inputs):
        start = time.perf_counter()
        result = ocr(rgb)
        wall = (time.perf_counter() - start) * 1e3
        python = wall - sum(result.gpu_wait_ms.values())
        lines = [(line.box, line.text) for line in result.lines]
        stages = {name: ms - result.gpu_wait_ms.get(name, 0.0) for name, ms in result.timings_ms.items()}
        rows.append({"wall_ms": wall, "python_ms": python, "stages": stages, "lines": lines})
        if progress:
            print(f"bench stream: pass {number} [{k + 1}/{len(inputs)}] {name}: {wall:.1f} ms "
                  f"(Python {python:.1f} ms), {len(lines)} lines", file=sys.stderr, flush=True)
    after = plan_stats(ocr)
    walls = [r["wall_ms"] for r in rows]
    stage_names = dict.fromkeys(name for r in rows for name in r["stages"])  # in the pipeline's order
    detail: dict[str, Any] = {
        "pass": number, "median_ms": statistics.median(walls), "p99_ms": percentile(walls, 99), "min_ms": min(walls),
        "python_median_ms": statistics.median(r["python_ms"] for r in rows),
        # per stage over the images that ran it (a stage an image skips, rec on an image without text, is not 0)
        "python_stage_median_ms": {name: statistics.median(r["stages"][name] for r in rows if name in r["stages"])
                                   for name in stage_names},
        "plans_built": None, "classes_traced": None, "build_ms": None, "plan_memory_mib": None,
    }
    if before is not None and after is not None:
        detail["plans_built"] = {role: after[role]["recordings"] - before[role]["recordings"] for role in after}
        detail["build_ms"] = {role: after[role]["build_ms"][len(before[role]["build_ms"]):] for role in after}
        detail["build_kinds"] = {role: after[role]["build_kinds"][len(before[role]["build_kinds"]):]
                                 for role in after}
        detail["classes_traced"] = {role: kinds.count("traced") for role, kinds in detail["build_kinds"].items()}
        detail["plan_memory_mib"] = sum(s["plan_memory_bytes"] for s in after.values()) / 2**20
    return detail, rows


def run_reference(reference: Reference, inputs: list[tuple[str, np.ndarray]], warm: np.ndarray, progress: bool
                  ) -> list[tuple[float, list[tuple[Any, str]]]]:
    """The reference once over the stream after one warm-up call: wall ms and (box, text) per image. One pass:
    onnxruntime keeps nothing per shape worth a second."""
    reference.read(np.ascontiguousarray(warm[..., ::-1]))  # it takes BGR
    rows = []
    for k, (name, rgb) in enumerate(inputs):
        bgr = np.ascontiguousarray(rgb[..., ::-1])
        start = time.perf_counter()
        found = reference.read(bgr)
        wall = (time.perf_counter() - start) * 1e3
        rows.append((wall, found))
        if progress:
            print(f"bench stream: {reference.label} [{k + 1}/{len(inputs)}] {name}: {wall:.1f} ms, "
                  f"{len(found)} lines", file=sys.stderr, flush=True)
    return rows


def per_image_rows(inputs: list[tuple[str, np.ndarray]], per_pass: list[list[dict[str, Any]]],
                   theirs: list[tuple[float, list[tuple[Any, str]]]] | None) -> tuple[list[dict[str, Any]], int, int]:
    """A row per image (ours per pass, RapidOCR, identical lines), and over all images the identical lines and
    the lines compared (per image the larger of the two counts)."""
    compared = per_pass[1] if len(per_pass) >= 2 else per_pass[0]  # ours are deterministic: pass 2 stands for all
    rows = []
    same_total = max_total = 0
    for k, (name, rgb) in enumerate(inputs):
        ours = compared[k]["lines"]
        row: dict[str, Any] = {"name": name, "size": f"{rgb.shape[1]}x{rgb.shape[0]}", "lines": len(ours),
                               "ours_ms": [p[k]["wall_ms"] for p in per_pass],
                               "python_ms": [p[k]["python_ms"] for p in per_pass],
                               "rapidocr_ms": None, "rapidocr_lines": None, "identical": None,
                               "texts": [text for _, text in ours]}
        if theirs is not None:
            wall, their_lines = theirs[k]
            same = identical_lines(ours, their_lines)
            row.update(rapidocr_ms=wall, rapidocr_lines=len(their_lines), identical=same,
                       rapidocr_texts=[text for _, text in their_lines])
            same_total += same
            max_total += max(len(ours), len(their_lines))
        rows.append(row)
    return rows, same_total, max_total


def run_stream_bench(device: str | None, paths: list[str], *, rendered: int = 24, passes: int = 2,
                     rapid: bool = True, progress: bool = True, seed: int = 0,
                     det_limit_side_len: int | None = None, warm_sizes: Sequence[tuple[int, int]] | None = None,
                     rec_width_bucket: int | None = None, models: str | None = None,
                     precision: str = "auto") -> dict[str, Any]:
    """The stream: `paths` (files, or directories of images) decoded, then `rendered` images of the varied set;
    `passes` passes of our pipeline over it, then RapidOCR once (unless `rapid` is False). `det_limit_side_len`
    changes the det resize target (default 736, RapidOCR's) for ours and RapidOCR alike: the tests lower it,
    since on lavapipe one det at 736 takes tens of seconds. Before the stream the pipeline records the plans of
    `warm_sizes` ((width, height); default: the agent's default warm_shapes) as the agent does before it serves;
    `rec_width_bucket` overrides the option of that name. `models`: a model set or folder (agent/ocr/model_sets.py;
    default: the default set), whose procedure names the reference it is compared with (RapidOCR 1.4.4 or 3.10)."""
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.agent.ocr.pipeline import OcrPipeline
    from vkocr.agent.serving.config import AgentConfig
    from vkocr.agent.serving.plans import warm_pipeline

    if not 1 <= passes <= 10:
        raise ValueError(f"passes must be 1..10, got {passes}")
    inputs = [(Path(p).name, decode_image(p)) for p in stream_paths(paths)] + varied_images(rendered, seed)
    if not inputs:
        raise ValueError("no images: give image files or folders, or rendered > 0")
    warm = warm_image()
    details: list[dict[str, Any]] = []
    per_pass: list[list[dict[str, Any]]] = []
    overrides: dict[str, Any] = {}
    if det_limit_side_len is not None:
        overrides["limit_side_len"] = det_limit_side_len
    if rec_width_bucket is not None:
        overrides["rec_width_bucket"] = rec_width_bucket
    chosen = choose_models(models)
    options = chosen.ocr_options(overrides)
    sizes = AgentConfig().warm_sizes() if warm_sizes is None else list(warm_sizes)
    model_set = chosen.known.name if chosen.known is not None else None
    with OcrPipeline.open(device, options=options, model_paths=chosen.paths, precision=precision,
                          model_set=model_set) as ocr:
        served_precision = {"precision": ocr.precision.precision, "reason": ocr.precision.reason}
        warmed = warm_pipeline(ocr, sizes)  # as the agent does before it reports SERVING
        before_warm_image = plan_stats(ocr)
        ocr(warm)  # device start-up, shader pipelines, first-call costs: not counted
        for number in range(1, passes + 1):
            detail, rows = run_pass(ocr, inputs, number, progress)
            details.append(detail)
            per_pass.append(rows)
        final = plan_stats(ocr)
        backend, device_name = ocr.backend, ocr.device_name
    reference = reference_for(chosen.procedure, chosen.paths, det_limit_side_len) if rapid else None
    theirs = run_reference(reference, inputs, warm, progress) if reference is not None else None
    per_image, same_total, max_total = per_image_rows(inputs, per_pass, theirs)
    texts = [[[text for _, text in r["lines"]] for r in rows] for rows in per_pass]
    rapid_ms = [t[0] for t in theirs] if theirs is not None else []
    first = details[0]
    second = details[1] if passes >= 2 else None
    first_builds = first["build_ms"] or {}
    first_kinds = first.get("build_kinds") or {}
    class_hits = {role: [ms for ms, kind in zip(first_builds.get(role, []), first_kinds.get(role, []))
                         if kind == "class"] for role in ROLES}
    results: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "machine": {"host": platform.node(), "cpu": cpu_model(), "cpus": os.cpu_count(), "device": device_name},
        "backend": backend,
        "precision": served_precision,
        "models": chosen.name,
        "reference": reference.label if reference is not None else None,
        "images": len(inputs),
        "files": len(inputs) - rendered,
        "rendered": rendered,
        "seed": seed,
        "det_limit_side_len": options.limit_side_len,
        "rec_width_bucket": options.rec_width_bucket,
        "warm_up": {"sizes": [f"{w}x{h}" for w, h in sizes], "plans_recorded": warmed.recorded, "ms": warmed.ms,
                    "plans": before_warm_image},
        "passes_run": passes,
        "distinct_shapes": {role: final[role]["distinct_shapes"] if final else None for role in ROLES},
        "ours_pass1_median_ms": first["median_ms"],
        "ours_pass1_p99_ms": first["p99_ms"],
        "ours_pass2_median_ms": second["median_ms"] if second else None,
        "ours_pass2_p99_ms": second["p99_ms"] if second else None,
        "rapidocr_median_ms": statistics.median(rapid_ms) if rapid_ms else None,
        "rapidocr_p99_ms": percentile(rapid_ms, 99) if rapid_ms else None,
        "ratio_pass1": None, "ratio_pass2": None,
        "new_shape_ms_summary": {role: summary(first_builds.get(role, [])) for role in ROLES} if final else
        {role: None for role in ROLES},
        # the plans of pass 1 that a traced shape class made (the rest traced a new class)
        "class_hit_ms_summary": {role: summary(class_hits[role]) for role in ROLES} if final else
        {role: None for role in ROLES},
        "plan_memory_mib": max(d["plan_memory_mib"] for d in details) if final else None,
        "python_outside_waits_median_ms": (second or first)["python_median_ms"],
        "lines_identical": same_total if theirs is not None else None,
        "lines_compared": max_total if theirs is not None else None,
        "lines_identical_fraction": same_total / max_total if theirs is not None and max_total else None,
        "passes_agree": all(t == texts[0] for t in texts[1:]),
        "passes": details,
        "per_image": per_image,
    }
    # the medians alone, as BENCHMARKS.md's stream records have them
    results["new_shape_ms"] = {role: s["median"] if s else None for role, s in results["new_shape_ms_summary"].items()}
    if rapid_ms:
        results["ratio_pass1"] = results["rapidocr_median_ms"] / first["median_ms"]
        if second:
            results["ratio_pass2"] = results["rapidocr_median_ms"] / second["median_ms"]
    return results


# -- the table ------------------------------------------------------------------------------------------------

def _ms(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "n/a"


def format_stream_results(r: dict[str, Any]) -> str:
    machine = r["machine"]
    lines = [f"stream of {r['images']} distinct images ({r['files']} files, {r['rendered']} rendered), "
             f"{r['passes_run']} passes; {r['date']}",
             f"models: {r['models']}; backend: {r['backend']}; host {machine['host']}, CPU {machine['cpu']} "
             f"({machine['cpus']} cores)",
             f"{'':<10} {'median ms':>10} {'p99':>8} {'min':>8} {'Python':>7}  {'plans built det/cls/rec':<24} "
             f"{'classes traced':<15} {'plan MiB':>8}"]
    for d in r["passes"]:
        built = "/".join(str(d["plans_built"][role]) for role in ROLES) if d["plans_built"] else "n/a"
        traced = "/".join(str(d["classes_traced"][role]) for role in ROLES) if d.get("classes_traced") else "n/a"
        lines.append(f"{'pass ' + str(d['pass']):<10} {d['median_ms']:>10.1f} {d['p99_ms']:>8.1f} {d['min_ms']:>8.1f} "
                     f"{d['python_median_ms']:>7.1f}  {built:<24} {traced:<15} {_ms(d['plan_memory_mib']):>8}")
    if r["rapidocr_median_ms"] is not None:
        rapid = [row["rapidocr_ms"] for row in r["per_image"]]
        lines.append(f"{r['reference'] or 'RapidOCR':<10} {r['rapidocr_median_ms']:>10.1f} "
                     f"{r['rapidocr_p99_ms']:>8.1f} {min(rapid):>8.1f}")
        ratios = [f"pass {i} {r[f'ratio_pass{i}']:.2f}x" for i in (1, 2) if r.get(f"ratio_pass{i}") is not None]
        lines.append(f"{r['reference']} median / ours median: " + ", ".join(ratios))
        fraction = r["lines_identical_fraction"]
        lines.append(f"lines identical to {r['reference']}: {r['lines_identical']}/{r['lines_compared']}"
                     + (f" ({100 * fraction:.1f}%)" if fraction is not None else ""))
    else:
        lines.append("reference (RapidOCR): not run (--no-rapidocr, or the reference is not installed)")
    shapes = r["distinct_shapes"]
    if shapes["det"] is not None:
        lines.append(f"distinct shapes planned: det {shapes['det']}, cls {shapes['cls']}, rec {shapes['rec']}; "
                     f"plan memory at most {r['plan_memory_mib']:.1f} MiB")
        news = [f"{role} {s['median']:.1f} (min {s['min']:.1f}, max {s['max']:.1f}, n={s['count']})"
                for role, s in r["new_shape_ms_summary"].items() if s]
        lines.append("new shape in pass 1, host ms per plan built (median): " + ("; ".join(news) or "none built"))
        hits = [f"{role} {s['median']:.1f} (n={s['count']})" for role, s in r.get("class_hit_ms_summary", {}).items()
                if s]
        if hits:
            lines.append("  of those, made by a traced shape class (median ms): " + "; ".join(hits))
    lines.append(f"{python_time(r['backend'])} per image (median, pass {min(2, r['passes_run'])}): "
                 f"{r['python_outside_waits_median_ms']:.1f} ms; passes agree: {'yes' if r['passes_agree'] else 'NO'}")
    stages = r["passes"][min(2, r["passes_run"]) - 1].get("python_stage_median_ms")
    if stages:
        lines.append("  by stage (median ms): " + ", ".join(f"{name} {ms:.2f}" for name, ms in stages.items()))
    if r["backend"].startswith("vulkan") and "llvmpipe" in machine["device"]:
        lines.append("note: a CPU Vulkan driver (lavapipe): these numbers are not speed claims")
    lines += not_applicable(r["backend"], NO_PLANS)
    return "\n".join(lines)
