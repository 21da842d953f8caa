"""TLS and mutual TLS credentials from PEM files, and who the client is.

Files are read and parsed here, at start-up, so a missing file, a key that is not a key or a key that does not
belong to its certificate is one clear error naming the path instead of a failed handshake later.
"""

from __future__ import annotations

from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from vkocr.agent.serving.errors import TlsFileError


def server_credentials(
    cert: Path, key: Path, client_ca: Path | None = None, require_client_cert: bool | None = None
) -> grpc.ServerCredentials:
    """Server credentials: TLS with ``cert``/``key``; with ``client_ca``, mutual TLS: every client must
    present a certificate signed by that CA. ``require_client_cert`` (default: whether ``client_ca`` is given)
    can only agree: gRPC Python either requires and verifies a client certificate or never asks for one (it
    has no "optional" mode; with ``client_ca`` and no requirement it would silently ask for nothing)."""
    if require_client_cert is None:
        require_client_cert = client_ca is not None
    if require_client_cert and client_ca is None:
        raise ValueError("require_client_cert needs client_ca: the CA that signs client certificates")
    if client_ca is not None and not require_client_cert:
        raise ValueError("client_ca without require_client_cert: gRPC Python cannot ask for an optional "
                         "client certificate; leave client_ca out for plain TLS")
    cert_pem, key_pem = _certificate_and_key(cert, key)
    ca_pem = _certificates(client_ca) if client_ca is not None else None
    return grpc.ssl_server_credentials(
        [(key_pem, cert_pem)], root_certificates=ca_pem, require_client_auth=require_client_cert
    )


def channel_credentials(
    ca: Path | None, cert: Path | None = None, key: Path | None = None
) -> grpc.ChannelCredentials:
    """Client credentials: trust ``ca`` (None: the system's roots); ``cert`` and ``key`` (both or neither)
    identify this client to a mutual-TLS server."""
    if (cert is None) != (key is None):
        raise ValueError("a client certificate needs its key and a key its certificate: give both or neither")
    ca_pem = _certificates(ca) if ca is not None else None
    if cert is None or key is None:
        return grpc.ssl_channel_credentials(root_certificates=ca_pem)
    cert_pem, key_pem = _certificate_and_key(cert, key)
    return grpc.ssl_channel_credentials(
        root_certificates=ca_pem, private_key=key_pem, certificate_chain=cert_pem
    )


def peer_identity(context: grpc.ServicerContext) -> str | None:
    """The calling client's certificate subject: its common name, else its whole subject; None without a
    verified client certificate (plaintext, or TLS where the client sent none)."""
    auth = context.auth_context() or {}
    for key in ("x509_common_name", "x509_subject"):
        values = auth.get(key)
        if values:
            value = values[0]
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return None


# --- files --------------------------------------------------------------------------------------------------


def _read(path: Path) -> bytes:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise TlsFileError(path, "does not exist") from None
    except IsADirectoryError:
        raise TlsFileError(path, "is a directory") from None
    except OSError as exc:
        raise TlsFileError(path, f"cannot be read: {exc.strerror or exc}") from None
    if not data.strip():
        raise TlsFileError(path, "is empty")
    return data


def _certificates(path: Path) -> bytes:
    data = _read(path)
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise TlsFileError(path, f"is not a PEM certificate ({exc})") from None
    return data


def _certificate_and_key(cert: Path, key: Path) -> tuple[bytes, bytes]:
    cert_pem = _certificates(cert)
    key_pem = _read(key)
    try:
        private_key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:  # TypeError: the key is encrypted
        raise TlsFileError(key, f"is not an unencrypted PEM private key ({exc})") from None
    leaf = x509.load_pem_x509_certificates(cert_pem)[0]
    raw = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if private_key.public_key().public_bytes(*raw) != leaf.public_key().public_bytes(*raw):
        raise TlsFileError(key, f"does not belong to the certificate in {str(cert)!r}")
    return cert_pem, key_pem
