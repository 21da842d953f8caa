"""The model store: verified, extracted bundles on disk, which one is active, and what to roll back to.

    <root>/versions/<version>/   one extracted bundle (manifest.json, manifest.sig, files); complete only
                                 once `.installed.json` exists, which is written last
    <root>/staging/              extractions and deletions in progress; anything here after a crash is junk
    <root>/active                the active version, one line, replaced atomically
    <root>/previous              versions active before, one per line, most recent last (for rollback)
    <root>/activated             every stored version that was ever active, one per line (what `keep` may prune)
    <root>/high_water.json       the newest version ever activated: older ones need an explicit downgrade
    <root>/.lock                 flock'd during changes, so two processes never change the store at once

Every change is a rename of a complete directory or an atomically replaced file, so a crash leaves the
store as it was before the change or as it is after it; recover() clears what a crash left in staging/.
Thread-safe: the gRPC handlers share one store.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

from vkocr.agent.bundles.atomic_files import TEMP_SUFFIX, fsync_dir, write_atomic
from vkocr.agent.bundles.bundle import extract, verify_signature
from vkocr.agent.bundles.disk_errors import disk_error
from vkocr.agent.bundles.errors import (
    ActiveVersionError,
    BundleFormatError,
    IntegrityError,
    NothingToRollBack,
    SignatureError,
    VersionConflict,
    VersionNotFound,
)
from vkocr.agent.bundles.high_water import HighWater, VersionMark
from vkocr.agent.bundles.manifest import MANIFEST_NAME, NAME_PATTERN, SIGNATURE_NAME, Manifest
from vkocr.agent.bundles.reader import DEFAULT_MAX_BYTES
from vkocr.agent.bundles.signing import TrustedKeys, short_fingerprint
from vkocr.agent.bundles.stored import BundleInfo, InstalledVersion, Recovery, SelfTestCase
from vkocr.agent.ocr.model_files import sha256_of
from vkocr.agent.ocr.options import OcrOptions
from vkocr.log import get_logger

log = get_logger(__name__)

MARKER = ".installed.json"
HISTORY_LIMIT = 32


class ModelStore:
    def __init__(self, root: Path, trusted: TrustedKeys, keep: int = 3,
                 max_bundle_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.root = Path(root)
        self.trusted = trusted
        self.keep = keep
        self.max_bundle_bytes = max_bundle_bytes
        self.versions_dir = self.root / "versions"
        self.staging_dir = self.root / "staging"
        for directory in (self.root, self.versions_dir, self.staging_dir):
            directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._depth = 0  # nesting of _changing() in the thread holding _lock; the flock is taken once
        self._manifests: dict[str, tuple[tuple[int, int], Manifest]] = {}
        self.high_water = HighWater(self.root)

    # --- reading -------------------------------------------------------------------------------------------

    def active(self) -> str | None:
        return _read_line(self.root / "active")

    def previous(self) -> list[str]:
        """Versions active before the current one, most recent first."""
        text = _read_text(self.root / "previous")
        return [line for line in reversed(text.splitlines()) if line.strip()] if text else []

    def versions(self) -> list[BundleInfo]:
        """Every complete stored version, newest added first."""
        active = self.active()
        infos = []
        for directory in sorted(self.versions_dir.iterdir()):
            info = self._installed_info(directory.name)
            if info is not None:
                infos.append(_with_active(info, info.version == active))
        return sorted(infos, key=lambda i: -i.sequence)

    def info(self, version: str) -> BundleInfo:
        info = self._installed_info(version)
        if info is None:
            raise VersionNotFound(self._not_found(version))
        return _with_active(info, version == self.active())

    def manifest(self, version: str) -> Manifest:
        if not self._is_complete(version):
            raise VersionNotFound(self._not_found(version))
        try:
            marker = (self.versions_dir / version / MARKER).stat()
            # Keyed by the marker's identity, so a version another process deleted and re-added is re-read.
            identity = (marker.st_ino, marker.st_mtime_ns)
            with self._lock:
                cached = self._manifests.get(version)
            if cached is not None and cached[0] == identity:
                return cached[1]
            manifest = Manifest.from_bytes((self.versions_dir / version / MANIFEST_NAME).read_bytes())
        except FileNotFoundError:  # deleted meanwhile
            raise VersionNotFound(self._not_found(version)) from None
        with self._lock:
            self._manifests[version] = (identity, manifest)
        return manifest

    def installed(self, version: str, base: OcrOptions | None = None, *,
                  verify: bool = False) -> InstalledVersion:
        """One stored version, read once: its directory, manifest, model files, options (the bundle's over
        `base`) and self-tests. With `verify`, its signature is checked again against today's trusted keys and
        every file's size and sha256 against the manifest (IntegrityError, SignatureError): for use right
        before activating, so a key since removed or a disk fault is caught."""
        manifest = self.manifest(version)  # VersionNotFound when it is not (or no longer) stored
        root = (self.versions_dir / version).resolve()
        if verify:
            self._verify(version, root, manifest)
        return InstalledVersion(
            version=version, root=root, manifest=manifest,
            models=MappingProxyType({role: root / path for role, path in manifest.models.items()}),
            options=manifest.ocr_options(base),
            self_tests=tuple(SelfTestCase(root / t.image, t.expect) for t in manifest.self_tests))

    def activated(self) -> list[str]:
        """The stored versions that were ever active, in the order they first were. A store from before this
        file was kept counts its history and active version."""
        text = _read_text(self.root / "activated")
        if text is None:
            return [*reversed(self.previous()), *filter(None, [self.active()])]
        return [line for line in text.splitlines() if line.strip()]

    def rollback_target(self) -> str:
        """The most recent earlier active version that is still stored."""
        active = self.active()
        for version in self.previous():
            if version != active and self._is_complete(version):
                return version
        raise NothingToRollBack(f"nothing to roll back to: no version active before {active or 'now'} is "
                                "still stored")

    # --- changing ------------------------------------------------------------------------------------------

    def add(self, bundle: Path) -> BundleInfo:
        """Verify `bundle` (signature by a trusted key, then every entry while extracting) and store it as
        versions/<version>. Adding the same content again returns the stored one; the same version with other
        content is refused. Older versions beyond `keep` are pruned afterwards."""
        bundle = Path(bundle)
        manifest = verify_signature(bundle, self.trusted, max_bytes=self.max_bundle_bytes)
        bundle_size, bundle_sha256 = bundle.stat().st_size, sha256_of(bundle)
        version = manifest.version
        with self._changing():
            existing = self._installed_info(version)
            if existing is not None:
                if existing.content_digest == manifest.content_digest():
                    log.info("model_store_add_unchanged", version=version)
                    return _with_active(existing, version == self.active())
                raise VersionConflict(f"version {version} is already stored with different content (stored "
                                      f"bundle sha256 {existing.sha256[:12]}…, this one "
                                      f"{bundle_sha256[:12]}…); give the new bundle its own version")
            staged = self.staging_dir / f"{version}.{secrets.token_hex(4)}"
            try:
                extract(bundle, staged, manifest, max_bytes=self.max_bundle_bytes)
                marker = {"installed": datetime.now(UTC).isoformat(), "sequence": self._next_sequence(),
                          "bundle_size": bundle_size, "bundle_sha256": bundle_sha256,
                          "content_digest": manifest.content_digest()}
                write_atomic(staged / MARKER, json.dumps(marker, indent=2).encode() + b"\n", mode=0o444)
                target = self.versions_dir / version
                if target.exists():  # an incomplete leftover of the same version
                    self._remove_dir(target)
                os.rename(staged, target)
                fsync_dir(self.versions_dir)
            except OSError as exc:  # the marker, the rename: the agent's disk refused (full, read-only, …)
                shutil.rmtree(staged, ignore_errors=True)
                raise disk_error(exc, f"storing version {version}") from exc
            except BaseException:
                shutil.rmtree(staged, ignore_errors=True)
                raise
            self._manifests.pop(version, None)
            log.info("model_store_added", version=version, name=manifest.name, signer=manifest.signer)
            self.prune()
            return self.info(version)

    def check_downgrade(self, version: str, *, allow_downgrade: bool = False) -> None:
        """DowngradeRefused when `version` is older than the high-water mark and no downgrade was asked for
        (VersionNotFound when it is not stored): before an activation's first step."""
        self.high_water.check(VersionMark.of(self.manifest(version)), allow_downgrade=allow_downgrade)

    def set_active(self, version: str, *, rollback: bool = False, allow_downgrade: bool = False) -> str | None:
        """Make `version` the active one (the pointer file is replaced atomically) and return the version it
        replaces. The replaced one is recorded for rollback; with `rollback=True` the history is instead
        unwound past `version`, so rolling back again goes one further back. A version older than the
        high-water mark needs `rollback` or `allow_downgrade` (DowngradeRefused); a newer one raises the mark."""
        with self._changing():
            if not self._is_complete(version):
                raise VersionNotFound(self._not_found(version))
            mark = VersionMark.of(self.manifest(version))
            self.high_water.check(mark, allow_downgrade=rollback or allow_downgrade)
            current = self.active()
            history = list(reversed(self.previous()))  # oldest first, as on disk
            if rollback and version in history:
                while history.pop() != version:
                    pass
            elif current is not None and current != version:
                history.append(current)
            self._write_history(history)
            if version not in self.activated():
                self._write_activated([*self.activated(), version])
            write_atomic(self.root / "active", f"{version}\n".encode())
            high_water = self.high_water.raise_to(mark)
            log.info("model_store_activated", version=version, previous=current, rollback=rollback,
                     high_water=high_water.version)
            return current

    def delete(self, version: str) -> None:
        with self._changing():
            if version == self.active():
                raise ActiveVersionError(f"version {version} is active; activate another version before "
                                         "deleting it")
            target = self.versions_dir / version
            if not NAME_PATTERN.match(version) or not target.is_dir():
                raise VersionNotFound(self._not_found(version))
            self._remove_dir(target)
            self._write_history([v for v in reversed(self.previous()) if v != version])
            if version in self.activated():
                self._write_activated([v for v in self.activated() if v != version])
            self._manifests.pop(version, None)
            log.info("model_store_deleted", version=version)

    def prune(self, *, never_activated: bool = False) -> list[str]:
        """Delete all but the `keep` newest versions, never the active one or the rollback target. A version
        that was never active (an operator's staged bundle) is deleted only when `never_activated` is asked
        for, and only when it is older than the kept ones: adding a bundle never removes a staged one."""
        with self._changing():
            protected = {self.active()}
            try:
                protected.add(self.rollback_target())
            except NothingToRollBack:
                pass
            activated = set(self.activated())
            removed = [info.version for info in self.versions()[self.keep:]
                       if info.version not in protected and (never_activated or info.version in activated)]
            for version in removed:
                self.delete(version)
            if removed:
                log.info("model_store_pruned", removed=removed, keep=self.keep)
            return removed

    def recover(self) -> Recovery:
        """At start: clear leftovers of interrupted changes, drop half-written versions and, if the active
        pointer names a version that is not complete, fall back to the newest complete one."""
        with self._changing():
            leftovers = list(self.staging_dir.iterdir())
            leftovers += [p for p in (*self.root.iterdir(), *self.versions_dir.iterdir())
                          if p.name.startswith(".") and p.name.endswith(TEMP_SUFFIX)]
            for path in leftovers:
                _remove_any(path)
            incomplete = [p.name for p in self.versions_dir.iterdir() if not (p / MARKER).is_file()]
            for name in incomplete:
                self._remove_dir(self.versions_dir / name)
            before = self.active()
            after = before
            if before is not None and not self._is_complete(before):
                complete = self.versions()
                after = complete[0].version if complete else None
                if after is None:
                    (self.root / "active").unlink(missing_ok=True)
                    fsync_dir(self.root)
                else:
                    write_atomic(self.root / "active", f"{after}\n".encode())
            self._manifests.clear()
            if after is not None and not self.high_water.path.exists():  # a store older than the mark
                self.high_water.raise_to(VersionMark.of(self.manifest(after)))
            report = Recovery(tuple(str(p) for p in leftovers), tuple(incomplete), before, after)
            if report.active_changed:
                log.warning("model_store_active_fallback", missing=before, active=after)
            log.info("model_store_recovered", summary=report.describe())
            return report

    # --- internals -----------------------------------------------------------------------------------------

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """One change at a time: a thread lock, and an flock on <root>/.lock against other processes."""
        with self._lock:
            lock_file = None
            if self._depth == 0:
                lock_file = (self.root / ".lock").open("a")
                fcntl.flock(lock_file, fcntl.LOCK_EX)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if lock_file is not None:
                    fcntl.flock(lock_file, fcntl.LOCK_UN)
                    lock_file.close()

    def _verify(self, version: str, directory: Path, manifest: Manifest) -> None:
        signature = _read_bytes(directory / SIGNATURE_NAME)
        signer = self.trusted.find_signer(manifest.raw, signature) if signature else None
        if signer is None or signer != manifest.signer:
            raise SignatureError(f"stored version {version} is no longer signed by a trusted key (signer "
                                 f"{short_fingerprint(str(manifest.signer))}; trusted: "
                                 f"{self.trusted.describe()})")
        for entry in manifest.files:
            path = directory / entry.path
            if not path.is_file() or path.is_symlink():
                raise IntegrityError(f"stored version {version}: file {entry.path} is missing")
            if path.stat().st_size != entry.size or sha256_of(path) != entry.sha256:
                raise IntegrityError(f"stored version {version}: file {entry.path} was altered on disk")

    def _is_complete(self, version: str) -> bool:
        # The pattern also keeps a version from a request ('../x', '') from naming a path outside versions/.
        return bool(NAME_PATTERN.match(version)) and (self.versions_dir / version / MARKER).is_file()

    def _installed_info(self, version: str) -> BundleInfo | None:
        if not self._is_complete(version):
            return None
        try:
            marker = json.loads((self.versions_dir / version / MARKER).read_bytes())
            manifest = self.manifest(version)
        except (FileNotFoundError, VersionNotFound):  # deleted meanwhile by another thread
            return None
        except (ValueError, BundleFormatError):
            log.warning("model_store_unreadable_version", version=version)
            return None
        return BundleInfo(name=manifest.name, version=manifest.version, created=manifest.created,
                          installed=datetime.fromisoformat(marker["installed"]),
                          sequence=int(marker["sequence"]),
                          size=int(marker["bundle_size"]), sha256=str(marker["bundle_sha256"]),
                          signer=manifest.signer, content_digest=str(marker["content_digest"]),
                          path=self.versions_dir / version)

    def _next_sequence(self) -> int:
        return max((info.sequence for info in self.versions()), default=0) + 1

    def _write_history(self, history: list[str]) -> None:
        history = history[-HISTORY_LIMIT:]
        write_atomic(self.root / "previous", "".join(f"{v}\n" for v in history).encode())

    def _write_activated(self, versions: list[str]) -> None:
        write_atomic(self.root / "activated", "".join(f"{v}\n" for v in versions).encode())

    def _remove_dir(self, directory: Path) -> None:
        """Rename into staging first (atomic), then delete: a crash midway leaves only staging junk."""
        doomed = self.staging_dir / f"deleting.{directory.name}.{secrets.token_hex(4)}"
        os.rename(directory, doomed)
        fsync_dir(directory.parent)
        _remove_any(doomed)

    def _not_found(self, version: str) -> str:
        stored = ", ".join(i.version for i in self.versions()) or "none"
        return f"version {version!r} is not in the model store (stored: {stored})"


def _with_active(info: BundleInfo, active: bool) -> BundleInfo:
    return replace(info, active=active)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _read_line(path: Path) -> str | None:
    text = _read_text(path)
    return text.strip() or None if text is not None else None


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _remove_any(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)

