"""Key generation, loading, fingerprints and the trusted set, with real ed25519 keys and files."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key

from vkocr.agent.bundles.errors import KeyFileError
from vkocr.agent.bundles.signing import (
    TrustedKeys,
    fingerprint,
    generate_keypair,
    load_private_key,
    load_public_key,
    short_fingerprint,
)


def test_keygen_writes_a_private_key_only_its_owner_can_read(tmp_path: Path) -> None:
    fp = generate_keypair(tmp_path / "keys" / "release.key")
    private, public = tmp_path / "keys" / "release.key", tmp_path / "keys" / "release.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    key = load_private_key(private)
    raw = load_public_key(public).public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert fp == fingerprint(key.public_key()) == hashlib.sha256(raw).hexdigest()
    assert short_fingerprint(fp) == fp[:16] and len(fp) == 64
    signature = key.sign(b"manifest bytes")
    load_public_key(public).verify(signature, b"manifest bytes")
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == ["release.key", "release.pub"]  # no temp files


def test_keygen_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    first = generate_keypair(tmp_path / "a.key")
    with pytest.raises(KeyFileError, match=r"a\.key already exists; remove it or pass --force"):
        generate_keypair(tmp_path / "a.key")
    assert fingerprint(load_private_key(tmp_path / "a.key").public_key()) == first
    second = generate_keypair(tmp_path / "a.key", overwrite=True)
    assert second != first


def test_two_keys_have_different_fingerprints(tmp_path: Path) -> None:
    assert generate_keypair(tmp_path / "a.key") != generate_keypair(tmp_path / "b.key")


def test_trusted_set_from_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "ring").mkdir()
    a = generate_keypair(tmp_path / "ring" / "a.key")
    b = generate_keypair(tmp_path / "ring" / "b.key")
    c = generate_keypair(tmp_path / "c.key")
    (tmp_path / "ring" / "README.txt").write_text("*.pub files here are trusted\n")
    trusted = TrustedKeys.from_paths([tmp_path / "ring", tmp_path / "c.pub"])
    assert set(trusted) == {a, b, c}  # private keys and other files in the directory are not taken
    message = b"what was signed"
    assert trusted.find_signer(message, load_private_key(tmp_path / "ring" / "b.key").sign(message)) == b
    assert trusted.find_signer(message + b"!", load_private_key(tmp_path / "ring" / "b.key").sign(message)) is None
    assert TrustedKeys.from_paths([tmp_path / "c.pub"]).describe() == c[:16]


def test_a_named_key_that_is_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match=r"public key file .*nope\.pub does not exist"):
        TrustedKeys.from_paths([tmp_path / "nope.pub"])


def test_files_that_are_not_ed25519_keys(tmp_path: Path) -> None:
    generate_keypair(tmp_path / "k.key")
    with pytest.raises(KeyFileError, match="is not a PEM public key"):
        load_public_key(tmp_path / "k.key")
    with pytest.raises(KeyFileError, match="is not an unencrypted PEM private key"):
        load_private_key(tmp_path / "k.pub")
    ec = generate_private_key(SECP256R1())
    (tmp_path / "ec.pub").write_bytes(ec.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(KeyFileError, match="not an ed25519 public key"):
        load_public_key(tmp_path / "ec.pub")
