"""Bundles in OCI registries (agent/fleet/oci.py):

`vkocr bundle push BUNDLE REGISTRY/REPOSITORY:TAG` stores a signed bundle as an OCI artifact in any OCI distribution
registry and prints its reference by digest, what `vkocr fleet rollout` and the boards pull by. Credentials:
--user, and the password from $VKOCR_REGISTRY_PASSWORD (never a flag: it would show in `ps`).

`vkocr bundle pull REFERENCE --config agent.toml [--activate]` pulls one into the agent's model store, as a board
does (digests, signature, manifest, anti-rollback), for a Kubernetes init container (deploy/helm) or a board
without a broker. Registry credentials and the store come from the agent's config ([fleet], [models])."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from vkocr.errors import VkocrError


def add_oci_parsers(sub: Any) -> None:
    push = sub.add_parser(
        "push", help="store a signed bundle in an OCI registry; print its digest",
        description="Check BUNDLE's signature is readable, then push it to REGISTRY/REPOSITORY:TAG as an OCI "
        "artifact (artifactType application/vnd.vkocr.bundle.v1) and print the reference by digest. The registry "
        "password comes from $VKOCR_REGISTRY_PASSWORD.")
    push.add_argument("bundle", type=Path, metavar="BUNDLE.vkb")
    push.add_argument("reference", metavar="REGISTRY/REPOSITORY:TAG")
    push.add_argument("--user", default="", help="registry user (default: anonymous)")
    push.add_argument("--plain-http", action="store_true", help="a registry without TLS (loopback, closed network)")
    push.add_argument("--ca", default="", metavar="CA.pem", help="CA of the registry's TLS certificate")
    push.add_argument("--json", action="store_true", help='one JSON object: {"reference", "digest", "version", '
                      '"signer"}')
    push.set_defaults(func=cmd_push)

    pull = sub.add_parser(
        "pull", help="pull a bundle by digest from an OCI registry into the agent's model store",
        description="Pull REFERENCE (REGISTRY/REPOSITORY@sha256:…) into the model store of the agent's config "
        "([models] store and trusted_keys; registry credentials from [fleet]): the digests, the signature and "
        "the manifest are checked, and a version older than the store has run is refused. --activate also makes "
        "it the active version (the agent serves it at its next start).")
    pull.add_argument("reference", metavar="REGISTRY/REPOSITORY@sha256:DIGEST")
    pull.add_argument("--config", type=Path, metavar="agent.toml", help="the agent's config (default: defaults and "
                      "VKOCR_ variables)")
    pull.add_argument("--activate", action="store_true", help="make it the active version")
    pull.add_argument("--json", action="store_true", help="print what was stored as one JSON object")
    pull.set_defaults(func=cmd_pull)


def cmd_push(args: argparse.Namespace) -> int:
    from vkocr.agent.bundles.bundle import read_manifest
    from vkocr.agent.fleet.oci import Reference, Registry, RegistryAccess

    try:
        reference = Reference.parse(args.reference)
        manifest = read_manifest(args.bundle)
        if not manifest.signer:
            raise VkocrError(f"{args.bundle} is not signed; sign it with `vkocr bundle sign` first")
        tag = reference.tag or manifest.version
        access = RegistryAccess(args.user, os.environ.get("VKOCR_REGISTRY_PASSWORD", ""), args.plain_http, args.ca)
        with Registry(reference.host, access) as registry:
            digest = registry.push_bundle(args.bundle, Reference(reference.host, reference.repository, tag), {
                "org.opencontainers.image.version": manifest.version, "org.opencontainers.image.title": manifest.name,
                "vnd.vkocr.bundle.signer": str(manifest.signer)})
    except VkocrError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    pinned = str(reference.by_digest(digest))
    if args.json:
        print(json.dumps({"reference": pinned, "digest": digest, "version": manifest.version,
                          "signer": manifest.signer}))
    else:
        print(pinned)
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    from vkocr.agent.bundles.signing import TrustedKeys
    from vkocr.agent.bundles.store import ModelStore
    from vkocr.agent.fleet.install import pull_into_store
    from vkocr.agent.fleet.oci import RegistryAccess
    from vkocr.agent.serving.config import load_config

    try:
        config = load_config(args.config)
        if not config.models.store:
            raise VkocrError("the config names no model store ([models] store)")
        models, fleet = config.models, config.fleet
        store = ModelStore(Path(models.store), TrustedKeys.from_paths(map(Path, models.trusted_keys)),
                           keep=models.keep, max_bundle_bytes=models.max_bundle_bytes)
        access = RegistryAccess(fleet.registry_user, fleet.secret("registry_password_file"),
                                fleet.registry_plain_http, fleet.registry_ca)
        manifest = pull_into_store(store, args.reference, access)
        if args.activate:
            store.set_active(manifest.version)
        if args.json:
            print(json.dumps({"reference": args.reference, "version": manifest.version, "signer": str(manifest.signer),
                              "store": str(store.root), "active": bool(args.activate)}))
        else:
            print(f"stored {manifest.version} (signer {str(manifest.signer)[:16]}) in {store.root}")
            if args.activate:
                print(f"active {manifest.version}")
    except VkocrError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
