"""`keep` prunes what was active once, never an operator's staged bundle (one uploaded and not yet activated),
unless the operator asks for it and it is older than the kept versions."""

from __future__ import annotations

from pathlib import Path

from tests.agent.bundles.conftest import BundleFactory, KeyPair
from vkocr.agent.bundles.store import ModelStore


def test_adding_never_prunes_a_staged_version(tmp_path: Path, key: KeyPair, make_bundle: BundleFactory) -> None:
    store = ModelStore(tmp_path / "models", key.trusted, keep=2)
    store.add(make_bundle(version="1")[0])
    store.set_active("1")
    store.add(make_bundle(version="2")[0])  # staged by an operator, never activated
    for v in ("3", "4", "5"):
        store.add(make_bundle(version=v)[0])
        store.set_active(v)
    store.add(make_bundle(version="6")[0])  # the next upload prunes what was active once, beyond keep
    assert [i.version for i in store.versions()] == ["6", "5", "4", "2"]  # 5 active, 4 the rollback target
    assert store.activated() == ["4", "5"]  # 1 and 3 were active once, and pruned
    # re-opened (the agent restarted), the store still knows which versions were active
    reopened = ModelStore(tmp_path / "models", key.trusted, keep=2)
    assert reopened.prune() == []
    # asked for, a staged version older than the kept ones goes
    assert reopened.prune(never_activated=True) == ["2"]
    assert [i.version for i in reopened.versions()] == ["6", "5", "4"]


def test_a_store_without_the_activated_list_counts_its_history(tmp_path: Path, key: KeyPair,
                                                               make_bundle: BundleFactory) -> None:
    store = ModelStore(tmp_path / "models", key.trusted, keep=1)
    for v in ("1", "2"):
        store.add(make_bundle(version=v)[0])
        store.set_active(v)
    (store.root / "activated").unlink()  # as a store written before the list was kept
    assert store.activated() == ["1", "2"]
    store.add(make_bundle(version="3")[0])
    store.set_active("3")  # 1 was active once and is beyond keep: pruned at the next add
    store.add(make_bundle(version="4")[0])
    assert [i.version for i in store.versions()] == ["4", "3", "2"]
