"""Bundles as OCI artifacts: pushed to and pulled from any OCI distribution registry (Harbor, GHCR, ECR, a local
`registry`) through the distribution spec's HTTP API.

An artifact is one image manifest (artifactType BUNDLE_ARTIFACT_TYPE) whose config is the empty descriptor and whose
one layer is the bundle file as it is (BUNDLE_LAYER_TYPE, titled with its file name). A board pulls by digest: the
manifest's bytes must hash to the digest asked for and the layer's bytes to the digest the manifest names, before
anything else looks at them (our signature and manifest checks come after, in agent/bundles).

Authentication: HTTP basic with the configured user and password, or, when the registry answers with a Bearer
challenge (Docker Hub, GHCR, Harbor), a token fetched from the realm it names with those credentials.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from vkocr.agent.fleet.errors import RegistryError
from vkocr.log import get_logger

log = get_logger(__name__)

BUNDLE_ARTIFACT_TYPE = "application/vnd.vkocr.bundle.v1"
BUNDLE_LAYER_TYPE = "application/vnd.vkocr.bundle.v1.tar+gzip"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
EMPTY_CONFIG = b"{}"
EMPTY_CONFIG_TYPE = "application/vnd.oci.empty.v1+json"
CHUNK_BYTES = 1 << 20
TIMEOUT_S = 60.0
MAX_MANIFEST_BYTES = 4 << 20  # what the distribution spec lets registries refuse beyond

# host[:port]/repository[:tag][@sha256:…]; the repository: lower-case path components (distribution spec)
REFERENCE = re.compile(r"(?P<host>[A-Za-z0-9.-]+(?::[0-9]+)?|\[[0-9a-fA-F:]+\](?::[0-9]+)?)/"
                       r"(?P<repo>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
                       r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?"
                       r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?")


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Reference:
    """REGISTRY/REPOSITORY[:TAG][@DIGEST], e.g. registry.example.com:5000/ocr/labels@sha256:…"""

    host: str
    repository: str
    tag: str = ""
    digest: str = ""

    @classmethod
    def parse(cls, text: str) -> Reference:
        match = REFERENCE.fullmatch(text.strip())
        if match is None:
            raise RegistryError(f"{text!r} is not an OCI reference REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST] "
                                "(e.g. registry.example.com/ocr/labels:2.3.0)")
        return cls(match["host"], match["repo"], match["tag"] or "", match["digest"] or "")

    def by_digest(self, digest: str) -> Reference:
        return Reference(self.host, self.repository, "", digest)

    def __str__(self) -> str:
        return f"{self.host}/{self.repository}" + (f":{self.tag}" if self.tag else "") + \
            (f"@{self.digest}" if self.digest else "")


@dataclass(frozen=True)
class RegistryAccess:
    """How to reach registries: credentials (from [fleet] registry_user/registry_password_file), plain HTTP (a
    registry on a trusted network or loopback only) and a CA bundle for TLS."""

    user: str = ""
    password: str = ""
    plain_http: bool = False
    ca: str = ""  # PEM; empty: the system's trust store


class Registry:
    """One registry host; `push_bundle` and `pull_bundle` are the two things a fleet needs of it."""

    def __init__(self, host: str, access: RegistryAccess) -> None:
        self.host = host
        self.access = access
        self.base = f"{'http' if access.plain_http else 'https'}://{host}/v2"
        self.session = requests.Session()
        self.session.verify = access.ca or True
        if access.user:
            self.session.auth = (access.user, access.password)
        self._token = ""

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- HTTP, with the Bearer challenge ---------------------------------------------------------------------

    def _request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        headers = dict(kwargs.pop("headers", {}))
        for attempt in range(2):
            if self._token:
                headers["Authorization"] = f"Bearer {self._token}"
            try:
                response = self.session.request(method, url, headers=headers, timeout=TIMEOUT_S, **kwargs)
            except requests.RequestException as exc:
                raise RegistryError(f"registry {self.host}: {exc}") from exc
            challenge = response.headers.get("WWW-Authenticate", "")
            if response.status_code == 401 and attempt == 0 and challenge.lower().startswith("bearer "):
                self._token = self._fetch_token(challenge)
                continue
            return response
        return response

    def _fetch_token(self, challenge: str) -> str:
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = params.pop("realm", "")
        if not realm:
            raise RegistryError(f"registry {self.host} asked for a token without naming where to get one")
        try:
            answer = self.session.get(realm, params=params, timeout=TIMEOUT_S)
        except requests.RequestException as exc:
            raise RegistryError(f"registry {self.host}: token from {realm}: {exc}") from exc
        if answer.status_code != 200:
            raise RegistryError(f"registry {self.host}: token from {realm} refused ({answer.status_code}); check "
                                "[fleet] registry_user and registry_password_file")
        body = answer.json()
        return str(body.get("token") or body.get("access_token") or "")

    def _check(self, response: requests.Response, what: str, *ok: int) -> requests.Response:
        if response.status_code not in ok:
            detail = response.text[:300].strip()
            hint = " (check [fleet] registry_user and registry_password_file)" if response.status_code in (401, 403) \
                else ""
            raise RegistryError(f"registry {self.host}: {what} failed: HTTP {response.status_code}{hint}"
                                + (f": {detail}" if detail else ""))
        return response

    # --- push ------------------------------------------------------------------------------------------------

    def _has_blob(self, repository: str, digest: str) -> bool:
        return self._request("HEAD", f"{self.base}/{repository}/blobs/{digest}").status_code == 200

    def _push_blob(self, repository: str, data: bytes, digest: str) -> None:
        if self._has_blob(repository, digest):
            return
        started = self._check(self._request("POST", f"{self.base}/{repository}/blobs/uploads/"),
                              f"starting the upload of {digest}", 202)
        location = started.headers.get("Location", "")
        if location.startswith("/"):
            location = self.base[: -len("/v2")] + location
        separator = "&" if "?" in location else "?"
        self._check(self._request("PUT", f"{location}{separator}digest={digest}", data=data,
                                  headers={"Content-Type": "application/octet-stream"}),
                    f"uploading {digest}", 201)

    def push_bundle(self, bundle: Path, reference: Reference, annotations: dict[str, str]) -> str:
        """Store `bundle` under `reference` (its tag); return the manifest's digest, what boards pull by."""
        data = Path(bundle).read_bytes()
        layer_digest = sha256_digest(data)
        self._push_blob(reference.repository, EMPTY_CONFIG, sha256_digest(EMPTY_CONFIG))
        self._push_blob(reference.repository, data, layer_digest)
        manifest = {
            "schemaVersion": 2, "mediaType": MANIFEST_TYPE, "artifactType": BUNDLE_ARTIFACT_TYPE,
            "config": {"mediaType": EMPTY_CONFIG_TYPE, "digest": sha256_digest(EMPTY_CONFIG),
                       "size": len(EMPTY_CONFIG), "data": "e30="},
            "layers": [{"mediaType": BUNDLE_LAYER_TYPE, "digest": layer_digest, "size": len(data),
                        "annotations": {"org.opencontainers.image.title": Path(bundle).name}}],
            "annotations": annotations,
        }
        raw = json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
        digest = sha256_digest(raw)
        self._check(self._request("PUT", f"{self.base}/{reference.repository}/manifests/{reference.tag or digest}",
                                  data=raw, headers={"Content-Type": MANIFEST_TYPE}), "storing the manifest", 201)
        log.info("oci_bundle_pushed", reference=str(reference), digest=digest, bytes=len(data))
        return digest

    # --- pull ------------------------------------------------------------------------------------------------

    def resolve(self, reference: Reference) -> str:
        """The digest a tag names now."""
        response = self._check(self._request("HEAD", f"{self.base}/{reference.repository}/manifests/"
                                             f"{reference.digest or reference.tag or 'latest'}",
                                             headers={"Accept": MANIFEST_TYPE}), f"resolving {reference}", 200)
        return str(response.headers.get("Docker-Content-Digest", ""))

    def describe(self, reference: Reference) -> tuple[str, dict[str, str]]:
        """The digest of the bundle artifact `reference` names (a tag is resolved now) and its annotations
        (version, signer: what `vkocr bundle push` wrote; the boards verify the bundle itself)."""
        response = self._check(self._request("GET", f"{self.base}/{reference.repository}/manifests/"
                                             f"{reference.digest or reference.tag or 'latest'}",
                                             headers={"Accept": MANIFEST_TYPE}), f"fetching {reference}", 200)
        raw = response.content[:MAX_MANIFEST_BYTES + 1]
        digest = sha256_digest(raw)
        if len(raw) > MAX_MANIFEST_BYTES or (reference.digest and digest != reference.digest):
            raise RegistryError(f"the manifest registry {self.host} sent for {reference} does not match its "
                                "digest")
        manifest = json.loads(raw)
        _bundle_layer(manifest, reference)
        return digest, {str(k): str(v) for k, v in (manifest.get("annotations") or {}).items()}

    def pull_bundle(self, reference: Reference, out: Path, max_bytes: int) -> Path:
        """Download the bundle that `reference` (which must name a digest) holds to `out`. RegistryError when
        the manifest or the layer is not what the digest says, is no bundle, or is larger than `max_bytes`."""
        if not reference.digest:
            raise RegistryError(f"{reference} names no digest; boards pull by digest only")
        response = self._check(self._request("GET", f"{self.base}/{reference.repository}/manifests/"
                                             f"{reference.digest}", headers={"Accept": MANIFEST_TYPE}),
                               f"fetching the manifest of {reference}", 200)
        raw = response.content[:MAX_MANIFEST_BYTES + 1]
        if len(raw) > MAX_MANIFEST_BYTES or sha256_digest(raw) != reference.digest:
            raise RegistryError(f"the manifest registry {self.host} sent for {reference} does not match its "
                                "digest; nothing was installed")
        layer = _bundle_layer(json.loads(raw), reference)
        if int(layer["size"]) > max_bytes:
            raise RegistryError(f"{reference}: the bundle is {layer['size']} bytes; at most {max_bytes} "
                                "([models] max_bundle_bytes)")
        self._download(reference.repository, str(layer["digest"]), int(layer["size"]), out)
        log.info("oci_bundle_pulled", reference=str(reference), bytes=layer["size"])
        return out

    def _download(self, repository: str, digest: str, size: int, out: Path) -> None:
        hasher, received = hashlib.sha256(), 0
        url = f"{self.base}/{repository}/blobs/{digest}"
        with self._request("GET", url, stream=True) as response:
            self._check(response, f"fetching {digest}", 200)
            with out.open("wb") as f:
                for chunk in response.iter_content(CHUNK_BYTES):
                    received += len(chunk)
                    if received > size:
                        break
                    hasher.update(chunk)
                    f.write(chunk)
        if received != size or "sha256:" + hasher.hexdigest() != digest:
            out.unlink(missing_ok=True)
            raise RegistryError(f"the bundle registry {self.host} sent is not {digest} ({received} bytes, "
                                f"{size} expected); nothing was installed")


def _bundle_layer(manifest: Any, reference: Reference) -> dict[str, Any]:
    layers = manifest.get("layers") if isinstance(manifest, dict) else None
    if manifest.get("artifactType") != BUNDLE_ARTIFACT_TYPE or not isinstance(layers, list) or len(layers) != 1 \
            or layers[0].get("mediaType") != BUNDLE_LAYER_TYPE:
        raise RegistryError(f"{reference} is not a vkocr bundle (artifactType {BUNDLE_ARTIFACT_TYPE}, one layer "
                            f"{BUNDLE_LAYER_TYPE}); push it with `vkocr bundle push`")
    layer: dict[str, Any] = layers[0]
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", str(layer.get("digest"))) or not isinstance(layer.get("size"), int):
        raise RegistryError(f"{reference}: the manifest's layer has no valid digest and size")
    return layer
