"""vkocr.agent.serving.tls against real gRPC handshakes on loopback: TLS with our CA, mutual TLS refusing clients
without a certificate or with one from another CA, the client's common name seen by the server, clear file errors."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from tests.agent.certs import TlsFiles, make_tls_files
from vkocr.agent.serving.errors import TlsFileError
from vkocr.agent.serving.tls import channel_credentials, peer_identity, server_credentials


def _identity(_request: bytes, context: grpc.ServicerContext) -> bytes:
    who = peer_identity(context)
    return b"<none>" if who is None else who.encode()


@contextmanager
def identity_server(creds: grpc.ServerCredentials | None) -> Iterator[int]:
    """A loopback server whose one method answers with peer_identity (plaintext when ``creds`` is None)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler(
        "test.Who", {"Identity": grpc.unary_unary_rpc_method_handler(_identity)}
    )
    server.add_generic_rpc_handlers((handler,))
    if creds is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    try:
        yield port
    finally:
        server.stop(None)


def ask(port: int, creds: grpc.ChannelCredentials, host: str = "localhost") -> str:
    with grpc.secure_channel(f"{host}:{port}", creds) as channel:
        return bytes(channel.unary_unary("/test.Who/Identity")(b"", timeout=5)).decode()


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("other-pki"), client_cn="stranger")


def test_tls_with_our_ca(tls_files: TlsFiles) -> None:
    with identity_server(server_credentials(tls_files.server_cert, tls_files.server_key)) as port:
        assert ask(port, channel_credentials(tls_files.ca)) == "<none>"
        assert ask(port, channel_credentials(tls_files.ca), host="127.0.0.1") == "<none>"  # IP SAN


def test_tls_refuses_a_server_from_another_ca(tls_files: TlsFiles, other_pki: TlsFiles) -> None:
    creds = server_credentials(tls_files.server_cert, tls_files.server_key)
    with identity_server(creds) as port, pytest.raises(grpc.RpcError) as info:
        ask(port, channel_credentials(other_pki.ca))
    assert info.value.code() is grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_names_the_client_and_refuses_others(tls_files: TlsFiles, other_pki: TlsFiles) -> None:
    creds = server_credentials(tls_files.server_cert, tls_files.server_key, client_ca=tls_files.ca)
    with identity_server(creds) as port:
        client = channel_credentials(tls_files.ca, tls_files.client_cert, tls_files.client_key)
        assert ask(port, client) == tls_files.client_cn == "line-7-controller"
        with pytest.raises(grpc.RpcError) as no_cert:
            ask(port, channel_credentials(tls_files.ca))
        stranger = channel_credentials(tls_files.ca, other_pki.client_cert, other_pki.client_key)
        with pytest.raises(grpc.RpcError) as wrong_ca:
            ask(port, stranger)
    assert no_cert.value.code() is grpc.StatusCode.UNAVAILABLE
    assert wrong_ca.value.code() is grpc.StatusCode.UNAVAILABLE


def test_plaintext_has_no_identity() -> None:
    with identity_server(None) as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        assert channel.unary_unary("/test.Who/Identity")(b"", timeout=5) == b"<none>"


def test_missing_unreadable_and_wrong_files_name_the_path(tls_files: TlsFiles, other_pki: TlsFiles,
                                                         tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(TlsFileError, match="nope.pem.*does not exist") as info:
        server_credentials(missing, tls_files.server_key)
    assert info.value.path == missing
    with pytest.raises(TlsFileError, match="is a directory") as info:
        channel_credentials(tmp_path)
    assert info.value.path == tmp_path
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("hello")
    with pytest.raises(TlsFileError, match="not a PEM certificate"):
        channel_credentials(not_pem)
    with pytest.raises(TlsFileError, match="not an unencrypted PEM private key") as info:
        server_credentials(tls_files.server_cert, tls_files.server_cert)  # a certificate where the key goes
    assert info.value.path == tls_files.server_cert
    with pytest.raises(TlsFileError, match="does not belong to the certificate") as info:
        server_credentials(tls_files.server_cert, other_pki.server_key)
    assert info.value.path == other_pki.server_key
    empty = tmp_path / "empty.pem"
    empty.write_bytes(b"")
    with pytest.raises(TlsFileError, match="is empty"):
        channel_credentials(tls_files.ca, empty, tls_files.client_key)


def test_inconsistent_arguments_are_refused(tls_files: TlsFiles) -> None:
    with pytest.raises(ValueError, match="needs client_ca"):
        server_credentials(tls_files.server_cert, tls_files.server_key, require_client_cert=True)
    with pytest.raises(ValueError, match="optional client certificate"):
        # gRPC Python would ask for no certificate at all: refusing beats a silent plain-TLS server.
        server_credentials(tls_files.server_cert, tls_files.server_key, tls_files.ca,
                           require_client_cert=False)
    with pytest.raises(ValueError, match="both or neither"):
        channel_credentials(tls_files.ca, cert=tls_files.client_cert)
