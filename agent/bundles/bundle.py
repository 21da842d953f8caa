"""Model bundles: one signed file that carries the three PP-OCR models, their OCR options and self-tests.

Format (`*.vkb`): a gzip-compressed tar archive in PAX format whose entries are, in order, `manifest.json`
(see agent/bundles/manifest.py), `manifest.sig` (the raw ed25519 signature over the manifest's exact bytes; absent
while unsigned) and the files the manifest lists, regular files only. The manifest carries every file's
size and sha256, so one signature covers everything.

    create()   files → bundle (signed when given a key)
    sign()     add or replace the signature (the bundle is rewritten atomically)
    verify()   signature by a trusted key, then every entry against the manifest → Manifest
    inspect()  what a bundle says about itself, trusted or not
    extract()  safe extraction into a new directory that appears only when every check passed
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from vkocr.agent.bundles.atomic_files import atomic_output, fsync_dir
from vkocr.agent.bundles.disk_errors import disk_error
from vkocr.agent.bundles.errors import BundleError, BundleFormatError, IntegrityError, SignatureError
from vkocr.agent.bundles.manifest import (
    MANIFEST_NAME,
    MODEL_ROLES,
    OPTIONAL_MODEL_ROLES,
    SIGNATURE_NAME,
    FileEntry,
    Manifest,
    SelfTest,
    format_time,
)
from vkocr.agent.bundles.options import split_options
from vkocr.agent.bundles.paths import check_relative_path
from vkocr.agent.bundles.reader import DEFAULT_MAX_BYTES, BundleReader
from vkocr.agent.bundles.signing import TrustedKeys, fingerprint, short_fingerprint
from vkocr.agent.ocr.model_files import sha256_of
from vkocr.log import get_logger

log = get_logger(__name__)

BUNDLE_SUFFIX = ".vkb"
SELFTEST_DIR = "selftest"
COMPRESS_LEVEL = 6  # ONNX weights barely compress; higher levels cost seconds for a few kB


def create(models: Mapping[str, Path], name: str, version: str, out_path: Path, *,
           options: Mapping[str, Any] | None = None, self_tests: Sequence[tuple[Path, str]] = (),
           other_files: Sequence[Path] = (), private_key: Ed25519PrivateKey | None = None,
           created: datetime | None = None) -> Manifest:
    """Write a bundle of `models` ({"det", "cls", "rec": path}, and optionally "ori": the page orientation model)
    to `out_path`, signed when `private_key` is given. Model and other files keep their file names; self-test
    images go under selftest/."""
    if not set(MODEL_ROLES) <= set(models) <= {*MODEL_ROLES, *OPTIONAL_MODEL_ROLES}:
        raise BundleFormatError(f"a bundle needs exactly the det, cls and rec models (and optionally ori), got "
                                f"{sorted(models)}")
    sources: dict[str, Path] = {}
    files: list[FileEntry] = []

    def add(source: Path, path: str, role: str) -> str:
        source = Path(source)
        if not source.is_file():
            raise BundleError(f"{role} file {source} does not exist or is not a regular file")
        if path in sources:
            if sources[path].resolve() == source.resolve():
                return path
            raise BundleError(f"{sources[path]} and {source} would both be stored as {path!r}; rename one")
        problem = check_relative_path(path)
        if problem is not None:
            raise BundleFormatError(f"cannot store {source}: {problem}")
        sources[path] = source
        files.append(FileEntry(path, sha256_of(source), source.stat().st_size, role))
        return path

    model_paths = {role: add(models[role], Path(models[role]).name, role)
                   for role in (*MODEL_ROLES, *OPTIONAL_MODEL_ROLES) if role in models}
    tests = tuple(SelfTest(add(image, f"{SELFTEST_DIR}/{Path(image).name}", "selftest-image"), expect)
                  for image, expect in self_tests)
    for other in other_files:
        add(other, Path(other).name, "other")
    preprocess, postprocess = split_options(options or {})
    draft = Manifest(name=name, version=version, created=(created or datetime.now(UTC)).replace(microsecond=0),
                     files=tuple(files), models=model_paths, preprocess=preprocess, postprocess=postprocess,
                     self_tests=tests, signer=fingerprint(private_key.public_key()) if private_key else None)
    manifest = Manifest.from_bytes(draft.to_bytes())  # every rule a reader applies, applied before writing
    _write(Path(out_path), manifest, sources, private_key)
    log.info("bundle_created", path=str(out_path), name=name, version=version, files=len(files),
             signed=private_key is not None)
    return manifest


def sign(bundle: Path, private_key: Ed25519PrivateKey, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Manifest:
    """Sign `bundle` in place (replacing any signature). Its files are checked against the manifest first,
    so a damaged bundle is never signed."""
    bundle = Path(bundle)
    manifest = read_manifest(bundle, max_bytes=max_bytes)
    with tempfile.TemporaryDirectory(dir=bundle.parent, prefix=f".{bundle.name}.", suffix=".tmp") as tmp:
        content = extract(bundle, Path(tmp) / "content", manifest, max_bytes=max_bytes)
        signed = Manifest.from_bytes(manifest.with_signer(fingerprint(private_key.public_key())).to_bytes())
        _write(bundle, signed, {f.path: content / f.path for f in signed.files}, private_key)
    log.info("bundle_signed", path=str(bundle), version=signed.version, signer=signed.signer)
    return signed


def verify(bundle: Path, trusted: TrustedKeys, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Manifest:
    """The bundle's manifest, once its signature is by a trusted key and every entry matches it."""
    with BundleReader(bundle, max_bytes) as reader:
        manifest = _verified_manifest(reader, trusted)
        for entry, source in reader.entries(manifest):
            reader.copy_checked(entry, source, None)
    return manifest


def verify_signature(bundle: Path, trusted: TrustedKeys, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Manifest:
    """Only the signature and manifest (fast); extract() checks the files as it writes them."""
    with BundleReader(bundle, max_bytes) as reader:
        return _verified_manifest(reader, trusted)


def read_manifest(bundle: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Manifest:
    """The manifest, parsed and checked for form but NOT for its signature: for inspecting and signing."""
    with BundleReader(bundle, max_bytes) as reader:
        raw, _ = reader.header()
    return Manifest.from_bytes(raw)


def inspect(bundle: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """What the bundle says about itself (nothing here is verified): JSON-ready."""
    bundle = Path(bundle)
    with BundleReader(bundle, max_bytes) as reader:
        raw, signature = reader.header()
    manifest = Manifest.from_bytes(raw)
    return {
        "path": str(bundle),
        "bundle_size": bundle.stat().st_size,
        "bundle_sha256": sha256_of(bundle),
        "format": manifest.format,
        "name": manifest.name,
        "version": manifest.version,
        "created": format_time(manifest.created),
        "signed": signature is not None,
        "signer": manifest.signer,
        "files": [{"path": f.path, "role": f.role, "size": f.size, "sha256": f.sha256} for f in manifest.files],
        "total_size": manifest.total_size,
        "models": dict(manifest.models),
        "preprocess": dict(manifest.preprocess),
        "postprocess": dict(manifest.postprocess),
        "self_tests": [{"image": t.image, "expect": t.expect} for t in manifest.self_tests],
        "content_digest": manifest.content_digest(),
    }


def extract(bundle: Path, dest_dir: Path, manifest: Manifest, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Path:
    """Unpack `bundle` into `dest_dir` (which must not exist), checking every entry against `manifest` (the
    one verify() returned). Files go to a temp directory beside it that is renamed into place only when all
    checks passed, so on any failure nothing is left behind. The result holds manifest.json, manifest.sig
    (when signed) and the listed files, read-only."""
    bundle, dest = Path(bundle), Path(dest_dir)
    if dest.exists():
        raise BundleError(f"cannot extract into {dest}: it already exists")
    dest.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp"))
    try:
        with BundleReader(bundle, max_bytes) as reader:
            raw, signature = reader.header()
            if raw != (manifest.raw or manifest.to_bytes()):
                raise IntegrityError(f"the manifest in {bundle} differs from the one verified: the bundle "
                                     "changed since; verify it again")
            with _new_file(temp / MANIFEST_NAME) as out:
                out.write(raw)
            if signature is not None:
                with _new_file(temp / SIGNATURE_NAME) as out:
                    out.write(signature)
            for entry, source in reader.entries(manifest):
                target = temp / entry.path
                target.parent.mkdir(parents=True, exist_ok=True)
                with _new_file(target) as out:
                    reader.copy_checked(entry, source, out.write)
        temp.chmod(0o755)  # mkdtemp makes it 0700; the store's readers need what a plain mkdir gives
        for directory in sorted({p.parent for p in temp.rglob("*")}, key=lambda p: -len(p.parts)):
            fsync_dir(directory)
        os.rename(temp, dest)
        fsync_dir(dest.parent)
    except OSError as exc:  # the agent's disk, not the bundle (its read errors are BundleFormatErrors)
        shutil.rmtree(temp, ignore_errors=True)
        raise disk_error(exc, f"extracting version {manifest.version}") from exc
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    log.info("bundle_extracted", bundle=str(bundle), dest=str(dest), version=manifest.version,
             files=len(manifest.files))
    return dest


@contextmanager
def _new_file(path: Path) -> Iterator[IO[bytes]]:
    """Create `path` (never overwriting an entry); once written, fsync it and make it read-only."""
    with path.open("xb") as out:
        yield out
        out.flush()
        os.fsync(out.fileno())
    path.chmod(0o444)


def _verified_manifest(reader: BundleReader, trusted: TrustedKeys) -> Manifest:
    raw, signature = reader.header()
    if signature is None:
        raise SignatureError(f"bundle {reader.path} is not signed; sign it with `vkocr bundle sign "
                             f"{reader.path} --key PRIVATE.pem`")
    if not trusted:
        raise SignatureError("no trusted keys are configured, so no bundle can be accepted; add the signer's "
                             "public key to the trusted keys")
    signer = trusted.find_signer(raw, signature)
    if signer is None:
        claimed = _claimed_signer(raw)
        if claimed is not None and claimed not in trusted:
            raise SignatureError(f"bundle {reader.path} is signed by key {short_fingerprint(claimed)}, which is "
                                 f"not trusted (trusted: {trusted.describe()})")
        raise SignatureError(f"bundle {reader.path}: the manifest signature does not verify with any trusted key "
                             f"({trusted.describe()}); the manifest or its signature was altered")
    manifest = Manifest.from_bytes(raw)
    if manifest.signer != signer:
        raise SignatureError(f"bundle {reader.path} names signer {short_fingerprint(str(manifest.signer))} but "
                             f"was signed by {short_fingerprint(signer)}")
    return manifest


def _claimed_signer(raw: bytes) -> str | None:
    """The signer an unverified manifest names, for the error message only."""
    try:
        signer = Manifest.from_bytes(raw).signer
    except BundleError:
        return None
    return signer


class _HashingReader:
    """Reads a source file for tarfile while hashing it, so a file that changed after it was hashed for the
    manifest is caught instead of shipped."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source = source
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.source.read(size)
        self.digest.update(data)
        return data


def _tar_entry(path: str, size: int, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path)
    info.size, info.mode, info.mtime, info.type = size, 0o644, int(mtime), tarfile.REGTYPE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _write(out_path: Path, manifest: Manifest, sources: Mapping[str, Path],
           private_key: Ed25519PrivateKey | None) -> None:
    raw = manifest.to_bytes()
    mtime = manifest.created.timestamp()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_output(out_path) as f, \
                gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=COMPRESS_LEVEL,
                              mtime=int(mtime)) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            blobs = [(MANIFEST_NAME, raw)] + ([(SIGNATURE_NAME, private_key.sign(raw))] if private_key else [])
            for name, blob in blobs:
                tar.addfile(_tar_entry(name, len(blob), mtime), io.BytesIO(blob))
            for entry in manifest.files:
                with sources[entry.path].open("rb") as source:
                    reader = _HashingReader(source)
                    tar.addfile(_tar_entry(entry.path, entry.size, mtime), reader)
                if reader.digest.hexdigest() != entry.sha256:
                    raise BundleError(f"{sources[entry.path]} changed while the bundle was written; run again")
    except (OSError, tarfile.TarError) as exc:
        raise BundleError(f"cannot write bundle {out_path}: {exc}") from exc

