"""create → sign → verify → inspect → extract, on real files, keys and archives."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from tests.agent.bundles.conftest import BundleFactory, KeyPair
from vkocr.agent.bundles import bundle
from vkocr.agent.bundles.errors import BundleError, BundleFormatError, SignatureError
from vkocr.agent.bundles.manifest import MANIFEST_NAME, SIGNATURE_NAME
from vkocr.agent.ocr.model_files import sha256_of
from vkocr.agent.ocr.options import OcrOptions


def test_unsigned_then_signed_round_trip(make_bundle: BundleFactory, key: KeyPair, models: dict[str, Path],
                                         selftest_image: Path, tmp_path: Path) -> None:
    path, created = make_bundle(signer=None)
    assert created.signer is None
    with pytest.raises(SignatureError, match="is not signed"):
        bundle.verify(path, key.trusted)

    signed = bundle.sign(path, key.private)
    assert signed.signer == key.fingerprint
    manifest = bundle.verify(path, key.trusted)
    assert manifest == signed
    assert manifest.created == created.created  # signing does not change what or when
    assert manifest.content_digest() == created.content_digest()

    out = bundle.extract(path, tmp_path / "out", manifest)
    for role, source in models.items():
        stored = out / manifest.models[role]
        assert stored.read_bytes() == source.read_bytes()
        assert manifest.file(manifest.models[role]).sha256 == sha256_of(source)
    assert (out / "selftest" / "label.png").read_bytes() == selftest_image.read_bytes()
    assert (out / MANIFEST_NAME).read_bytes() == manifest.raw
    key.private.public_key().verify((out / SIGNATURE_NAME).read_bytes(), manifest.raw)
    assert sorted(p.name for p in (tmp_path).iterdir() if p.name.startswith(".")) == []  # no temp dirs left


def test_archive_layout_manifest_first_then_signature(make_bundle: BundleFactory) -> None:
    path, manifest = make_bundle()
    with tarfile.open(path, "r:gz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == [MANIFEST_NAME, SIGNATURE_NAME, *(f.path for f in manifest.files)]
    assert all(m.isreg() and m.mode == 0o644 and m.uid == 0 for m in members)
    assert path.read_bytes()[:2] == b"\x1f\x8b"


def test_manifest_carries_roles_options_and_self_tests(make_bundle: BundleFactory, models: dict[str, Path]) -> None:
    path, _ = make_bundle(box_thresh=0.6, limit_side_len=960, use_dilation=False, plugins=["merge_lines"])
    report = bundle.inspect(path)
    assert report["preprocess"] == {"limit_side_len": 960}
    assert report["postprocess"] == {"box_thresh": 0.6, "plugins": ["merge_lines"], "use_dilation": False}
    assert report["models"] == {role: p.name for role, p in models.items()}
    assert {f["role"] for f in report["files"]} == {"det", "cls", "rec", "selftest-image"}
    assert report["self_tests"] == [{"image": "selftest/label.png", "expect": "LOT 42"}]
    assert report["signed"] is True and report["bundle_sha256"] == sha256_of(path)
    options = bundle.read_manifest(path).ocr_options()
    assert options == OcrOptions().replace(box_thresh=0.6, limit_side_len=960, use_dilation=False,
                                           plugins=("merge_lines",))
    assert json.loads(json.dumps(report)) == report


def test_sign_replaces_a_signature_and_keeps_files(make_bundle: BundleFactory, key: KeyPair,
                                                   other_key: KeyPair) -> None:
    path, _ = make_bundle()
    bundle.sign(path, other_key.private)
    assert bundle.verify(path, other_key.trusted).signer == other_key.fingerprint
    with pytest.raises(SignatureError, match="not trusted"):
        bundle.verify(path, key.trusted)


@pytest.mark.parametrize("options, reason", [
    ({"box_tresh": 0.6}, "unknown option 'box_tresh'"),
    ({"box_thresh": 1.5}, "box_thresh must be within"),
    ({"use_dilation": "yes"}, "use_dilation must be bool"),
])
def test_bad_options_are_refused_before_writing(make_bundle: BundleFactory, tmp_path: Path,
                                                options: dict[str, object], reason: str) -> None:
    out = tmp_path / "bundles" / "bad.vkb"
    with pytest.raises(BundleFormatError, match=reason):
        make_bundle(out=out, **options)
    assert not out.exists() and not list(out.parent.glob(".*"))


@pytest.mark.parametrize("version", ["../up", "a/b", ".hidden", "", "x" * 200])
def test_versions_that_cannot_name_a_directory_are_refused(make_bundle: BundleFactory, version: str) -> None:
    with pytest.raises(BundleFormatError, match="version"):
        make_bundle(version=version)


def test_a_missing_model_file_is_named(make_bundle: BundleFactory, models: dict[str, Path]) -> None:
    with pytest.raises(BundleError, match=r"rec file .*nope\.onnx does not exist"):
        make_bundle(model_files={**models, "rec": models["rec"].parent / "nope.onnx"})


def test_extract_refuses_an_existing_destination(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path) -> None:
    path, _ = make_bundle()
    manifest = bundle.verify(path, key.trusted)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("operator's file")
    with pytest.raises(BundleError, match="already exists"):
        bundle.extract(path, tmp_path / "out", manifest)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]
