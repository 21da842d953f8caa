"""Model management needs an authorised identity; OCR, status and health stay open to every client.

Real agents over loopback: plaintext without the development flag, mutual TLS with an allowlist (a listed and
an unlisted client certificate of the same CA), TLS without client certificates."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from tests.agent.bundles.conftest import KeyPair
from tests.agent.certs import TlsFiles, make_tls_files
from tests.agent.fleet.conftest import Bundles
from tests.agent.fleet.fleet_agents import WORD, read_word, seed_store, store_agent, store_config
from vkocr.agent.serving.auth import decide, peer_is_loopback
from vkocr.agent.serving.background import BackgroundAgent
from vkocr.agent.serving.client import OcrClient
from vkocr.v1 import models_pb2

OPERATOR = "fleet-operator"

MODEL_CALLS: dict[str, Callable[[OcrClient], object]] = {
    "UploadBundle": lambda c: c.models.UploadBundle(iter([models_pb2.UploadBundleRequest(
        upload_id="x", offset=0, data=b"bundle", total_size=6, sha256="0" * 64)]), timeout=10),
    "UploadStatus": lambda c: c.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id="x"), timeout=10),
    "Activate": lambda c: c.models.Activate(models_pb2.ActivateRequest(version="1.0.0"), timeout=10),
    "Rollback": lambda c: c.models.Rollback(models_pb2.RollbackRequest(), timeout=10),
    "ListBundles": lambda c: c.models.ListBundles(models_pb2.ListBundlesRequest(), timeout=10),
    "DeleteBundle": lambda c: c.models.DeleteBundle(models_pb2.DeleteBundleRequest(version="1.0.0"), timeout=10),
}


def refusals(client: OcrClient) -> dict[str, tuple[grpc.StatusCode, str]]:
    out = {}
    for name, call in MODEL_CALLS.items():
        with pytest.raises(grpc.RpcError) as info:
            call(client)
        out[name] = (info.value.code(), info.value.details() or "")
    return out


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("fleet-pki"), client_cn="line-7-controller",
                          other_client_cn=OPERATOR)


@pytest.fixture(scope="module")
def mtls_agent(tmp_path_factory: pytest.TempPathFactory, release_key: KeyPair, bundles: Bundles,
               pki: TlsFiles) -> Iterator[BackgroundAgent]:
    root = tmp_path_factory.mktemp("mtls-store")
    seed_store(root, release_key, bundles.v1)
    config = store_config(root, release_key, **{
        "tls.cert": str(pki.server_cert), "tls.key": str(pki.server_key), "tls.client_ca": str(pki.ca),
        "auth.allowed_subjects": [OPERATOR], "auth.dev_allow_loopback": False})
    with store_agent(config) as background:
        yield background


def test_plaintext_without_the_development_flag_refuses_model_management(
        tmp_path: Path, release_key: KeyPair, bundles: Bundles) -> None:
    seed_store(tmp_path / "store", release_key, bundles.v1)
    config = store_config(tmp_path / "store", release_key, **{"auth.dev_allow_loopback": False})
    with store_agent(config) as background, OcrClient(background.target) as client:
        for name, (code, details) in refusals(client).items():
            assert code is grpc.StatusCode.PERMISSION_DENIED, name
            assert "needs mutual TLS" in details and "dev_allow_loopback = true" in details, name
        assert read_word(client, WORD) == (WORD, "1.0.0")
        assert client.health() == "SERVING"
        assert client.status(timeout=10).model_version == "1.0.0"
    assert (tmp_path / "store" / "active").read_text() == "1.0.0\n"
    assert not list((tmp_path / "store" / "uploads").iterdir())


def test_mutual_tls_allows_listed_subjects_only(mtls_agent: BackgroundAgent, pki: TlsFiles) -> None:
    assert pki.other_client_cert is not None and pki.other_client_key is not None
    with OcrClient(mtls_agent.target, ca=pki.ca, cert=pki.client_cert, key=pki.client_key) as stranger:
        for name, (code, details) in refusals(stranger).items():
            assert code is grpc.StatusCode.PERMISSION_DENIED, name
            assert "subject 'line-7-controller' may not manage models" in details, name
        assert read_word(stranger, WORD) == (WORD, "1.0.0")  # OCR stays open to every client
        assert stranger.health() == "SERVING"
    with OcrClient(mtls_agent.target, ca=pki.ca, cert=pki.other_client_cert, key=pki.other_client_key) as operator:
        listed = operator.models.ListBundles(models_pb2.ListBundlesRequest(), timeout=10)
        assert listed.active_version == "1.0.0"
        held = operator.models.UploadStatus(models_pb2.UploadStatusRequest(upload_id="x"), timeout=10)
        assert held.received == 0


def test_tls_without_a_client_certificate_is_unauthenticated(tmp_path: Path, release_key: KeyPair,
                                                            pki: TlsFiles) -> None:
    """Server-only TLS: the client is anonymous. (An empty store: the agent is up, in state FAILED.)"""
    config = store_config(tmp_path / "store", release_key, **{
        "tls.cert": str(pki.server_cert), "tls.key": str(pki.server_key),
        "auth.allowed_subjects": [OPERATOR], "auth.dev_allow_loopback": False})
    with store_agent(config, wait_serving=False) as background, OcrClient(background.target, ca=pki.ca) as client:
        for name, (code, details) in refusals(client).items():
            assert code is grpc.StatusCode.UNAUTHENTICATED, name
            assert "needs a client certificate" in details, name


@pytest.mark.parametrize("peer, loopback", [
    ("ipv4:127.0.0.1:50123", True), ("ipv4:127.8.9.1:1", True), ("ipv6:[::1]:50123", True),
    ("ipv4:10.0.4.11:50123", False), ("ipv6:[fe80::1]:5", False), ("unix:/run/vkocr.sock", False), ("", False),
])
def test_loopback_peers(peer: str, loopback: bool) -> None:
    assert peer_is_loopback(peer) is loopback


def test_the_development_flag_never_admits_a_remote_peer(tmp_path: Path, release_key: KeyPair) -> None:
    config = store_config(tmp_path / "store", release_key)
    assert config.auth.dev_allow_loopback
    assert decide(config, "ipv4:127.0.0.1:4000", None).allowed
    assert not decide(config, "ipv4:10.0.4.11:4000", None).allowed
    assert not decide(config, "ipv4:10.0.4.11:4000", OPERATOR).allowed  # plaintext: a subject means nothing
