"""A bundle from an OCI registry into a model store: pulled by digest (agent/fleet/oci.py checks the manifest's
and the bundle's digests), then our ed25519 signature and manifest checks, exactly those of an upload
(ModelStore.add), with the anti-rollback mark checked before anything is stored. Used by the board's fleet client
and by `vkocr bundle pull` (a Kubernetes init container)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from vkocr.agent.bundles.bundle import verify_signature
from vkocr.agent.bundles.high_water import VersionMark
from vkocr.agent.bundles.manifest import Manifest
from vkocr.agent.bundles.signing import short_fingerprint
from vkocr.agent.bundles.store import ModelStore
from vkocr.agent.fleet.errors import DesiredStateError
from vkocr.agent.fleet.oci import Reference, Registry, RegistryAccess


def pull_into_store(store: ModelStore, reference_text: str, access: RegistryAccess, *, version: str = "",
                    signer: str = "", rollback: bool = False) -> Manifest:
    """Pull, verify and store; `version` and `signer`, when given, must be what the bundle says. Unless
    `rollback`, a version older than the store's high-water mark is refused (DesiredStateError) before it is
    stored."""
    reference = Reference.parse(reference_text)
    pulls = store.root / "pulls"
    pulls.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=pulls) as tmp, Registry(reference.host, access) as registry:
        path = registry.pull_bundle(reference, Path(tmp) / "bundle.vkb", store.max_bundle_bytes)
        manifest = verify_signature(path, store.trusted, max_bytes=store.max_bundle_bytes)
        if (signer and manifest.signer != signer) or (version and manifest.version != version):
            raise DesiredStateError(f"{reference_text} holds version {manifest.version} signed by "
                                    f"{short_fingerprint(str(manifest.signer))}, not {version or 'any'} by "
                                    f"{short_fingerprint(signer) if signer else 'any trusted key'}; nothing was "
                                    "installed")
        mark = store.high_water.read()
        if not rollback and mark is not None and VersionMark.of(manifest).older_than(mark):
            raise DesiredStateError(f"version {manifest.version} is older than {mark.describe()}, which this "
                                    "board has run (anti-rollback); nothing was installed")
        store.add(path)
        return manifest
