"""SPIR-V shipped as package data of `vkocr.shaders`, with a manifest of source hashes so stale SPIR-V is caught.

A kernel's name is its source's path under shaders/ without `.comp` (`gemm`, `ocr/crop_warp`); its SPIR-V is
`spv/<name>.spv`. A kernel that includes `storage.glsl` is compiled once per storage precision from the one
source: `spv/<name>.spv` stores fp32, `spv/<name>.fp16.spv` fp16 (`variant()`); one that includes `storage_fp16.glsl`
exists for fp16 storage alone. Everything is read through
importlib.resources, never relative to this file.
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


PRECISION_SUFFIX = {"fp32": "", "fp16": ".fp16"}  # storage precision → SPIR-V name suffix
STORAGE_INCLUDE = '#include "storage.glsl"'
FP16_ONLY_INCLUDE = '#include "storage_fp16.glsl"'  # a kernel for fp16 storage alone


def kernel_source(name: str) -> str:
    return SHADERS.joinpath(*f"{name}.comp".split("/")).read_text()


@cache
def precisions(name: str) -> tuple[str, ...]:
    """The storage precisions kernel `name` is compiled for: every one where it includes storage.glsl, fp16 alone
    where it includes storage_fp16.glsl."""
    source = kernel_source(name)
    if FP16_ONLY_INCLUDE in source:
        return ("fp16",)
    return tuple(PRECISION_SUFFIX) if STORAGE_INCLUDE in source else ("fp32",)


def variant(name: str, precision: str) -> str:
    """The SPIR-V name of kernel `name` compiled for `precision` ("fp32", "fp16")."""
    return name + PRECISION_SUFFIX[precision]


def spirv_targets() -> dict[str, tuple[str, str]]:
    """Every SPIR-V the sources make: its name → (kernel name, precision)."""
    return {variant(n, p): (n, p) for n in kernel_names() for p in precisions(n)}


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
