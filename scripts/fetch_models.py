"""Set-up step: put the default PP-OCR models into models_dir() (VKOCR_MODELS, else ~/.local/share/vkocr/models),
taken from the rapidocr-onnxruntime 1.4.4 wheel.

Idempotent: files already present with the right sha256 are kept. A download with a wrong hash is refused
and nothing is written.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from vkocr.agent.ocr.model_files import DEFAULT_MODELS, SOURCE_WHEEL, WHEEL_DIR, missing_or_bad, models_dir, sha256_of


def main() -> int:
    target = models_dir()
    todo = missing_or_bad(target)
    if not todo:
        print(f"models: all {len(DEFAULT_MODELS)} present in {target}, sha256 verified")
        return 0
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"models: downloading {SOURCE_WHEEL} (wheel only, no dependencies) for "
              + ", ".join(m.filename for m in todo), flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "-d", tmp, SOURCE_WHEEL], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            for m in todo:
                staged = target / f".{m.filename}.part"  # same filesystem, so the rename below is atomic
                staged.write_bytes(zf.read(f"{WHEEL_DIR}/{m.filename}"))
                got = sha256_of(staged)
                if got != m.sha256:
                    staged.unlink()
                    print(f"models: {m.filename} has sha256 {got}, expected {m.sha256}: refused", file=sys.stderr)
                    return 1
                os.replace(staged, target / m.filename)
                print(f"models: {m.role} {m.filename} ok (sha256 {m.sha256[:12]}…)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
