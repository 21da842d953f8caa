"""What a crash leaves behind is cleaned up on start, and threads adding at once do not trip over each other."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tests.agent.bundles.conftest import BundleFactory, KeyPair
from vkocr.agent.bundles.errors import VersionConflict
from vkocr.agent.bundles.store import MARKER, ModelStore


def simulate_crash_leftovers(store: ModelStore) -> list[Path]:
    """What a kill -9 in the middle of add(), delete() and a pointer write leaves."""
    half_extracted = store.staging_dir / "2.0.0.1a2b3c4d"
    half_extracted.mkdir()
    (half_extracted / "det.onnx").write_bytes(b"partial model bytes")
    half_deleted = store.staging_dir / "deleting.0.9.5e6f7a8b"
    (half_deleted / "selftest").mkdir(parents=True)
    pointer_temp = store.root / ".active.x1y2z3.tmp"
    pointer_temp.write_text("2.0.0\n")
    return [half_extracted, half_deleted, pointer_temp]


def test_recover_falls_back_when_the_active_version_is_incomplete(tmp_path: Path, key: KeyPair,
                                                                  make_bundle: BundleFactory) -> None:
    store = ModelStore(tmp_path / "models", key.trusted)
    for v in ("1", "2", "3"):
        store.add(make_bundle(version=v)[0])
    store.set_active("1")
    store.set_active("3")
    (store.versions_dir / "3" / MARKER).unlink()  # as if "3" were never finished
    leftovers = simulate_crash_leftovers(store)

    restarted = ModelStore(tmp_path / "models", key.trusted)
    with capture_logs() as logs:
        report = restarted.recover()
    assert set(report.removed_leftovers) == {str(p) for p in leftovers}
    assert report.removed_incomplete == ("3",)
    assert (report.active_before, report.active_after) == ("3", "2")  # the newest complete one, not the oldest
    assert "active version 3 is missing or incomplete: now 2" in report.describe()
    assert any(e["event"] == "model_store_active_fallback" and e["active"] == "2" for e in logs)
    assert restarted.active() == "2" and (tmp_path / "models" / "active").read_text() == "2\n"
    assert [i.version for i in restarted.versions()] == ["2", "1"]
    assert not any(p.exists() for p in leftovers) and not (store.versions_dir / "3").exists()
    assert restarted.recover().describe() == "nothing to recover"


def test_recover_when_the_active_version_is_gone_and_nothing_else_is_stored(tmp_path: Path, key: KeyPair) -> None:
    store = ModelStore(tmp_path / "models", key.trusted)
    (tmp_path / "models" / "active").write_text("7.0\n")
    report = store.recover()
    assert (report.active_before, report.active_after) == ("7.0", None)
    assert "now none (no complete version is stored)" in report.describe()
    assert store.active() is None and not (tmp_path / "models" / "active").exists()


def test_an_incomplete_version_is_invisible_and_can_be_added_again(tmp_path: Path, key: KeyPair,
                                                                   make_bundle: BundleFactory) -> None:
    store = ModelStore(tmp_path / "models", key.trusted)
    path, _ = make_bundle(version="1")
    store.add(path)
    (store.versions_dir / "1" / MARKER).unlink()
    assert store.versions() == []
    info = store.add(path)  # no recover() in between: add replaces the half-written directory
    assert info.version == "1" and (store.versions_dir / "1" / MARKER).is_file()


def test_concurrent_adds_from_threads(tmp_path: Path, key: KeyPair, make_bundle: BundleFactory) -> None:
    store = ModelStore(tmp_path / "models", key.trusted, keep=20)
    distinct = [make_bundle(version=f"{i}.0")[0] for i in range(6)]
    same = make_bundle(version="shared")[0]
    start = threading.Barrier(10)

    def add(path: Path) -> str:
        start.wait()
        return store.add(path).version

    with ThreadPoolExecutor(10) as pool:
        added = list(pool.map(add, [*distinct, same, same, same, same]))
    assert sorted(added) == sorted([f"{i}.0" for i in range(6)] + ["shared"] * 4)
    infos = store.versions()
    assert sorted(i.version for i in infos) == sorted([f"{i}.0" for i in range(6)] + ["shared"])
    assert sorted(i.sequence for i in infos) == list(range(1, 8))  # each add got its own place in the order
    assert list(store.staging_dir.iterdir()) == []
    for info in infos:
        store.installed(info.version, verify=True)


def test_concurrent_adds_of_one_version_with_different_content(tmp_path: Path, key: KeyPair,
                                                               make_bundle: BundleFactory) -> None:
    store = ModelStore(tmp_path / "models", key.trusted)
    a = make_bundle(version="9", out=tmp_path / "a.vkb", box_thresh=0.6)[0]
    b = make_bundle(version="9", out=tmp_path / "b.vkb", box_thresh=0.7)[0]
    start = threading.Barrier(2)

    def add(path: Path) -> float | Exception:
        start.wait()
        try:
            store.add(path)
        except VersionConflict as exc:
            return exc
        return float(store.installed("9").overrides["box_thresh"])

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(add, [a, b]))
    conflicts = [r for r in results if isinstance(r, VersionConflict)]
    winners = [r for r in results if not isinstance(r, Exception)]
    assert len(conflicts) == 1 and len(winners) == 1
    assert store.installed("9").overrides["box_thresh"] == winners[0]


def test_keep_must_be_positive(tmp_path: Path, key: KeyPair) -> None:
    with pytest.raises(ValueError, match="keep must be at least 1"):
        ModelStore(tmp_path / "models", key.trusted, keep=0)
