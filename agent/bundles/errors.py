"""Why a model bundle, a signing key or the model store refused something.

Every message names the file, entry or version concerned and what to do about it. The gRPC layer can map
the classes to status codes (a missing version → NOT_FOUND, a bad or untrusted signature → PERMISSION_DENIED,
the rest → INVALID_ARGUMENT or FAILED_PRECONDITION).
"""

from __future__ import annotations

from vkocr.engine.errors import VkocrError


class BundleError(VkocrError):
    """Base of every error about bundles, keys and the model store."""


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
    """Raised when a bundle, or what it unpacks to, exceeds the configured size limit."""


class SignatureError(BundleError):
    """Raised when a bundle is unsigned, signed by a key outside the trusted set, or its signature does not
    verify (the manifest or the signature was altered)."""


class KeyFileError(BundleError):
    """Raised when a key file is missing, unreadable, not an ed25519 key in PEM form, or would be overwritten."""


class ModelStoreError(BundleError):
    """Base of the model store's refusals."""


class VersionNotFound(ModelStoreError):
    """Raised when a version is asked for that the store does not hold (or holds only half-written)."""


class VersionConflict(ModelStoreError):
    """Raised when a bundle's version is already stored with different content."""


class ActiveVersionError(ModelStoreError):
    """Raised when deleting the version that is active."""


class NothingToRollBack(ModelStoreError):
    """Raised when a rollback is asked for but no earlier version is recorded and still stored."""
