"""A throw-away PKI for TLS tests: a CA, a server certificate for localhost/127.0.0.1, a client certificate.

EC P-256 keys, so making one takes milliseconds.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class TlsFiles:
    """Paths of one PKI's PEM files, and the common name in the client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_cn: str
    other_client_cert: Path | None = None  # a second client of the same CA, when asked for
    other_client_key: Path | None = None
    other_client_cn: str | None = None


def make_tls_files(folder: Path, client_cn: str = "line-7-controller", other_client_cn: str | None = None
                   ) -> TlsFiles:
    """Write a new CA and a server and a client certificate signed by it into ``folder``; with
    ``other_client_cn``, a second client certificate (``other-client.pem``/``.key``) of the same CA."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"vkocr test CA {folder.name}")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_ca_usage(), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_key, server_cert = _leaf(ca_cert, ca_key, "localhost", ExtendedKeyUsageOID.SERVER_AUTH)
    client_key, client_cert = _leaf(ca_cert, ca_key, client_cn, ExtendedKeyUsageOID.CLIENT_AUTH)
    files = TlsFiles(folder / "ca.pem", folder / "server.pem", folder / "server.key", folder / "client.pem",
                     folder / "client.key", client_cn)
    if other_client_cn is not None:
        other_key, other_cert = _leaf(ca_cert, ca_key, other_client_cn, ExtendedKeyUsageOID.CLIENT_AUTH)
        files = dataclasses.replace(files, other_client_cert=folder / "other-client.pem",
                                    other_client_key=folder / "other-client.key", other_client_cn=other_client_cn)
        (folder / "other-client.pem").write_bytes(other_cert.public_bytes(serialization.Encoding.PEM))
        (folder / "other-client.key").write_bytes(_key_pem(other_key))
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.server_cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    files.server_key.write_bytes(_key_pem(server_key))
    files.client_cert.write_bytes(client_cert.public_bytes(serialization.Encoding.PEM))
    files.client_key.write_bytes(_key_pem(client_key))
    return files


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
    )


def _ca_usage() -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                         data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                         encipher_only=False, decipher_only=False)


def _leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    usage: x509.ObjectIdentifier,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "vkocr tests")])
    builder = (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if usage == ExtendedKeyUsageOID.SERVER_AUTH:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
