"""The set-up step scripts/make_dev_bundle.py: key, signed bundle of the default model set (files and procedure),
seeded store; idempotent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.paths import COMPAT, ROOT
from vkocr.agent.bundles.bundle import verify
from vkocr.agent.bundles.signing import TrustedKeys
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.ocr.model_files import DEFAULT_SET, missing_or_bad

pytestmark = pytest.mark.skipif(bool(missing_or_bad()), reason="the default models are not in models/")


def load_script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("make_dev_bundle", ROOT / "scripts" / "make_dev_bundle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dev_bundle_with_a_rendered_self_test_is_idempotent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = load_script()
    args = ["--state", str(tmp_path / "state"), "--compat", str(tmp_path / "no-compat")]
    assert script.main(args) == 0
    first = capsys.readouterr().out
    assert "new development key" in first and "self-test is a rendered 'HELLO'" in first and "activated" in first
    [bundle] = (tmp_path / "state" / "bundles").glob(f"{DEFAULT_SET.name}-default-*.vkb")
    trusted = TrustedKeys.from_paths([tmp_path / "state" / "keys" / "dev.pub"])
    manifest = verify(bundle, trusted)
    assert [t.expect for t in manifest.self_tests] == ["HELLO"]
    assert manifest.ocr_options().procedure == DEFAULT_SET.procedure  # served as the set is read
    assert manifest.version.startswith("dev-" + DEFAULT_SET.wheel.partition("==")[2] + "-")
    store = ModelStore(tmp_path / "state" / "models", trusted)
    assert store.active() == manifest.version
    [case] = store.installed(manifest.version).self_tests
    assert case.image.stat().st_size > 500  # a real PNG, not a placeholder
    stamp = bundle.stat().st_mtime_ns

    assert script.main(args) == 0
    second = capsys.readouterr().out
    assert "present and verified" in second and "already stored" in second and "left as it is" in second
    assert bundle.stat().st_mtime_ns == stamp and len(store.versions()) == 1


@pytest.mark.compat
def test_dev_bundle_carries_rapidocr_s_image_when_present(tmp_path: Path) -> None:
    script = load_script()
    assert script.main(["--state", str(tmp_path / "state"), "--compat", str(COMPAT)]) == 0
    [bundle] = (tmp_path / "state" / "bundles").glob("*.vkb")
    manifest = verify(bundle, TrustedKeys.from_paths([tmp_path / "state" / "keys"]))
    assert [(t.image, t.expect) for t in manifest.self_tests] == [("selftest/issue_170.png", "TEST")]
    image = manifest.file("selftest/issue_170.png")
    assert image.size == (COMPAT / "images" / "issue_170.png").stat().st_size


def test_the_deploy_guides_bundle_is_newer_than_the_dev_bundle(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """deploy/README.md's example (`--name labels --version 2.3.0`) activates on a fresh set-up's store: the
    development bundle's version is no release, so it sorts before every one."""
    from vkocr.agent.cli.main import main

    state = tmp_path / "state"
    assert load_script().main(["--state", str(state), "--compat", str(tmp_path / "no-compat")]) == 0
    bundle = tmp_path / "labels-2.3.0.vkb"
    assert main(["bundle", "create", "--default-models", "--name", "labels", "--version", "2.3.0",
                 "--option", "box_thresh=0.6", "--key", str(state / "keys" / "dev.key"), "-o", str(bundle)]) == 0
    store = ModelStore(state / "models", TrustedKeys.from_paths([state / "keys" / "dev.pub"]))
    store.add(bundle)
    assert store.set_active("2.3.0") == store.previous()[0]  # no DowngradeRefused: the dev bundle was older
    assert "2.3.0" in (ROOT / "deploy" / "README.md").read_text()
    capsys.readouterr()
