"""Writing files so that a crash leaves either the old content or the new, never half of either.

The recipe: write a temp file in the same directory (so the rename stays on one filesystem), fsync it,
`os.replace` it over the target, then fsync the directory so the rename itself is on disk.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"  # every temp name ends so, and starts with '.', so leftovers are easy to find and clean


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (a rename, a new or removed file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_output(path: Path, mode: int = 0o644) -> Iterator[BinaryIO]:
    """A binary file to write that appears at `path` only when the block ends without an exception."""
    path = Path(path)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` atomically and durably."""
    with atomic_output(path, mode) as f:
        f.write(data)
