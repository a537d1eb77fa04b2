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
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pyccm import selfsigned


@dataclass(frozen=True)
class ServerCertificate:
    cert_pem: bytes
    key_pem: bytes

    def server_context(self, scratch: Path, client_ca: Path | None = None) -> ssl.SSLContext:
        """With `client_ca`, a client may present a certificate it signed (none is required:
        tokens still work), as kube-apiserver's --client-ca-file."""
        cert_file, key_file = scratch / "sim-cert.pem", scratch / "sim-key.pem"
        cert_file.write_bytes(self.cert_pem)
        key_file.touch(mode=0o600)
        key_file.write_bytes(self.key_pem)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_file, key_file)
        if client_ca is not None:
            context.load_verify_locations(client_ca)
            context.verify_mode = ssl.CERT_OPTIONAL
        return context


def self_signed(host: str) -> ServerCertificate:
    cert_pem, key_pem = selfsigned.self_signed(
        "pyccm-kube-sim", [selfsigned.host_name(host)], lifetime=datetime.timedelta(days=1)
    )
    return ServerCertificate(cert_pem=cert_pem, key_pem=key_pem)


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="pyccm-kube-sim-tls-"))
