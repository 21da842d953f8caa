"""Bundle uploads in progress: bytes received so far, kept on disk so a broken upload resumes where it stopped.

    <store>/uploads/<upload_id>.json   what the client announced: total size and sha256 (written first)
    <store>/uploads/<upload_id>.part   the bytes received, in order; its length is what UploadStatus reports

Each chunk must start exactly where the bytes held end; the announced size is checked against the limit before
a byte is written; when the last byte is in, the whole file's sha256 must match the announced one. The
finished file then goes to ModelStore.add() (signature, manifest, safe extraction) and is removed here.
Uploads nobody finished are removed after STALE_AFTER_S; a stream that goes idle for [models] upload_idle_s,
or sends less than upload_min_bytes_per_s, is cut (idle_bounded) and its bytes removed. A disk that is full or
refuses a write (StorageFull, StorageUnavailable) never leaves half a chunk: the part file is cut back to the
last whole chunk.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from vkocr.agent.bundles.atomic_files import TEMP_SUFFIX, write_atomic
from vkocr.agent.bundles.disk_errors import disk_error
from vkocr.agent.bundles.errors import (  # the upload errors live with the other bundle errors
    BundleTooLarge,
    ChecksumMismatch,
    OffsetMismatch,
    UploadBusy,
    UploadIdle,
    UploadIncomplete,
    UploadMismatch,
    UploadRequestError,
)
from vkocr.agent.bundles.reader import human_size
from vkocr.agent.ocr.model_files import sha256_of
from vkocr.log import get_logger

log = get_logger(__name__)

T = TypeVar("T")

UPLOAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
STALE_AFTER_S = 7 * 24 * 3600.0


@dataclass(frozen=True)
class UploadHeader:
    upload_id: str
    total_size: int
    sha256: str


class Upload:
    """One upload being written by one stream: append() chunks in order, then close()."""

    def __init__(self, area: UploadArea, header: UploadHeader, out: IO[bytes], received: int) -> None:
        self.area = area
        self.header = header
        self._out = out
        self.received = received
        self._writing = threading.Lock()  # append() and close() never overlap, whatever thread calls them
        self._closed = False

    @property
    def upload_id(self) -> str:
        return self.header.upload_id

    @property
    def complete(self) -> bool:
        return self.received == self.header.total_size

    def append(self, offset: int, data: bytes) -> None:
        if offset != self.received:
            raise OffsetMismatch(f"upload {self.upload_id}: chunk starts at offset {offset} but the agent holds "
                                 f"{self.received} bytes; resume from offset {self.received} (UploadStatus "
                                 "says the same)", self.received)
        end = offset + len(data)
        if end > self.header.total_size:
            raise OffsetMismatch(f"upload {self.upload_id}: chunk ends at byte {end}, past the announced "
                                 f"total_size {self.header.total_size}", self.received)
        with self._writing:
            if self._closed:
                raise UploadRequestError(f"upload {self.upload_id}: its stream has ended; resume from offset "
                                         f"{self.received} in a new stream")
            try:
                view = memoryview(data)
                while view:  # unbuffered: a short write is retried, a failed one raises
                    view = view[self._out.write(view):]
            except OSError as exc:
                self._out.truncate(self.received)  # no half chunk stays: a resumed upload trusts the length
                raise disk_error(exc, f"upload {self.upload_id}: writing bytes {offset} to {end}") from exc
            self.received = end

    def close(self) -> None:
        """Make the bytes received durable (a resumed upload trusts the file's length) and release the id.
        Blocking (fsync), and waits for an append in progress: call it from a thread, after the last append.
        Closing again does nothing."""
        with self._writing:
            if self._closed:
                return
            self._closed = True
            try:
                os.fsync(self._out.fileno())
            finally:
                self._out.close()
                self.area._release(self.upload_id)


class UploadArea:
    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.root.mkdir(mode=0o750, parents=True, exist_ok=True)
        self._busy: set[str] = set()
        self._lock = threading.Lock()

    def _paths(self, upload_id: str) -> tuple[Path, Path]:
        if not UPLOAD_ID.match(upload_id):
            raise UploadRequestError(f"upload_id {upload_id!r} must be 1 to 128 letters, digits and . _ - "
                                     "(starting with a letter or digit)")
        return self.root / f"{upload_id}.json", self.root / f"{upload_id}.part"

    def _header(self, upload_id: str) -> UploadHeader | None:
        header_path, _ = self._paths(upload_id)
        try:
            doc = json.loads(header_path.read_bytes())
            return UploadHeader(upload_id, int(doc["total_size"]), str(doc["sha256"]))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            log.warning("upload_header_unreadable", upload_id=upload_id)
            self.discard(upload_id)
            return None

    def status(self, upload_id: str) -> tuple[int, int]:
        """(bytes held, announced total size); (0, 0) for an upload the agent does not hold."""
        header = self._header(upload_id)
        if header is None:
            return 0, 0
        _, part = self._paths(upload_id)
        try:
            return part.stat().st_size, header.total_size
        except FileNotFoundError:
            return 0, header.total_size

    def open(self, upload_id: str, total_size: int, sha256: str) -> Upload:
        """Start `upload_id`, or resume it (total_size and sha256 may then be left 0/empty, or must match)."""
        header_path, part = self._paths(upload_id)
        with self._lock:
            if upload_id in self._busy:
                raise UploadBusy(f"upload {upload_id} is being written by another stream right now; wait for it "
                                 "to end, or use another upload_id")
            self._busy.add(upload_id)
        try:
            header = self._header(upload_id)
            if header is None:
                header = self._start(upload_id, total_size, sha256, header_path)
            elif (total_size and total_size != header.total_size) or (sha256 and sha256 != header.sha256):
                raise UploadMismatch(
                    f"upload {upload_id} was started for a bundle of {header.total_size} bytes with sha256 "
                    f"{header.sha256[:12]}…, not {total_size} bytes with sha256 {sha256[:12]}…; use a new "
                    "upload_id for another bundle")
            out = part.open("ab", buffering=0)
            received = out.tell()
            if received > header.total_size:  # cannot happen through append(); a damaged file: start over
                out.truncate(0)
                received = 0
            log.info("upload_opened", upload_id=upload_id, received=received, total_size=header.total_size)
            return Upload(self, header, out, received)
        except OSError as exc:  # the header or the part file: the agent's disk refused
            self._release(upload_id)
            raise disk_error(exc, f"upload {upload_id}: opening it") from exc
        except BaseException:
            self._release(upload_id)
            raise

    def _start(self, upload_id: str, total_size: int, sha256: str, header_path: Path) -> UploadHeader:
        if total_size <= 0 or not SHA256_HEX.match(sha256):
            raise UploadRequestError(f"upload {upload_id} is new: its first chunk must carry total_size (> 0) "
                                     "and sha256 (64 lowercase hex digits) of the whole bundle")
        if total_size > self.max_bytes:
            raise BundleTooLarge(f"bundle of {human_size(total_size)} is larger than this agent accepts "
                                 f"({human_size(self.max_bytes)}, [models] max_bundle_bytes); nothing was written")
        header = UploadHeader(upload_id, total_size, sha256)
        self._paths(upload_id)[1].unlink(missing_ok=True)  # bytes without a header are no upload's
        write_atomic(header_path, json.dumps({"total_size": total_size, "sha256": sha256,
                                              "started": time.time()}).encode())
        return header

    def finish(self, upload: Upload) -> Path:
        """The complete, checksum-verified file (still in the upload area: discard() it once stored)."""
        header = upload.header
        if not upload.complete:
            raise UploadIncomplete(f"upload {header.upload_id} is incomplete: {upload.received} of "
                                   f"{header.total_size} bytes received; send the rest from offset "
                                   f"{upload.received}")
        _, part = self._paths(header.upload_id)
        digest = sha256_of(part)
        if digest != header.sha256:
            self.discard(header.upload_id)
            raise ChecksumMismatch(f"upload {header.upload_id}: the {header.total_size} bytes received have "
                                   f"sha256 {digest[:12]}…, not the announced {header.sha256[:12]}…: the bundle "
                                   "was damaged on the way; upload it again")
        return part

    def discard(self, upload_id: str) -> None:
        for path in self._paths(upload_id):
            path.unlink(missing_ok=True)

    def clean_stale(self, max_age_s: float = STALE_AFTER_S) -> list[str]:
        """At start: remove uploads untouched for `max_age_s` (their ids) and half-written headers."""
        removed = []
        now = time.time()
        for path in self.root.iterdir():
            if path.name.startswith(".") and path.name.endswith(TEMP_SUFFIX):
                path.unlink(missing_ok=True)
                continue
            upload_id = path.name.rsplit(".", 1)[0]
            if not UPLOAD_ID.match(upload_id) or upload_id in self._busy:
                continue
            if now - path.stat().st_mtime > max_age_s:
                path.unlink(missing_ok=True)
                removed.append(upload_id)
        if removed:
            log.info("uploads_removed_stale", upload_ids=sorted(set(removed)))
        return sorted(set(removed))

    def _release(self, upload_id: str) -> None:
        with self._lock:
            self._busy.discard(upload_id)


async def idle_bounded(chunks: AsyncIterator[T], idle_s: float, *, size: Callable[[T], int],
                       min_bytes_per_s: int = 0) -> AsyncIterator[T]:
    """`chunks` as they come; UploadIdle when the next one takes longer than `idle_s` to arrive, or when a
    window of `idle_s` brought fewer than `min_bytes_per_s` * `idle_s` bytes (`size` of each chunk): a trickle
    would otherwise hold its upload id, a stream and a thread for as long as it likes."""
    iterator = aiter(chunks)
    window_started, window_bytes = time.monotonic(), 0
    while True:
        try:
            chunk = await asyncio.wait_for(anext(iterator), idle_s)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise UploadIdle(f"the upload stream sent nothing for {idle_s:g} s ([models] upload_idle_s on the "
                             "agent); what it had sent was removed: upload the bundle again") from None
        window_bytes += size(chunk)
        elapsed = time.monotonic() - window_started
        if elapsed >= idle_s:
            if window_bytes < min_bytes_per_s * elapsed:
                raise UploadIdle(f"the upload stream sent {window_bytes} bytes in {elapsed:.1f} s, less than "
                                 f"{min_bytes_per_s} bytes/s ([models] upload_min_bytes_per_s on the agent); what "
                                 "it had sent was removed: upload the bundle again over a faster link")
            window_started, window_bytes = time.monotonic(), 0
        yield chunk
