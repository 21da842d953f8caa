"""The model store: add, list, activate, roll back, delete, prune; state that survives re-opening."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.agent.bundles.conftest import BundleFactory, KeyPair
from vkocr.agent.bundles.errors import (
    ActiveVersionError,
    IntegrityError,
    NothingToRollBack,
    SignatureError,
    VersionConflict,
    VersionNotFound,
)
from vkocr.agent.bundles.signing import TrustedKeys
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.ocr.model_files import sha256_of
from vkocr.agent.ocr.options import OcrOptions


@pytest.fixture
def store(tmp_path: Path, key: KeyPair) -> ModelStore:
    return ModelStore(tmp_path / "models", key.trusted, keep=3)


def test_add_stores_a_verified_version(store: ModelStore, make_bundle: BundleFactory, models: dict[str, Path],
                                       selftest_image: Path, key: KeyPair) -> None:
    path, manifest = make_bundle(version="1.0.0")
    info = store.add(path)
    assert (info.name, info.version, info.signer, info.active) == ("ocr", "1.0.0", key.fingerprint, False)
    assert info.size == path.stat().st_size and info.sha256 == sha256_of(path)
    assert info.created == manifest.created and info.content_digest == manifest.content_digest()
    assert [i.version for i in store.versions()] == ["1.0.0"]
    installed = store.installed("1.0.0")
    assert installed.version == "1.0.0" and installed.root == (store.versions_dir / "1.0.0").resolve()
    paths = installed.models
    assert set(paths) == {"det", "cls", "rec"}
    for role, stored in paths.items():
        assert stored.is_absolute() and stored.read_bytes() == models[role].read_bytes()
        assert not stat.S_IMODE(stored.stat().st_mode) & 0o222  # read-only
    assert installed.overrides == {"box_thresh": 0.6, "limit_side_len": 960}
    assert installed.options == OcrOptions(box_thresh=0.6, limit_side_len=960)
    [case] = installed.self_tests
    assert case.expect == "LOT 42" and case.image.read_bytes() == selftest_image.read_bytes()
    assert store.installed("1.0.0", verify=True).manifest == manifest
    assert installed.manifest == manifest
    assert list(store.staging_dir.iterdir()) == []


def test_adding_the_same_content_again_is_a_no_op(store: ModelStore, make_bundle: BundleFactory,
                                                  key: KeyPair) -> None:
    path, _ = make_bundle(version="1.0.0")
    first = store.add(path)
    path.rename(path.with_name("copy.vkb"))
    assert store.add(path.with_name("copy.vkb")) == first
    assert len(store.versions()) == 1


def test_the_same_version_with_other_content_is_refused(store: ModelStore, make_bundle: BundleFactory,
                                                        tmp_path: Path) -> None:
    one, _ = make_bundle(version="1.0.0")
    store.add(one)
    two, _ = make_bundle(version="1.0.0", out=tmp_path / "other.vkb", box_thresh=0.7)
    with pytest.raises(VersionConflict, match="version 1.0.0 is already stored with different content"):
        store.add(two)
    assert store.installed("1.0.0").overrides["box_thresh"] == 0.6


def test_untrusted_bundles_never_reach_the_disk(store: ModelStore, make_bundle: BundleFactory,
                                                other_key: KeyPair) -> None:
    path, _ = make_bundle(signer=other_key)
    with pytest.raises(SignatureError, match="not trusted"):
        store.add(path)
    assert list(store.versions_dir.iterdir()) == [] and list(store.staging_dir.iterdir()) == []


def test_activate_rollback_and_history(store: ModelStore, make_bundle: BundleFactory) -> None:
    for v in ("1", "2", "3"):
        store.add(make_bundle(version=v)[0])
    assert store.active() is None
    with pytest.raises(NothingToRollBack, match="nothing to roll back to"):
        store.rollback_target()
    assert store.set_active("1") is None
    assert store.set_active("2") == "1"
    assert store.set_active("3") == "2"
    assert store.active() == "3" and store.previous() == ["2", "1"]
    assert [(i.version, i.active) for i in store.versions()] == [("3", True), ("2", False), ("1", False)]
    assert store.rollback_target() == "2"
    assert store.set_active("2", rollback=True) == "3"
    assert store.rollback_target() == "1"  # a second rollback goes further back, not forth to 3
    store.set_active(store.rollback_target(), rollback=True)
    assert store.active() == "1" and store.previous() == []


def test_activation_survives_reopening(tmp_path: Path, key: KeyPair, make_bundle: BundleFactory) -> None:
    first = ModelStore(tmp_path / "models", key.trusted)
    for v in ("1", "2"):
        first.add(make_bundle(version=v)[0])
    first.set_active("1")
    first.set_active("2")
    again = ModelStore(tmp_path / "models", key.trusted)
    assert again.recover().describe() == "nothing to recover"
    assert again.active() == "2" and again.rollback_target() == "1"
    assert [i.version for i in again.versions()] == ["2", "1"]
    assert (tmp_path / "models" / "active").read_text() == "2\n"


@pytest.mark.parametrize("version", ["9", "..", "../models", "versions/1", ""])
def test_unknown_versions(store: ModelStore, make_bundle: BundleFactory, version: str) -> None:
    store.add(make_bundle(version="1")[0])
    for call in (store.set_active, store.installed, store.delete, store.info):
        with pytest.raises(VersionNotFound, match=r"is not in the model store \(stored: 1\)"):
            call(version)
    assert [i.version for i in store.versions()] == ["1"]


def test_delete_refuses_the_active_version(store: ModelStore, make_bundle: BundleFactory) -> None:
    for v in ("1", "2"):
        store.add(make_bundle(version=v)[0])
    store.set_active("1")
    store.set_active("2")
    with pytest.raises(ActiveVersionError, match="version 2 is active"):
        store.delete("2")
    store.delete("1")
    assert [i.version for i in store.versions()] == ["2"]
    assert not (store.versions_dir / "1").exists() and list(store.staging_dir.iterdir()) == []
    with pytest.raises(NothingToRollBack):
        store.rollback_target()


def test_prune_keeps_the_newest_the_active_and_the_rollback_target(tmp_path: Path, key: KeyPair,
                                                                   make_bundle: BundleFactory) -> None:
    store = ModelStore(tmp_path / "models", key.trusted, keep=2)
    for v in ("1", "2"):
        store.add(make_bundle(version=v)[0])
    store.set_active("1")
    store.set_active("2")  # rollback target: 1
    store.add(make_bundle(version="3")[0])  # adding prunes: 1 stays as the rollback target
    assert [i.version for i in store.versions()] == ["3", "2", "1"]
    store.set_active("3")  # now the rollback target is 2
    assert store.prune() == ["1"]
    for v in ("4", "5"):
        store.add(make_bundle(version=v)[0])
    assert [i.version for i in store.versions()] == ["5", "4", "3", "2"]  # newest two, active 3, target 2
    assert store.active() == "3"


def test_verify_installed_catches_changes_on_disk_and_revoked_keys(store: ModelStore, make_bundle: BundleFactory,
                                                                   other_key: KeyPair) -> None:
    store.add(make_bundle(version="1")[0])
    rec = store.installed("1").models["rec"]
    rec.chmod(0o644)
    data = rec.read_bytes()
    rec.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    with pytest.raises(IntegrityError, match="stored version 1: file rec.onnx was altered on disk"):
        store.installed("1", verify=True)
    rec.write_bytes(data)
    store.installed("1", verify=True)
    revoked = ModelStore(store.root, TrustedKeys.from_paths([other_key.public_path]))
    with pytest.raises(SignatureError, match="no longer signed by a trusted key"):
        revoked.installed("1", verify=True)
