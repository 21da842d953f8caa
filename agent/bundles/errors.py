"""Why a model bundle, a signing key, the model store or an upload refused something.

Every message names the file, entry, version or upload concerned and what to do about it. The gRPC boundary
(agent/serving/status_table.py) maps each class to a status code: a missing version → NOT_FOUND, a bad or untrusted
signature → PERMISSION_DENIED, a busy upload → ABORTED, an idle one → DEADLINE_EXCEEDED, a chunk at the wrong
offset → OUT_OF_RANGE, the agent's own disk full → RESOURCE_EXHAUSTED or unwritable → UNAVAILABLE (never the
bundle's fault), a downgrade → FAILED_PRECONDITION, the rest → INVALID_ARGUMENT or FAILED_PRECONDITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vkocr.agent.errors import AgentError

if TYPE_CHECKING:  # the activation's results, which the activation module defines beside its use
    from vkocr.agent.bundles.self_tests import SelfTestOutcome


class BundleError(AgentError):
    """Base of every error about bundles, keys, the model store and uploads; raised only as one of its
    subclasses."""


class BundleFormatError(BundleError):
    """Raised when a file is not a bundle (not a gzip-compressed tar), is truncated or corrupt, or when its
    manifest is malformed: a missing or mistyped field, an unknown option, a model role naming no file."""


class UnsafeEntryError(BundleError):
    """Raised when an archive entry could write outside the extraction directory or is not a regular file:
    an absolute path, a `..` component, a symbolic or hard link, a device node, a FIFO or a directory."""


class IntegrityError(BundleError):
    """Raised when the archive and its manifest disagree: an entry the manifest does not list, a listed file
    the archive lacks, an entry twice, or a size or sha256 that differs from the manifest's."""


class BundleTooLarge(BundleError):
    """Raised when a bundle, an upload's announced size, or what a bundle unpacks to exceeds the configured
    size limit."""


class SignatureError(BundleError):
    """Raised when a bundle is unsigned, signed by a key outside the trusted set, or its signature does not
    verify (the manifest or the signature was altered)."""


class KeyFileError(BundleError):
    """Raised when a key file is missing, unreadable, not an ed25519 key in PEM form, or would be
    overwritten."""


class ModelStoreError(BundleError):
    """Base of the model store's refusals; raised only as one of its subclasses."""


class VersionNotFound(ModelStoreError):
    """Raised when a version is asked for that the store does not hold (or holds only half-written)."""


class VersionConflict(ModelStoreError):
    """Raised when a bundle's version is already stored with different content."""


class ActiveVersionError(ModelStoreError):
    """Raised when deleting the version that is active."""


class NothingToRollBack(ModelStoreError):
    """Raised when a rollback is asked for but no earlier version is recorded and still stored."""


class DowngradeRefused(ModelStoreError):
    """Raised when activating a version older than the store's high-water mark (agent/bundles/high_water.py)
    without an explicit downgrade (Rollback, or Activate with allow_downgrade)."""


class HighWaterUnreadable(ModelStoreError):
    """Raised when the store's high-water mark file exists but cannot be read or parsed: activations are
    refused (fail closed) until an explicit downgrade rewrites it."""


# -- the agent's own disk (agent/bundles/disk_errors.py): never the bundle's fault ------------------------------


class StorageError(BundleError):
    """Base of the failures of the agent's disk while storing an upload or a bundle; raised only as one of its
    subclasses. Whatever was half-written is removed; a complete upload is kept for a retry."""


class StorageFull(StorageError):
    """Raised when the store's filesystem is full or the quota is spent (ENOSPC, EDQUOT)."""


class StorageUnavailable(StorageError):
    """Raised when the store's filesystem refuses the write for another reason: read-only (EROFS), permission
    (EACCES, EPERM), an I/O error (EIO) or anything else the disk says."""


# -- uploads (agent/bundles/uploads.py): the bundle inside is judged later, by the store ---------------------


class UploadError(BundleError):
    """Base of the refusals of an upload's chunks; raised only as one of its subclasses."""


class UploadRequestError(UploadError):
    """Raised when a chunk is malformed: a bad upload id, a first chunk of a new upload without total_size
    and sha256, an id that changes within one stream, an empty upload."""


class UploadMismatch(UploadError):
    """Raised when an upload id is resumed with another total size or sha256 than it was started with."""


class OffsetMismatch(UploadError):
    """Raised when a chunk does not start where the bytes held end (`received`), or would run past the
    announced total size."""

    def __init__(self, message: str, received: int) -> None:
        super().__init__(message)
        self.received = received


class UploadIncomplete(UploadError):
    """Raised when the stream ends before the announced total size arrived; the bytes are kept to resume."""


class ChecksumMismatch(UploadError):
    """Raised when every byte arrived but their sha256 is not the announced one; the upload is discarded."""


class UploadBusy(UploadError):
    """Raised when another stream is writing the same upload id right now."""


class UploadIdle(UploadError):
    """Raised when an upload stream sent no chunk for the configured idle timeout ([models] upload_idle_s); the
    bytes it sent are removed."""


class ActivationError(AgentError):
    """Base of the reasons an activation did not happen (the old version keeps serving); raised only as one
    of its subclasses."""


class ActivationBusy(ActivationError):
    """Raised when another activation (or a change of the store) is in progress."""


class ActivationFailed(ActivationError):
    """Raised when an activation stopped at `step` (verify, load, self_tests, swap, record); `cause` is the
    underlying error, `self_tests` the results so far."""

    def __init__(self, step: str, message: str, *, cause: BaseException | None = None,
                 self_tests: tuple[SelfTestOutcome, ...] = ()) -> None:
        super().__init__(message)
        self.step = step
        self.cause = cause
        self.self_tests = self_tests
