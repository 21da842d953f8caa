"""`vkocr bundle push BUNDLE REGISTRY/REPOSITORY:TAG`: store a signed bundle as an OCI artifact in any OCI
distribution registry (agent/fleet/oci.py) and print its digest, what `vkocr fleet rollout` and the boards pull by.
Credentials: --user, and the password from $VKOCR_REGISTRY_PASSWORD (never a flag: it would show in `ps`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from vkocr.errors import VkocrError


def add_push_parser(sub: Any) -> None:
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
