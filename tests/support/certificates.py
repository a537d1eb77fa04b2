"""Certificates as an operator's PKI would issue them: a CA, a server certificate it signed,
client certificates naming a user (CN) and groups (O), as kube-apiserver reads them."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Key = ec.EllipticCurvePrivateKey


def _pem_key(key: Key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _certificate(
    subject: x509.Name,
    key: Key,
    issuer: tuple[x509.Name, Key] | None,
    *,
    ca: bool,
    usage: x509.ObjectIdentifier | None = None,
    names: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _name(common_name: str, *organizations: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations),
        ]
    )


def issue_pair(directory: Path, *, common_name: str) -> tuple[Path, Path, Path]:
    """A CA and a server certificate it signed for localhost and 127.0.0.1: the files
    (ca.crt, server.crt, server.key) an operator would mount."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{common_name}-ca")
    ca = _certificate(ca_name, ca_key, None, ca=True)
    names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    server = _certificate(
        _name(common_name),
        key,
        (ca_name, ca_key),
        ca=False,
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        names=names,
    )
    paths = directory / "ca.crt", directory / "server.crt", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(_pem_key(key))
    return paths


def issue_client(
    directory: Path, ca_files: tuple[Path, Path] | None, user: str, *groups: str
) -> tuple[Path, Path]:
    """A client certificate for `user` in `groups`, signed by the CA in `ca_files` (cert,
    key), or self-signed when None."""
    key = ec.generate_private_key(ec.SECP256R1())
    issuer = None
    if ca_files is not None:
        ca = x509.load_pem_x509_certificate(ca_files[0].read_bytes())
        ca_key = serialization.load_pem_private_key(ca_files[1].read_bytes(), None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        issuer = (ca.subject, ca_key)
    certificate = _certificate(
        _name(user, *groups), key, issuer, ca=False, usage=ExtendedKeyUsageOID.CLIENT_AUTH
    )
    cert, key_file = directory / f"{user}.crt", directory / f"{user}.key"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(_pem_key(key))
    return cert, key_file


def client_ca(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate(_name("clients-ca"), key, None, ca=True)
    paths = directory / "clients-ca.crt", directory / "clients-ca.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(_pem_key(key))
    return paths
