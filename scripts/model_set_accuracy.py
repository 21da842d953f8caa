"""Accuracy of each model set on pages rendered with known text (tests/e2e/test_rendered.py's renderer: clean,
turned 180°, blurred, JPEG), for choosing the default set: CER (with and without spaces, NFKC) and line accuracy
(the share of ground-truth lines read exactly, NFKC, in any order; with and without spaces), per set and per variant.

Usage: python scripts/model_set_accuracy.py [--device cpu|llvmpipe|…] [--pages N] [--seed N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VARIANTS = ("clean", "rot180", "blur", "jpeg")


def line_hits(lines: list[str], truth: list[str], spaces: bool = True) -> int:
    """Ground-truth lines that appear among `lines` (each output line counts once), NFKC-normalised; spaces=False
    leaves spaces out of both (PP-OCRv4 drops many)."""
    from tests.e2e.test_rendered import normalise

    seen = Counter(normalise(t, spaces) for t in lines)
    hits = 0
    for t in truth:
        if seen[normalise(t, spaces)] > 0:
            seen[normalise(t, spaces)] -= 1
            hits += 1
    return hits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="backend: cpu (default), llvmpipe, a GPU, numpy")
    parser.add_argument("--pages", type=int, default=24, help="pages to render, spread over the variants")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not 1 <= args.pages <= 1000:
        parser.error("--pages must be within [1, 1000]")

    import numpy as np

    from tests.e2e.test_rendered import cer, render
    from vkocr.agent.ocr.model_files import MODEL_SETS
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.agent.ocr.pipeline import OcrPipeline

    rng = np.random.default_rng(args.seed)
    pages = [render(rng, VARIANTS[i % len(VARIANTS)]) for i in range(args.pages)]
    report: dict[str, Any] = {"device": args.device, "pages": args.pages, "seed": args.seed, "sets": {}}
    for name in MODEL_SETS:
        chosen = choose_models(name)
        with OcrPipeline.open(args.device, options=chosen.ocr_options(), model_paths=chosen.paths) as ocr:
            read = [[line.text for line in ocr(page.image).lines] for page in pages]
        figures: dict[str, Any] = {}
        for variant in ("all", *VARIANTS):
            chosen_pages = [i for i, p in enumerate(pages) if variant in ("all", p.variant)]
            outs = ["\n".join(read[i]) for i in chosen_pages]
            truths = ["\n".join(pages[i].truth) for i in chosen_pages]
            lines = sum(len(pages[i].truth) for i in chosen_pages)
            figures[variant] = {
                "cer": cer(outs, truths), "cer_no_spaces": cer(outs, truths, spaces=False),
                "line_accuracy": sum(line_hits(read[i], pages[i].truth) for i in chosen_pages) / lines,
                "line_accuracy_no_spaces": sum(line_hits(read[i], pages[i].truth, False) for i in chosen_pages) / lines,
                "lines": lines}
        report["sets"][name] = figures
        all_ = figures["all"]
        print(f"{name} on {ocr.device_name}: CER {all_['cer']:.2%} (no spaces {all_['cer_no_spaces']:.2%}), "
              f"line accuracy {all_['line_accuracy']:.2%} (no spaces {all_['line_accuracy_no_spaces']:.2%}) over "
              f"{all_['lines']} lines; "
              + ", ".join(f"{v} {figures[v]['cer']:.2%}/{figures[v]['line_accuracy']:.0%}" for v in VARIANTS),
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
