"""Compile shaders/**/*.comp to shaders/spv/**/*.spv with glslc and record source hashes in the manifest.

Usage: python -m vkocr.shaders.build [--check]   (--check: exit 1 if any SPIR-V is stale, compile nothing)
Needs glslc (Debian/Ubuntu: apt-get install glslc) only on a developer's machine: boards run the shipped SPIR-V.
A developer tool: it writes into the shaders folder of an editable install (a source checkout).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from vkocr.engine.shaders import SHADERS, kernel_names, read_manifest, source_hash

SHADER_DIR = Path(str(SHADERS))
SPV_DIR = SHADER_DIR / "spv"
GLSLC_FLAGS = ["--target-env=vulkan1.1", "-O", "-Werror", f"-I{SHADER_DIR / 'include'}"]


def stale(manifest: dict[str, dict[str, str]]) -> list[str]:
    return [n for n in kernel_names() if manifest.get(n, {}).get("source_sha256") != source_hash(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkocr.shaders.build", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale kernels")
    parser.add_argument("--all", action="store_true", help="rebuild every kernel, stale or not")
    args = parser.parse_args(argv)
    manifest = read_manifest()
    todo = kernel_names() if args.all else stale(manifest)
    if args.check:
        for name in todo:
            print(f"stale: {name}")
        return 1 if todo else 0
    glslc = shutil.which("glslc")
    if todo and glslc is None:
        print("glslc not found: apt-get install glslc", file=sys.stderr)
        return 2
    for name in todo:
        out = SPV_DIR / f"{name}.spv"
        out.parent.mkdir(parents=True, exist_ok=True)
        print(f"compiling {name}.comp", flush=True)
        assert glslc is not None  # checked above whenever todo is non-empty
        subprocess.run([glslc, *GLSLC_FLAGS, str(SHADER_DIR / f"{name}.comp"), "-o", str(out)], check=True)
        manifest[name] = {
            "source_sha256": source_hash(name),
            "spv_sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
        }
    for name in set(manifest) - set(kernel_names()):
        del manifest[name]
        (SPV_DIR / f"{name}.spv").unlink(missing_ok=True)
    (SPV_DIR / "manifest.json").write_text(json.dumps({"kernels": dict(sorted(manifest.items()))}, indent=1) + "\n")
    print(f"{len(todo)} compiled, {len(manifest)} kernels in {SPV_DIR / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
