"""Compile shaders/**/*.comp to shaders/spv/**/*.spv and record source hashes in the manifest.

Usage: python -m vkocr.shaders.build [--check] [--all]   (--check: exit 1 if any SPIR-V is stale, compile nothing)
A kernel that includes storage.glsl is compiled once per storage precision (`<name>.spv`, `<name>.fp16.spv`
with -DFP16). Kernels compile with glslc (Debian/Ubuntu: apt-get install glslc), except those that use
GL_KHR_cooperative_matrix, which Debian 12's glslc rejects: they need glslang ≥ 14 (scripts/fetch_glslang.sh
puts one in build/tools/glslang). Only a developer's machine needs either: boards run the shipped SPIR-V.
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

from vkocr.engine.shaders import SHADERS, kernel_source, read_manifest, source_hash, spirv_targets

SHADER_DIR = Path(str(SHADERS))
SPV_DIR = SHADER_DIR / "spv"
GLSLC_FLAGS = ["--target-env=vulkan1.1", "-O", "-Werror", f"-I{SHADER_DIR / 'include'}"]
# cooperative matrices: SPIR-V 1.5 (Vulkan 1.2), where the workgroup size stays the WorkgroupSize spec constant
# (for Vulkan 1.3 glslang emits LocalSizeId, which needs the maintenance4 feature) and the Vulkan memory model
# that GL_KHR_memory_scope_semantics brings is core (the device enables vulkanMemoryModel with coopmat)
# No -Os: glslang 15.2's SPIR-V optimizer crashes (SIGSEGV) on conv2d_coopmat.comp's prefetch registers; the
# driver's compiler optimizes the unoptimized SPIR-V as well.
GLSLANG_FLAGS = ["-V", "--target-env", "vulkan1.2", f"-I{SHADER_DIR / 'include'}"]
COOPMAT_EXTENSION = "GL_KHR_cooperative_matrix"
GLSLANG_HINT = "scripts/fetch_glslang.sh (glslang ≥ 14 for GL_KHR_cooperative_matrix)"


def stale(manifest: dict[str, dict[str, str]]) -> list[str]:
    """SPIR-V names whose source (or an include) changed since they were compiled, or that were never compiled."""
    return [target for target, (name, _) in spirv_targets().items()
            if manifest.get(target, {}).get("source_sha256") != source_hash(name)]


def compile_command(name: str, precision: str, out: Path) -> list[str]:
    """The compiler call for one SPIR-V; SystemExit naming the missing compiler."""
    source = str(SHADER_DIR / f"{name}.comp")
    defines = ["-DFP16"] if precision == "fp16" else []
    if COOPMAT_EXTENSION in kernel_source(name):
        glslang = SHADER_DIR.parent / "build" / "tools" / "glslang" / "glslang"
        if not glslang.is_file():
            raise SystemExit(f"{name}.comp uses {COOPMAT_EXTENSION}: run {GLSLANG_HINT}")
        return [str(glslang), *GLSLANG_FLAGS, *defines, source, "-o", str(out)]
    glslc = shutil.which("glslc")
    if glslc is None:
        raise SystemExit("glslc not found: apt-get install glslc")
    return [glslc, *GLSLC_FLAGS, *defines, source, "-o", str(out)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkocr.shaders.build", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale kernels")
    parser.add_argument("--all", action="store_true", help="rebuild every kernel, stale or not")
    args = parser.parse_args(argv)
    manifest = read_manifest()
    targets = spirv_targets()
    todo = list(targets) if args.all else stale(manifest)
    if args.check:
        for target in todo:
            print(f"stale: {target}")
        return 1 if todo else 0
    for target in todo:
        name, precision = targets[target]
        out = SPV_DIR / f"{target}.spv"
        out.parent.mkdir(parents=True, exist_ok=True)
        print(f"compiling {name}.comp ({precision})", flush=True)
        subprocess.run(compile_command(name, precision, out), check=True, stdout=subprocess.DEVNULL)
        manifest[target] = {
            "source_sha256": source_hash(name),
            "spv_sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
        }
    for target in set(manifest) - set(targets):
        del manifest[target]
        (SPV_DIR / f"{target}.spv").unlink(missing_ok=True)
    (SPV_DIR / "manifest.json").write_text(json.dumps({"kernels": dict(sorted(manifest.items()))}, indent=1) + "\n")
    print(f"{len(todo)} compiled, {len(manifest)} SPIR-V files in {SPV_DIR / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
