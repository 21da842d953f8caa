"""Shipped SPIR-V must match its GLSL: a .comp (or include) changed without `python -m shaders.build` fails."""

from __future__ import annotations

import hashlib

import pytest

from vk.shaders import SPV_DIR, kernel_names, read_manifest, source_hash, spirv

MANIFEST = read_manifest()


@pytest.mark.parametrize("name", kernel_names())
def test_spirv_is_built_from_the_current_source(name: str) -> None:
    assert name in MANIFEST, f"{name}.comp has no SPIR-V: run `python -m shaders.build`"
    assert MANIFEST[name]["source_sha256"] == source_hash(name), (
        f"shaders/{name}.comp (or an include) changed since its SPIR-V was built: run `python -m shaders.build`"
    )
    assert hashlib.sha256(spirv(name)).hexdigest() == MANIFEST[name]["spv_sha256"], f"{name}.spv edited by hand"


def test_no_spirv_without_source() -> None:
    assert sorted(p.stem for p in SPV_DIR.glob("*.spv")) == sorted(MANIFEST) == kernel_names()
