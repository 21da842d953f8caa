"""SPIR-V shipped as package data of `vkocr.shaders`, with a manifest of source hashes so stale SPIR-V is caught.

A kernel's name is its source's path under shaders/ without `.comp` (`gemm`, `ocr/crop_warp`); its SPIR-V is
`spv/<name>.spv`. Everything is read through importlib.resources, never relative to this file.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

from vkocr.engine.errors import ShaderError

SHADERS: Traversable = files("vkocr.shaders")
SPV_DIR = SHADERS / "spv"
MANIFEST = SPV_DIR / "manifest.json"
INCLUDE_DIR = SHADERS / "include"


def _walk(folder: Traversable, suffix: str, prefix: str = "") -> list[str]:
    names: list[str] = []
    for entry in folder.iterdir():
        if entry.is_dir() and entry.name not in ("include", "spv", "__pycache__"):
            names += _walk(entry, suffix, f"{prefix}{entry.name}/")
        elif entry.is_file() and entry.name.endswith(suffix):
            names.append(prefix + entry.name.removesuffix(suffix))
    return sorted(names)


def source_hash(name: str) -> str:
    """sha256 over the kernel's .comp and every shared include, so a changed include marks all kernels stale."""
    h = hashlib.sha256()
    includes = sorted((p for p in INCLUDE_DIR.iterdir() if p.name.endswith(".glsl")), key=lambda p: p.name)
    for path in [SHADERS.joinpath(*f"{name}.comp".split("/")), *includes]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def kernel_names() -> list[str]:
    """Every kernel with a GLSL source."""
    return _walk(SHADERS, ".comp")


def spirv_names() -> list[str]:
    """Every kernel with shipped SPIR-V."""
    return _walk(SPV_DIR, ".spv")


def read_manifest() -> dict[str, dict[str, str]]:
    if not MANIFEST.is_file():
        return {}
    return dict(json.loads(MANIFEST.read_text())["kernels"])


@cache
def spirv(name: str) -> bytes:
    """The compiled SPIR-V of shaders/<name>.comp."""
    path = SPV_DIR.joinpath(*f"{name}.spv".split("/"))
    if not path.is_file():
        raise ShaderError(f"no SPIR-V for kernel {name!r} at {path}; run `python -m vkocr.shaders.build`")
    code = path.read_bytes()
    if len(code) % 4 or code[:4] != b"\x03\x02\x23\x07":
        raise ShaderError(f"{path} is not SPIR-V")
    return code
