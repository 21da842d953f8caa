"""Rewriting real bundles entry by entry with tarfile, to make the archives an attacker or a fault would."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Callable
from pathlib import Path

Entry = tuple[tarfile.TarInfo, bytes | None]


def read_entries(bundle: Path) -> list[Entry]:
    with tarfile.open(bundle, "r:gz") as tar:
        out: list[Entry] = []
        for member in tar.getmembers():
            source = tar.extractfile(member)
            out.append((member, source.read() if source is not None else None))
        return out


def write_entries(path: Path, entries: list[Entry], compresslevel: int = 9) -> Path:
    """`compresslevel` 1 is much faster for bundles of real models (their weights barely compress)."""
    with gzip.open(path, "wb", compresslevel=compresslevel) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def rewrite(bundle: Path, change: Callable[[list[Entry]], list[Entry]]) -> Path:
    """Rewrite `bundle` in place with its entries passed through `change`."""
    return write_entries(bundle, change(read_entries(bundle)))


def regular(name: str, data: bytes) -> Entry:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> Entry:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3  # /dev/null's numbers
    return info, None


def replace_data(entries: list[Entry], name: str, data: bytes) -> list[Entry]:
    out = []
    for info, old in entries:
        if info.name == name:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            old = data
        out.append((info, old))
    return out


def flip_byte(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]
