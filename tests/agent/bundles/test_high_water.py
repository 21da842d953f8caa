"""The model store's high-water mark (anti-rollback) and the strict manifest parser, on real stores and bundles."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.agent.bundles.conftest import BundleFactory, KeyPair
from vkocr.agent.bundles.errors import BundleFormatError, DowngradeRefused, HighWaterUnreadable
from vkocr.agent.bundles.high_water import VersionMark, release_numbers
from vkocr.agent.bundles.manifest import Manifest
from vkocr.agent.bundles.store import ModelStore

JAN, FEB = datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 2, 1, tzinfo=UTC)


@pytest.mark.parametrize(("older", "newer"), [
    (("1.9.0", FEB), ("1.10.0", JAN)),  # numbers, not text; the release beats the date
    (("1.4.4-78e017d5", JAN), ("1.4.4-3f2a9c1d", FEB)),  # same release: the creation time decides
    (("dev", FEB), ("0.0.1", JAN)),  # no release number sorts first
    (("2", JAN), ("2.0.1", JAN)),
])
def test_version_order(older: tuple[str, datetime], newer: tuple[str, datetime]) -> None:
    assert VersionMark(*older).older_than(VersionMark(*newer))
    assert not VersionMark(*newer).older_than(VersionMark(*older))
    assert not VersionMark(*newer).older_than(VersionMark(*newer))  # the same is not older


def test_release_numbers() -> None:
    assert release_numbers("2.3.0-rc1") == (2, 3, 0) and release_numbers("v2") == ()


def test_an_older_version_needs_an_explicit_downgrade_and_the_mark_stays(
        tmp_path: Path, key: KeyPair, make_bundle: BundleFactory) -> None:
    store = ModelStore(tmp_path / "models", key.trusted)
    for version in ("1.0.0", "2.0.0", "1.5.0"):
        store.add(make_bundle(version=version)[0])
    store.set_active("2.0.0")
    with pytest.raises(DowngradeRefused, match=r"1\.0\.0 .* is older than 2\.0\.0"):
        store.set_active("1.0.0")
    assert store.active() == "2.0.0"
    store.set_active("2.0.0")  # again: no downgrade
    assert store.set_active("1.0.0", allow_downgrade=True) == "2.0.0"
    reopened = ModelStore(tmp_path / "models", key.trusted)  # a restart
    with pytest.raises(DowngradeRefused):
        reopened.check_downgrade("1.5.0")
    reopened.check_downgrade("1.5.0", allow_downgrade=True)
    assert reopened.set_active("2.0.0") == "1.0.0"
    assert reopened.set_active("1.0.0", rollback=True) == "2.0.0"  # Rollback is explicit
    assert json.loads((tmp_path / "models" / "high_water.json").read_text())["version"] == "2.0.0"


def test_recover_seeds_the_mark_of_a_store_made_before_it(tmp_path: Path, key: KeyPair,
                                                         make_bundle: BundleFactory) -> None:
    store = ModelStore(tmp_path / "models", key.trusted)
    store.add(make_bundle(version="1.0.0")[0])
    store.add(make_bundle(version="3.0.0")[0])
    store.set_active("3.0.0")
    store.high_water.path.unlink()  # as an agent before anti-rollback left it
    store.recover()
    with pytest.raises(DowngradeRefused):
        store.check_downgrade("1.0.0")


def test_a_damaged_mark_refuses_until_an_explicit_downgrade_rewrites_it(tmp_path: Path, key: KeyPair,
                                                                       make_bundle: BundleFactory) -> None:
    store = ModelStore(tmp_path / "models", key.trusted)
    store.add(make_bundle(version="1.0.0")[0])
    store.high_water.path.write_text("{not json")
    with pytest.raises(HighWaterUnreadable):
        store.set_active("1.0.0")
    store.set_active("1.0.0", allow_downgrade=True)
    assert store.high_water.read() == VersionMark.of(store.manifest("1.0.0"))


def _manifest_text(make_bundle: BundleFactory) -> str:
    return make_bundle()[1].to_bytes().decode()


def test_duplicate_keys_are_refused_at_any_depth(make_bundle: BundleFactory) -> None:
    text = _manifest_text(make_bundle)
    top = text.replace('"version": "1.0.0",', '"version": "1.0.0", "version": "9.0.0",', 1)
    nested = text.replace('"box_thresh": 0.6', '"box_thresh": 0.6, "box_thresh": 0.1', 1)
    for doc in (top, nested):
        assert doc != text
        with pytest.raises(BundleFormatError, match="appears twice"):
            Manifest.from_bytes(doc.encode())
    assert Manifest.from_bytes(text.encode()).version == "1.0.0"


def test_unknown_fields_are_refused_at_any_depth(make_bundle: BundleFactory) -> None:
    text = _manifest_text(make_bundle)
    top = text.replace('"format": 1,', '"format": 1, "expires": "never",', 1)
    in_file = text.replace('"role": "det"', '"role": "det", "mode": 511', 1)
    in_options = text.replace('"box_thresh": 0.6', '"box_thresh": 0.6, "run_shell": "x"', 1)
    for doc in (top, in_file, in_options):
        assert doc != text
        with pytest.raises(BundleFormatError):
            Manifest.from_bytes(doc.encode())
