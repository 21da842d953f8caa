"""SPIR-V shipped in shaders/spv/, with a manifest of source hashes so stale SPIR-V is caught."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

from vk.errors import ShaderError

SHADER_DIR = Path(__file__).resolve().parent.parent / "shaders"
SPV_DIR = SHADER_DIR / "spv"
MANIFEST = SPV_DIR / "manifest.json"


def source_hash(name: str, shader_dir: Path = SHADER_DIR) -> str:
    """sha256 over the kernel's .comp and every shared include, so a changed include marks all kernels stale."""
    h = hashlib.sha256()
    for path in [shader_dir / f"{name}.comp", *sorted((shader_dir / "include").glob("*.glsl"))]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def kernel_names(shader_dir: Path = SHADER_DIR) -> list[str]:
    return sorted(p.stem for p in shader_dir.glob("*.comp"))


def read_manifest(path: Path = MANIFEST) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text())["kernels"])


@cache
def spirv(name: str) -> bytes:
    """The compiled SPIR-V of shaders/<name>.comp."""
    path = SPV_DIR / f"{name}.spv"
    if not path.exists():
        raise ShaderError(f"no SPIR-V for kernel {name!r} at {path}; run `python -m shaders.build`")
    code = path.read_bytes()
    if len(code) % 4 or code[:4] != b"\x03\x02\x23\x07":
        raise ShaderError(f"{path} is not SPIR-V")
    return code
