"""Every way a bundle can be damaged or forged is refused with its own reason, and nothing is left on disk:
not by extract(), not by the model store."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agent.bundles import craft
from tests.agent.bundles.conftest import BundleFactory, KeyPair
from vkocr.agent.bundles import bundle
from vkocr.agent.bundles.errors import (
    BundleError,
    BundleFormatError,
    BundleTooLarge,
    IntegrityError,
    SignatureError,
    UnsafeEntryError,
)
from vkocr.agent.bundles.manifest import MANIFEST_NAME
from vkocr.agent.bundles.store import ModelStore

Change = Callable[[list[craft.Entry]], list[craft.Entry]]


def assert_refused_everywhere(path: Path, key: KeyPair, tmp_path: Path, error: type[BundleError],
                              reason: str) -> None:
    """verify(), extract() and ModelStore.add() all refuse, with `reason`, leaving nothing behind."""
    with pytest.raises(error, match=reason):
        bundle.verify(path, key.trusted)
    landing = tmp_path / "landing"
    landing.mkdir()
    if error is not SignatureError:  # extract() trusts the manifest it is given; the signature is verify()'s job
        with pytest.raises(error, match=reason):
            bundle.extract(path, landing / "out", bundle.read_manifest(path))
    assert list(landing.iterdir()) == []
    store = ModelStore(tmp_path / "store", key.trusted)
    with pytest.raises(error, match=reason):
        store.add(path)
    assert store.versions() == [] and store.active() is None
    assert list(store.versions_dir.iterdir()) == [] and list(store.staging_dir.iterdir()) == []


def test_one_byte_changed_in_a_model_file(make_bundle: BundleFactory, key: KeyPair, models: dict[str, Path],
                                          tmp_path: Path) -> None:
    path, _ = make_bundle()
    det = models["det"].read_bytes()
    craft.rewrite(path, lambda entries: craft.replace_data(entries, "det.onnx", craft.flip_byte(det, len(det) // 2)))
    assert_refused_everywhere(path, key, tmp_path, IntegrityError, r"file det\.onnx: sha256 mismatch")


def test_one_byte_changed_in_the_manifest(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path) -> None:
    path, manifest = make_bundle(version="1.0.0")
    forged = manifest.raw.replace(b'"version": "1.0.0"', b'"version": "1.0.1"')
    assert len(forged) == len(manifest.raw) and forged != manifest.raw
    craft.rewrite(path, lambda entries: craft.replace_data(entries, MANIFEST_NAME, forged))
    assert_refused_everywhere(path, key, tmp_path, SignatureError,
                              "manifest signature does not verify with any trusted key")


def test_signed_by_a_key_that_is_not_trusted(make_bundle: BundleFactory, key: KeyPair, other_key: KeyPair,
                                             tmp_path: Path) -> None:
    path, _ = make_bundle(signer=other_key)
    assert_refused_everywhere(path, key, tmp_path, SignatureError,
                              f"signed by key {other_key.fingerprint[:16]}, which is not trusted")


def test_unsigned(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path) -> None:
    path, _ = make_bundle(signer=None)
    assert_refused_everywhere(path, key, tmp_path, SignatureError, "is not signed")


def test_signature_moved_to_another_manifest(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path) -> None:
    """A genuine signature of version 1 attached to version 2's (unsigned) manifest."""
    one, _ = make_bundle(version="1")
    two, _ = make_bundle(version="2", signer=None)
    signature = [e for e in craft.read_entries(one) if e[0].name == "manifest.sig"]
    craft.rewrite(two, lambda entries: entries[:1] + signature + entries[1:])
    assert_refused_everywhere(two, key, tmp_path, SignatureError, "signature does not verify")


MISMATCHES: list[tuple[str, Change, str]] = [
    ("extra file", lambda e: [*e, craft.regular("extra.bin", b"not in the manifest")],
     r"entry 'extra\.bin' is not listed in the manifest"),
    ("missing file", lambda e: [x for x in e if x[0].name != "cls.onnx"],
     r"file cls\.onnx is listed in the manifest but missing from the bundle"),
    ("size mismatch", lambda e: [(i, d) if i.name != "rec.onnx" else craft.regular("rec.onnx", (d or b"") + b"!")
                                 for i, d in e],
     r"file rec\.onnx: size mismatch \(41001 bytes in the archive, 41000 in the manifest\)"),
    ("entry twice", lambda e: [*e, e[2]], r"entry 'det\.onnx' appears twice"),
    ("manifest twice", lambda e: [*e, e[0]], r"entry 'manifest\.json' is out of place"),
]


@pytest.mark.parametrize("change, reason", [m[1:] for m in MISMATCHES], ids=[m[0] for m in MISMATCHES])
def test_archive_and_manifest_disagree(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path,
                                       change: Change, reason: str) -> None:
    path, _ = make_bundle()
    craft.rewrite(path, change)
    assert_refused_everywhere(path, key, tmp_path, IntegrityError, reason)


def test_dot_dot_entry(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path) -> None:
    path, _ = make_bundle()
    craft.rewrite(path, lambda e: e[:2] + [craft.regular("../escaped.txt", b"owned")] + e[2:])
    assert_refused_everywhere(path, key, tmp_path, UnsafeEntryError, r"entry '\.\./escaped\.txt' escapes the bundle")
    assert not any(p.name == "escaped.txt" for p in tmp_path.rglob("*"))


def test_nested_dot_dot_entry(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path) -> None:
    path, _ = make_bundle()
    craft.rewrite(path, lambda e: [*e, craft.regular("selftest/../../x", b"owned")])
    assert_refused_everywhere(path, key, tmp_path, UnsafeEntryError, r"'selftest/\.\./\.\./x' escapes the bundle")


def test_absolute_path_entry(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path) -> None:
    target = tmp_path / "absolute.txt"
    path, _ = make_bundle()
    craft.rewrite(path, lambda e: e[:2] + [craft.regular(str(target), b"owned")] + e[2:])
    assert_refused_everywhere(path, key, tmp_path, UnsafeEntryError, f"entry '{target}' is an absolute path")
    assert not target.exists()


SPECIALS = [
    ("symlink", tarfile.SYMTYPE, "/etc/passwd", r"entry 'det\.onnx' is a symbolic link \(to '/etc/passwd'\)"),
    ("hard link", tarfile.LNKTYPE, "cls.onnx", r"entry 'det\.onnx' is a hard link \(to 'cls\.onnx'\)"),
    ("character device", tarfile.CHRTYPE, "", r"entry 'det\.onnx' is a device node"),
    ("block device", tarfile.BLKTYPE, "", r"entry 'det\.onnx' is a device node"),
    ("fifo", tarfile.FIFOTYPE, "", r"entry 'det\.onnx' is a FIFO"),
    ("directory", tarfile.DIRTYPE, "", r"entry 'det\.onnx' is a directory"),
]


@pytest.mark.parametrize("kind, linkname, reason", [s[1:] for s in SPECIALS], ids=[s[0] for s in SPECIALS])
def test_entries_that_are_not_regular_files(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path,
                                            kind: bytes, linkname: str, reason: str) -> None:
    """The entry takes the place of a listed model file, so only its type is wrong."""
    path, _ = make_bundle()
    craft.rewrite(path, lambda e: [craft.special("det.onnx", kind, linkname) if i.name == "det.onnx" else (i, d)
                                   for i, d in e])
    assert_refused_everywhere(path, key, tmp_path, UnsafeEntryError, reason + "; a bundle holds regular files only")


def test_bundle_unpacking_beyond_the_limit(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path) -> None:
    """Compressible content: a small file that would unpack large (the shape of a decompression bomb)."""
    block = os.urandom(1000)
    big = {role: tmp_path / f"{role}-big.onnx" for role in ("det", "cls", "rec")}
    for p in big.values():
        p.write_bytes(block * 300)
    path, manifest = make_bundle(model_files=big)
    assert path.stat().st_size < 100_000 < manifest.total_size
    limit = 200_000
    with pytest.raises(BundleTooLarge, match=f"unpacks to {manifest.total_size} bytes, more than the limit of "
                       f"{limit} bytes"):
        bundle.verify(path, key.trusted, max_bytes=limit)
    with pytest.raises(BundleTooLarge, match="unpacks to"):
        bundle.extract(path, tmp_path / "landing" / "out", manifest, max_bytes=limit)
    assert not (tmp_path / "landing").exists() or list((tmp_path / "landing").iterdir()) == []
    store = ModelStore(tmp_path / "store", key.trusted, max_bundle_bytes=limit)
    with pytest.raises(BundleTooLarge):
        store.add(path)
    assert store.versions() == [] and list(store.staging_dir.iterdir()) == []


def test_bundle_file_beyond_the_limit(make_bundle: BundleFactory, key: KeyPair) -> None:
    path, _ = make_bundle()
    size = path.stat().st_size
    with pytest.raises(BundleTooLarge, match=f"is {size} bytes, more than the limit of {size - 1} bytes"):
        bundle.verify(path, key.trusted, max_bytes=size - 1)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_truncated_archive(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path, keep: float) -> None:
    path, _ = make_bundle()
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])
    assert_refused_everywhere(path, key, tmp_path, BundleFormatError, "is truncated or corrupt")


def test_corrupt_compressed_stream(make_bundle: BundleFactory, key: KeyPair, tmp_path: Path) -> None:
    path, _ = make_bundle()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(BundleError):  # either the deflate stream or a sha256 catches it; which depends on the byte
        bundle.verify(path, key.trusted)


def test_not_a_bundle(key: KeyPair, tmp_path: Path) -> None:
    text = tmp_path / "notes.vkb"
    text.write_text("these are not models\n" * 10)
    assert_refused_everywhere(text, key, tmp_path, BundleFormatError, "is not a vkocr bundle")


def test_a_tar_that_does_not_start_with_the_manifest(key: KeyPair, tmp_path: Path) -> None:
    path = craft.write_entries(tmp_path / "plain.vkb", [craft.regular("det.onnx", os.urandom(100))])
    assert_refused_everywhere(path, key, tmp_path, BundleFormatError,
                              r"does not start with manifest\.json \(first entry is 'det\.onnx'\)")


def test_a_missing_bundle_file_is_named(key: KeyPair, tmp_path: Path) -> None:
    with pytest.raises(BundleFormatError, match=r"bundle .*gone\.vkb does not exist"):
        bundle.verify(tmp_path / "gone.vkb", key.trusted)
