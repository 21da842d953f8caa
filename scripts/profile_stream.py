"""Where the host time of the pipeline goes on a stream of distinct images: cProfile over pass 1 (new shapes)
and pass 2 (cached), the top functions by own time, and the stages' Python time outside GPU waits.

Usage: python scripts/profile_stream.py [--device NAME] [--models NAME|DIR] [--rendered N] [--top N]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Vulkan device (index, UUID or name part)")
    parser.add_argument("--models", default=None, help="model set or folder (default: the default set)")
    parser.add_argument("--rendered", type=int, default=48, help="rendered images in the stream (default 48)")
    parser.add_argument("--top", type=int, default=30, help="functions listed per pass (default 30)")
    args = parser.parse_args()

    from vkocr.agent.cli.stream_images import varied_images
    from vkocr.agent.ocr.model_sets import choose_models
    from vkocr.agent.ocr.pipeline import OcrPipeline
    from vkocr.agent.serving.config import AgentConfig
    from vkocr.agent.serving.plans import warm_pipeline

    images = varied_images(args.rendered, seed=1)
    chosen = choose_models(args.models)
    with OcrPipeline.open(args.device, model_paths=chosen.paths, options=chosen.ocr_options()) as ocr:
        warm_pipeline(ocr, AgentConfig().warm_sizes())
        ocr(images[0][1])
        for number in (1, 2):
            profile = cProfile.Profile()
            stages: dict[str, list[float]] = {}
            for _name, rgb in images[1:]:
                profile.enable()
                result = ocr(rgb)
                profile.disable()
                for stage, ms in result.timings_ms.items():
                    stages.setdefault(stage, []).append(ms - result.gpu_wait_ms.get(stage, 0.0))
            medians = {stage: round(statistics.median(v), 2) for stage, v in stages.items()}
            print(f"pass {number}: Python ms outside GPU waits per stage (median): {medians}")
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
            print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
