"""Shipped SPIR-V must match its GLSL: a .comp (or include) changed without `python -m vkocr.shaders.build` fails."""

from __future__ import annotations

import hashlib

import pytest

from vkocr.engine.shaders import kernel_names, read_manifest, source_hash, spirv, spirv_names

MANIFEST = read_manifest()


@pytest.mark.parametrize("name", kernel_names())
def test_spirv_is_built_from_the_current_source(name: str) -> None:
    assert name in MANIFEST, f"{name}.comp has no SPIR-V: run `python -m vkocr.shaders.build`"
    assert MANIFEST[name]["source_sha256"] == source_hash(name), (
        f"shaders/{name}.comp (or an include) changed since its SPIR-V was built: run `python -m vkocr.shaders.build`"
    )
    assert hashlib.sha256(spirv(name)).hexdigest() == MANIFEST[name]["spv_sha256"], f"{name}.spv edited by hand"


def test_no_spirv_without_source() -> None:
    assert spirv_names() == sorted(MANIFEST) == kernel_names()
