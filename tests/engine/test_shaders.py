"""Shipped SPIR-V must match its GLSL: a .comp (or include) changed without `python -m vkocr.shaders.build` fails.
Every kernel that includes storage.glsl ships once per storage precision, one that includes storage_fp16.glsl once."""

from __future__ import annotations

import hashlib

import pytest

from vkocr.engine.shaders import kernel_names, precisions, read_manifest, source_hash, spirv, spirv_names, spirv_targets

MANIFEST = read_manifest()
TARGETS = spirv_targets()


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_spirv_is_built_from_the_current_source(target: str) -> None:
    name, _ = TARGETS[target]
    assert target in MANIFEST, f"{target}.spv is missing: run `python -m vkocr.shaders.build`"
    assert MANIFEST[target]["source_sha256"] == source_hash(name), (
        f"shaders/{name}.comp (or an include) changed since {target}.spv was built: run `python -m vkocr.shaders.build`"
    )
    assert hashlib.sha256(spirv(target)).hexdigest() == MANIFEST[target]["spv_sha256"], f"{target}.spv edited by hand"


def test_no_spirv_without_source() -> None:
    assert spirv_names() == sorted(MANIFEST) == sorted(TARGETS)


def test_every_precision_variant_is_its_own_spirv() -> None:
    """fp16 storage changes the buffers' types, so an fp16 variant that compiled to the fp32 code is a bug."""
    for name in kernel_names():
        if precisions(name) == ("fp32", "fp16"):
            assert spirv(f"{name}.fp16") != spirv(name), name


def test_a_kernel_for_fp16_alone_ships_only_that_variant() -> None:
    assert precisions("pointwise_coopmat") == ("fp16",)
    assert "pointwise_coopmat.fp16" in TARGETS and "pointwise_coopmat" not in TARGETS
