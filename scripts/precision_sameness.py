"""The sameness gate on a device: every image through `vkocr.OCR(precision="fp32")` and `…"fp16"`, lines and boxes
compared (agent/ocr/sameness.py), every difference listed.

    python scripts/precision_sameness.py [IMAGE_DIR …] [--rendered N] [--models SET] [--device SEL] [--json OUT]
                                         [--matrices]

`--matrices`: compare fp32 on the SIMT kernels (VKOCR_COOPMAT=0) with fp32 on the cooperative matrices
(VKOCR_COOPMAT=1: every convolution they can take, fp32 inputs as hi + lo fp16 pairs) instead.

Images: every file of the folders given (the compat images, say) and N rendered pages of the varied stream set
(the stream benchmark's own, seed 0). Exit 0 when the gate holds, 1 when it does not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import vkocr
from vkocr.agent.cli.stream_images import varied_images
from vkocr.agent.ocr.images import decode_image
from vkocr.agent.ocr.sameness import Sameness
from vkocr.engine.coopmat import ENV as COOPMAT_ENV

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--rendered", type=int, default=96)
    parser.add_argument("--models", default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--matrices", action="store_true", help="fp32 without and with cooperative matrices")
    args = parser.parse_args()
    images = [(p.name, decode_image(p)) for folder in args.folders for p in sorted(folder.iterdir())
              if p.suffix.lower() in IMAGE_SUFFIXES]
    images += varied_images(args.rendered)
    runs = [("fp32", "0"), ("fp32", "1")] if args.matrices else [("fp32", None), ("fp16", None)]
    answers = []
    for precision, matrices in runs:
        if matrices is not None:
            os.environ[COOPMAT_ENV] = matrices  # read when each convolution is recorded
        with vkocr.OCR(args.device, models=args.models, precision=precision) as ocr:
            answers.append([ocr.read(image) for _, image in images])
            print(f"{precision}{' matrices ' + matrices if matrices else ''}: {len(images)} images read on "
                  f"{ocr.device_name} ({ocr.precision.reason})", flush=True)
    sameness = Sameness()
    for (name, _), ref, got in zip(images, answers[0], answers[1]):
        sameness.add(name, ref, got)
    print(sameness.report(*(("simt", "matrices") if args.matrices else ("fp32", "fp16"))))
    if args.json is not None:
        args.json.write_text(json.dumps(sameness.summary(), indent=1, ensure_ascii=False) + "\n")
    return 0 if sameness.passed else 1


if __name__ == "__main__":
    sys.exit(main())
