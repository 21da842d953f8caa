"""Ed25519 keys for signing model bundles: generation, loading, fingerprints and the set of trusted keys.

Private keys are unencrypted PKCS#8 PEM files of mode 0600; public keys are SubjectPublicKeyInfo PEM files
(`*.pub`). A key is named by its fingerprint: the sha256 of the 32 raw public-key bytes, in hex; the short
form (the first 16 hex digits) is what people read and type.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from vkocr.agent.bundles.atomic_files import write_atomic
from vkocr.agent.bundles.errors import KeyFileError
from vkocr.log import get_logger

log = get_logger(__name__)

PUBLIC_KEY_SUFFIX = ".pub"
SHORT_FINGERPRINT = 16


def fingerprint(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def short_fingerprint(full: str) -> str:
    return full[:SHORT_FINGERPRINT]


def public_key_path_for(private_path: Path) -> Path:
    """Where keygen puts the public half by default: dev.key → dev.pub."""
    return Path(private_path).with_suffix(PUBLIC_KEY_SUFFIX)


def generate_keypair(private_path: Path, public_path: Path | None = None, *, overwrite: bool = False) -> str:
    """Write a new key pair (private file mode 0600) and return its fingerprint. Existing files are refused
    unless `overwrite`, since replacing a signing key strands every agent that trusts the old one."""
    private_path = Path(private_path)
    public_path = Path(public_path) if public_path else public_key_path_for(private_path)
    if private_path.resolve() == public_path.resolve():
        raise KeyFileError(f"the private and public key paths are the same file: {private_path}")
    for path in (private_path, public_path):
        if path.exists() and not overwrite:
            raise KeyFileError(f"{path} already exists; remove it or pass --force to replace it")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    for path in (private_path, public_path):
        path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(private_path, private_pem, mode=0o600)
    write_atomic(public_path, public_pem(key.public_key()), mode=0o644)
    fp = fingerprint(key.public_key())
    log.info("key_generated", private=str(private_path), public=str(public_path), fingerprint=fp)
    return fp


def public_pem(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _read_key_file(path: Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise KeyFileError(f"{what} key file {path} does not exist") from None
    except OSError as exc:
        raise KeyFileError(f"cannot read {what} key file {path}: {exc.strerror or exc}") from None


def load_private_key(path: Path) -> Ed25519PrivateKey:
    data = _read_key_file(path, "private")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path} is not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path} holds a {type(key).__name__}, not an ed25519 private key")
    if os.stat(path).st_mode & 0o077:
        log.warning("private_key_readable_by_others", path=str(path), advice="chmod 600 it")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    data = _read_key_file(path, "public")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path} is not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path} holds a {type(key).__name__}, not an ed25519 public key")
    return key


class TrustedKeys(Mapping[str, Ed25519PublicKey]):
    """The public keys whose signatures an agent accepts, by fingerprint."""

    def __init__(self, keys: Iterable[Ed25519PublicKey] = ()) -> None:
        self._keys = {fingerprint(k): k for k in keys}

    @classmethod
    def from_paths(cls, paths: Iterable[Path]) -> TrustedKeys:
        """Load each file, and every `*.pub` file in each directory. A named path that does not exist, or a
        file that is not an ed25519 public key, is an error: a typo here would silently trust nothing."""
        keys: list[Ed25519PublicKey] = []
        for path in map(Path, paths):
            if path.is_dir():
                keys.extend(load_public_key(p) for p in sorted(path.glob(f"*{PUBLIC_KEY_SUFFIX}")))
            else:
                keys.append(load_public_key(path))
        return cls(keys)

    def find_signer(self, message: bytes, signature: bytes) -> str | None:
        """The fingerprint of the trusted key that made `signature` over `message`, or None."""
        for fp, key in self._keys.items():
            try:
                key.verify(signature, message)
            except InvalidSignature:
                continue
            return fp
        return None

    def __getitem__(self, fp: str) -> Ed25519PublicKey:
        return self._keys[fp]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def describe(self) -> str:
        return ", ".join(short_fingerprint(fp) for fp in self._keys) or "none"
