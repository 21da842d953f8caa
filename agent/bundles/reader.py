"""Reading a bundle archive in one forward pass, refusing each entry that is unsafe or disagrees with the
manifest before a byte of it is used.

A bundle is a gzip-compressed tar (PAX format): `manifest.json` first, then `manifest.sig` when signed, then
exactly the files the manifest lists, each a regular file. The reader streams (tar mode `r|gz`), so it never
seeks and never trusts the archive's own index.
"""

from __future__ import annotations

import hashlib
import tarfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from vkocr.agent.bundles.errors import (
    BundleFormatError,
    BundleTooLarge,
    IntegrityError,
    SignatureError,
    UnsafeEntryError,
)
from vkocr.agent.bundles.manifest import MANIFEST_NAME, SIGNATURE_NAME, FileEntry, Manifest
from vkocr.agent.bundles.paths import check_relative_path

DEFAULT_MAX_BYTES = 1 << 30  # what a bundle may unpack to, and how large its file may be
MAX_MANIFEST_BYTES = 1 << 20
SIGNATURE_BYTES = 64  # a raw ed25519 signature
CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
_REGULAR = (tarfile.REGTYPE, tarfile.AREGTYPE)


def human_size(n: int) -> str:
    """Bytes as an operator reads them in an error message."""
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n} bytes"


def _kind(member: tarfile.TarInfo) -> str | None:
    """What a non-regular entry is, in words; None for a regular file."""
    if member.type in _REGULAR:
        return None
    if member.issym():
        return f"a symbolic link (to {member.linkname!r})"
    if member.islnk():
        return f"a hard link (to {member.linkname!r})"
    if member.ischr() or member.isblk():
        return "a device node"
    if member.isfifo():
        return "a FIFO"
    if member.isdir():
        return "a directory"
    return f"not a regular file (tar type {member.type!r})"


class BundleReader:
    """`with BundleReader(path) as r: raw, sig = r.header(); for entry, data in r.entries(manifest): …`"""

    def __init__(self, path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._file: IO[bytes] | None = None
        self._tar: tarfile.TarFile | None = None
        self._pending: tarfile.TarInfo | None = None

    def __enter__(self) -> Self:
        try:
            size = self.path.stat().st_size
            self._file = self.path.open("rb")
        except FileNotFoundError:
            raise BundleFormatError(f"bundle {self.path} does not exist") from None
        except OSError as exc:
            raise BundleFormatError(f"cannot read bundle {self.path}: {exc.strerror or exc}") from None
        try:
            if size > self.max_bytes:
                raise BundleTooLarge(f"bundle {self.path} is {human_size(size)}, more than the limit of "
                                     f"{human_size(self.max_bytes)}")
            if self._file.read(2) != GZIP_MAGIC:
                raise BundleFormatError(f"{self.path} is not a vkocr bundle (expected a gzip-compressed tar)")
            self._file.seek(0)
            with self._reading():
                self._tar = tarfile.open(fileobj=self._file, mode="r|gz")
        except BaseException:
            self._file.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._tar is not None:
            self._tar.close()
        if self._file is not None:
            self._file.close()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        try:
            yield
        except (tarfile.TarError, EOFError, zlib.error) as exc:
            raise BundleFormatError(f"bundle {self.path} is truncated or corrupt ({exc})") from None

    def _next(self) -> tarfile.TarInfo | None:
        if self._pending is not None:
            member, self._pending = self._pending, None
            return member
        assert self._tar is not None, "use BundleReader as a context manager"
        with self._reading():
            return self._tar.next()

    def _read_small(self, member: tarfile.TarInfo) -> bytes:
        assert self._tar is not None
        with self._reading():
            source = self._tar.extractfile(member)
            assert source is not None
            data = source.read()
        if len(data) != member.size:
            raise BundleFormatError(f"bundle {self.path} is truncated or corrupt ({member.name} is short)")
        return data

    def header(self) -> tuple[bytes, bytes | None]:
        """The manifest's exact bytes and the signature (None when unsigned). Must be called first."""
        first = self._next()
        if first is None:
            raise BundleFormatError(f"bundle {self.path} is an empty archive")
        if first.name != MANIFEST_NAME:
            raise BundleFormatError(f"{self.path} does not start with {MANIFEST_NAME} (first entry is "
                                    f"{first.name!r}): not a vkocr bundle")
        if first.type not in _REGULAR:
            raise UnsafeEntryError(f"entry {MANIFEST_NAME!r} is {_kind(first)}; it must be a regular file")
        if first.size > MAX_MANIFEST_BYTES:
            raise BundleFormatError(f"{MANIFEST_NAME} is {human_size(first.size)}, "
                                    f"more than {human_size(MAX_MANIFEST_BYTES)}")
        raw = self._read_small(first)
        second = self._next()
        if second is None or second.name != SIGNATURE_NAME:
            self._pending = second
            return raw, None
        if second.type not in _REGULAR:
            raise UnsafeEntryError(f"entry {SIGNATURE_NAME!r} is {_kind(second)}; it must be a regular file")
        if second.size != SIGNATURE_BYTES:
            raise SignatureError(f"{SIGNATURE_NAME} must be {SIGNATURE_BYTES} bytes (an ed25519 signature), "
                                 f"it is {second.size}")
        return raw, self._read_small(second)

    def entries(self, manifest: Manifest) -> Iterator[tuple[FileEntry, IO[bytes]]]:
        """Each file entry, checked against the manifest, with a stream of its bytes; read each stream with
        `copy_checked` before asking for the next. Raises when a listed file never came."""
        if manifest.total_size > self.max_bytes:
            raise BundleTooLarge(f"bundle {self.path} unpacks to {human_size(manifest.total_size)}, more than the "
                                 f"limit of {human_size(self.max_bytes)}")
        listed = {f.path: f for f in manifest.files}
        seen: set[str] = set()
        while (member := self._next()) is not None:
            entry = self._check_member(member, listed, seen)
            assert self._tar is not None
            with self._reading():
                source = self._tar.extractfile(member)
            assert source is not None
            yield entry, source
        missing = [path for path in listed if path not in seen]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise IntegrityError(f"file {missing[0]} is listed in the manifest but missing from the bundle{more}")

    def _check_member(self, member: tarfile.TarInfo, listed: dict[str, FileEntry], seen: set[str]) -> FileEntry:
        name = member.name
        problem = check_relative_path(name)
        if problem is not None:
            raise UnsafeEntryError(f"entry {problem}")
        kind = _kind(member)
        if kind is not None:
            raise UnsafeEntryError(f"entry {name!r} is {kind}; a bundle holds regular files only")
        if name in (MANIFEST_NAME, SIGNATURE_NAME):
            raise IntegrityError(f"entry {name!r} is out of place: {MANIFEST_NAME} comes first, then "
                                 f"{SIGNATURE_NAME}, each once")
        if name in seen:
            raise IntegrityError(f"entry {name!r} appears twice")
        entry = listed.get(name)
        if entry is None:
            raise IntegrityError(f"entry {name!r} is not listed in the manifest")
        if member.size != entry.size:
            raise IntegrityError(f"file {name}: size mismatch ({member.size} bytes in the archive, "
                                 f"{entry.size} in the manifest)")
        seen.add(name)
        return entry

    def copy_checked(self, entry: FileEntry, source: IO[bytes], write: Callable[[bytes], object] | None) -> None:
        """Stream one entry to `write` (or nowhere), then check its size and sha256 against the manifest."""
        digest = hashlib.sha256()
        count = 0
        with self._reading():
            while chunk := source.read(CHUNK):
                count += len(chunk)
                digest.update(chunk)
                if write is not None:
                    write(chunk)
        if count != entry.size:
            raise IntegrityError(f"file {entry.path}: size mismatch ({count} bytes read, {entry.size} in the "
                                 "manifest)")
        got = digest.hexdigest()
        if got != entry.sha256:
            raise IntegrityError(f"file {entry.path}: sha256 mismatch (archive {got[:12]}…, manifest "
                                 f"{entry.sha256[:12]}…)")
