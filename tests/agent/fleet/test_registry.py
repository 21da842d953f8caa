"""Bundles as OCI artifacts in a real registry (Debian's docker-registry on loopback): `vkocr bundle push` prints
the reference by digest; a pull checks the manifest's and the bundle's digests before anything else."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.agent.bundles.conftest import KeyPair
from tests.agent.fleet.brokers import REGISTRY, registry
from tests.agent.fleet.conftest import Bundles
from vkocr.agent.fleet.errors import RegistryError
from vkocr.agent.fleet.oci import MANIFEST_TYPE, Reference, Registry, RegistryAccess

pytestmark = pytest.mark.skipif(not Path(REGISTRY).exists(), reason="docker-registry (./test.sh installs it)")
PLAIN = RegistryAccess(plain_http=True)


@pytest.fixture(scope="module")
def oci(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with registry(tmp_path_factory.mktemp("registry")) as host:
        yield host


def push(bundle: Path, target: str) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-m", "vkocr.agent.cli.main", "bundle", "push", str(bundle), target,
                           "--plain-http", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer: dict[str, str] = json.loads(done.stdout)
    return answer


def test_push_prints_the_digest_and_a_pull_by_digest_gives_the_same_bytes(oci: str, bundles: Bundles,
                                                                         tmp_path: Path) -> None:
    pushed = push(bundles.v1, f"{oci}/ocr/labels:1.0.0")
    assert pushed["version"] == "1.0.0" and pushed["reference"] == f"{oci}/ocr/labels@{pushed['digest']}"
    with Registry(oci, PLAIN) as reg:
        assert reg.resolve(Reference.parse(f"{oci}/ocr/labels:1.0.0")) == pushed["digest"]
        out = reg.pull_bundle(Reference.parse(pushed["reference"]), tmp_path / "pulled.vkb", 64 << 20)
    assert out.read_bytes() == bundles.v1.read_bytes()


def put_manifest(oci: str, repository: str, manifest: dict[str, object]) -> str:
    raw = json.dumps(manifest).encode()
    answer = requests.put(f"http://{oci}/v2/{repository}/manifests/odd", data=raw, timeout=10,
                          headers={"Content-Type": MANIFEST_TYPE})
    assert answer.status_code == 201, answer.text
    return str(answer.headers["Docker-Content-Digest"])


def test_a_layer_that_is_not_what_the_manifest_says_is_refused(oci: str, bundles: Bundles, tmp_path: Path) -> None:
    """A manifest (stored as it is by the registry) whose layer descriptor claims one byte more than the blob
    holds: the download does not match, and nothing stays on disk."""
    pushed = push(bundles.v1, f"{oci}/ocr/labels:1.0.0")
    with Registry(oci, PLAIN) as reg:
        good = requests.get(f"http://{oci}/v2/ocr/labels/manifests/{pushed['digest']}", timeout=10,
                            headers={"Accept": MANIFEST_TYPE}).json()
        good["layers"][0]["size"] += 1
        odd = put_manifest(oci, "ocr/labels", good)
        with pytest.raises(RegistryError, match="is not sha256:"):
            reg.pull_bundle(Reference.parse(f"{oci}/ocr/labels@{odd}"), tmp_path / "x.vkb", 64 << 20)
        assert not (tmp_path / "x.vkb").exists()
        good["layers"][0]["size"] -= 1
        good["artifactType"] = "application/vnd.example.other"
        other = put_manifest(oci, "ocr/labels", good)
        with pytest.raises(RegistryError, match="is not a vkocr bundle"):
            reg.pull_bundle(Reference.parse(f"{oci}/ocr/labels@{other}"), tmp_path / "x.vkb", 64 << 20)
        with pytest.raises(RegistryError, match="names no digest"):
            reg.pull_bundle(Reference.parse(f"{oci}/ocr/labels:1.0.0"), tmp_path / "x.vkb", 64 << 20)


def test_a_bundle_larger_than_allowed_is_not_downloaded(oci: str, bundles: Bundles, tmp_path: Path) -> None:
    pushed = push(bundles.v1, f"{oci}/ocr/labels:1.0.0")
    with Registry(oci, PLAIN) as reg, pytest.raises(RegistryError, match="max_bundle_bytes"):
        reg.pull_bundle(Reference.parse(pushed["reference"]), tmp_path / "x.vkb", 1000)
    assert not (tmp_path / "x.vkb").exists()


def test_an_unsigned_bundle_or_a_bad_reference_is_refused_naming_it(oci: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "vkocr.agent.cli.main", "bundle", "push", str(tmp_path / "none.vkb"),
                           "no-repository", "--plain-http"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "not an OCI reference" in done.stderr


def test_bundle_pull_stores_and_activates_and_refuses_an_older_version(oci: str, bundles: Bundles,
                                                                      release_key: KeyPair, tmp_path: Path) -> None:
    """`vkocr bundle pull` (the Kubernetes init container's step) into a store, with the agent's config."""
    config = tmp_path / "agent.toml"
    config.write_text(f'[models]\nstore = "store"\ntrusted_keys = ["{release_key.public_path}"]\n'
                      f"max_bundle_bytes = {64 << 20}\n[fleet]\nregistry_plain_http = true\n")
    v3, v1 = push(bundles.v3, f"{oci}/ocr/labels:3.0.0"), push(bundles.v1, f"{oci}/ocr/labels:1.0.0")
    pull = [sys.executable, "-m", "vkocr.agent.cli.main", "bundle", "pull", "--config", str(config), "--activate"]
    done = subprocess.run([*pull, v3["reference"]], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "stored 3.0.0" in done.stdout and "active 3.0.0" in done.stdout
    assert (tmp_path / "store" / "active").read_text().strip() == "3.0.0"
    done = subprocess.run([*pull, v1["reference"]], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "older than 3.0.0" in done.stderr and "nothing was installed" in done.stderr
    assert sorted(p.name for p in (tmp_path / "store" / "versions").iterdir()) == ["3.0.0"]
