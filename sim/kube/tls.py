"""A throwaway self-signed certificate for `--tls`, because kubectl (client-go) sends a
kubeconfig's bearer token only over TLS (kubernetes/kubectl#744): over plain http it
silently omits the Authorization header and every request is a 401.

The certificate is made at start for 127.0.0.1 and localhost, lives one day, and is
written next to the kubeconfig as its `certificate-authority-data`, so kubectl and the
Python client trust exactly this simulator and nothing else. Plain http stays the
default: the Python client sends tokens over http and it is one less moving part.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class ServerCertificate:
    cert_pem: bytes
    key_pem: bytes

    def server_context(self, scratch: Path) -> ssl.SSLContext:
        cert_file, key_file = scratch / "sim-cert.pem", scratch / "sim-key.pem"
        cert_file.write_bytes(self.cert_pem)
        key_file.touch(mode=0o600)
        key_file.write_bytes(self.key_pem)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_file, key_file)
        return context


def self_signed(host: str) -> ServerCertificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pyccm-kube-sim")])
    now = datetime.datetime.now(datetime.UTC)
    alternative_names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    try:
        alternative_names.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        alternative_names.append(x509.DNSName(host))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alternative_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return ServerCertificate(
        cert_pem=certificate.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="pyccm-kube-sim-tls-"))
