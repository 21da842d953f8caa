"""A bundle may carry the page orientation model (model role ori) beside det, cls and rec: created, signed,
stored and installed with it; a manifest naming another model role, or an ori file it does not name, is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.bundles.conftest import KeyPair
from vkocr.agent.bundles.bundle import create
from vkocr.agent.bundles.errors import BundleFormatError
from vkocr.agent.bundles.manifest import Manifest
from vkocr.agent.bundles.store import ModelStore


def test_a_bundle_carries_the_orientation_model(tmp_path: Path, key: KeyPair, models: dict[str, Path]) -> None:
    ori = tmp_path / "orientation.onnx"
    ori.write_bytes(b"an orientation model's bytes")
    bundle = tmp_path / "with-ori.vkb"
    manifest = create({**models, "ori": ori}, "labels", "2", bundle, private_key=key.private)
    assert manifest.models["ori"] == "orientation.onnx"
    store = ModelStore(tmp_path / "store", key.trusted, keep=3)
    store.add(bundle)
    installed = store.installed("2", verify=True)
    assert installed.models["ori"].read_bytes() == ori.read_bytes() and set(installed.models) == {*models, "ori"}


def test_a_manifest_names_no_other_model_role(tmp_path: Path, models: dict[str, Path]) -> None:
    ori = tmp_path / "orientation.onnx"
    ori.write_bytes(b"an orientation model's bytes")
    manifest = create({**models, "ori": ori}, "labels", "3", tmp_path / "b.vkb")
    doc = json.loads(manifest.to_bytes())
    doc["models"]["layout"] = doc["models"].pop("ori")
    with pytest.raises(BundleFormatError, match="optionally ori"):
        Manifest.from_bytes(json.dumps(doc).encode())
    del doc["models"]["layout"]  # the ori file is listed, but models does not name it
    with pytest.raises(BundleFormatError, match="role 'ori'"):
        Manifest.from_bytes(json.dumps(doc).encode())
    with pytest.raises(BundleFormatError, match="optionally ori"):
        create({**models, "layout": ori}, "labels", "4", tmp_path / "c.vkb")
