"""The TLS side of `--secure-port`, as upstream's SecureServingOptions does it.

The server certificate is `--tls-cert-file`/`--tls-private-key-file` when given. Otherwise
it is the pair `<--cert-dir>/cloud-controller-manager.crt|.key`: reused when both files are
readable, else generated self-signed and written there (key mode 0600). With neither files
nor a directory the generated pair lives in memory only (upstream's CCM default). A
generated certificate names `localhost`, 127.0.0.1, the host name and the bind address, and
lives one year, as upstream's.

`--client-ca-file` turns on client-certificate authentication: a certificate signed by that
CA is the user in its CN, in the groups in its O fields (upstream's x509 authenticator).
`--tls-min-version` and `--tls-cipher-suites` take upstream's names; TLS 1.3 suites cannot
be restricted (in Go neither), so they are accepted and change nothing.
`--tls-curve-preferences` takes upstream's numbers, Go's `crypto/tls` CurveID values (the
TLS "supported groups" code points), checked as upstream checks them. Python 3.11's ssl
module restricts a server to one group (`SSLContext.set_ecdh_curve`, which on OpenSSL 3 is
the key exchange group of TLS 1.2 and 1.3 alike); with a Python whose ssl module has
`set_groups`, the list is taken whole. Several values where only one can be set is refused
rather than narrowed: a client that could reach upstream's server must not find this one
closed.
"""

from __future__ import annotations

import logging
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyccm import lifetime

# A child process makes the certificate (`pyccm.manager.certificate`): at most this long.
CERTIFICATE_TIMEOUT = 60.0

log = logging.getLogger(__name__)

# Upstream names the generated pair after the component.
PAIR_NAME = "cloud-controller-manager"

TLS_VERSIONS = {
    "VersionTLS10": ssl.TLSVersion.TLSv1,
    "VersionTLS11": ssl.TLSVersion.TLSv1_1,
    "VersionTLS12": ssl.TLSVersion.TLSv1_2,
    "VersionTLS13": ssl.TLSVersion.TLSv1_3,
}
# Go's names of the TLS 1.2 suites it calls secure, to OpenSSL's names.
TLS12_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
}
TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")
# Go's crypto/tls CurveID values (those of Go 1.26, which builds Kubernetes 1.36) to OpenSSL's
# group names and Go's names (for messages); whether this process's OpenSSL has a group is
# asked of it (`_settable`).
TLS_CURVES = {
    23: ("prime256v1", "CurveP256"),
    24: ("secp384r1", "CurveP384"),
    25: ("secp521r1", "CurveP521"),
    29: ("X25519", "X25519"),
    4587: ("SecP256r1MLKEM768", "SecP256r1MLKEM768"),
    4588: ("X25519MLKEM768", "X25519MLKEM768"),
    4589: ("SecP384r1MLKEM1024", "SecP384r1MLKEM1024"),
}
CURVE_ID_MAX = 65535


@dataclass(frozen=True)
class ServingSettings:
    # Upstream's default is 0.0.0.0; ours stays loopback so that a manager
    # started by hand exposes nothing; the manifests set 0.0.0.0.
    bind_address: str = "127.0.0.1"
    # Upstream's --secure-port (CloudControllerManagerPort); 0 serves nothing.
    port: int = 10258
    cert_file: str = ""
    key_file: str = ""
    # Empty: a generated pair stays in memory (upstream's CCM default).
    cert_dir: str = ""
    # Empty: Python's (OpenSSL's) default minimum, TLS 1.2.
    min_tls_version: str = ""
    # Empty: OpenSSL's defaults.
    cipher_suites: tuple[str, ...] = ()
    # Empty: no client-certificate authentication, bearer tokens only.
    client_ca_file: str = ""
    # Go CurveID numbers, as given; empty: OpenSSL's default groups (as upstream: Go's).
    curve_preferences: tuple[str, ...] = ()

    def validate(self) -> None:
        """Raise ValueError naming the flag when a value cannot work."""
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("--tls-cert-file and --tls-private-key-file go together")
        if self.min_tls_version and self.min_tls_version not in TLS_VERSIONS:
            raise ValueError(
                f"--tls-min-version: unknown version {self.min_tls_version!r} "
                f"(one of {', '.join(TLS_VERSIONS)})"
            )
        for suite in self.cipher_suites:
            if suite not in TLS12_SUITES and suite not in TLS13_SUITES:
                raise ValueError(
                    f"--tls-cipher-suites: unsupported suite {suite!r} "
                    f"(one of {', '.join([*TLS12_SUITES, *TLS13_SUITES])})"
                )
        curve_groups(self.curve_preferences)
        for flag, path in (
            ("--tls-cert-file", self.cert_file),
            ("--tls-private-key-file", self.key_file),
            ("--client-ca-file", self.client_ca_file),
        ):
            if path and not os.access(path, os.R_OK):
                raise ValueError(f"{flag}: cannot read {path}")


def server_context(settings: ServingSettings) -> ssl.SSLContext:
    """The TLS context of the secure port. Raises ValueError for a pair that does not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if settings.min_tls_version:
        context.minimum_version = TLS_VERSIONS[settings.min_tls_version]
    suites = [TLS12_SUITES[s] for s in settings.cipher_suites if s in TLS12_SUITES]
    if suites:
        context.set_ciphers(":".join(suites))
    _set_groups(context, curve_groups(settings.curve_preferences))
    try:
        _load_pair(context, settings)
        if settings.client_ca_file:
            context.load_verify_locations(cafile=settings.client_ca_file)
            context.verify_mode = ssl.CERT_OPTIONAL
    except (ssl.SSLError, OSError) as error:
        raise ValueError(f"the serving certificate: {error}") from error
    return context


def curve_groups(values: tuple[str, ...]) -> tuple[str, ...]:
    """OpenSSL's names of the groups `--tls-curve-preferences` allows, in its order; raises
    ValueError naming the flag and the value (upstream's checks and wording)."""
    ids: list[int] = []
    for value in values:
        try:
            curve = int(value)
        except ValueError:
            raise ValueError(f"--tls-curve-preferences: {value!r} is not a number") from None
        if not 0 < curve <= CURVE_ID_MAX:
            raise ValueError(
                f"--tls-curve-preferences: curve preference {curve} is out of range "
                f"(must be 1-{CURVE_ID_MAX})"
            )
        if curve in ids:
            raise ValueError(f"--tls-curve-preferences: duplicate curve preference {curve}")
        ids.append(curve)
    groups = tuple(_group(curve) for curve in ids)
    if len(groups) > 1 and not hasattr(ssl.SSLContext, "set_groups"):
        raise ValueError(
            "--tls-curve-preferences: this Python's ssl module can restrict the server to one "
            f"curve only; give one of {_supported()}"
        )
    return groups


def _group(curve: int) -> str:
    known = TLS_CURVES.get(curve)
    if known is None:
        raise ValueError(
            f"--tls-curve-preferences: curve preference {curve} is not a Go crypto/tls CurveID "
            f"(supported here: {_supported()})"
        )
    if not _settable(known[0]):
        raise ValueError(
            f"--tls-curve-preferences: curve preference {curve} ({known[1]}) is not supported "
            f"by {ssl.OPENSSL_VERSION} (supported here: {_supported()})"
        )
    return known[0]


def _supported() -> str:
    return ", ".join(
        f"{curve} ({go})" for curve, (name, go) in TLS_CURVES.items() if _settable(name)
    )


def _settable(group: str) -> bool:
    try:
        _set_groups(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), (group,))
    except (ValueError, ssl.SSLError):
        return False
    return True


def _set_groups(context: ssl.SSLContext, groups: tuple[str, ...]) -> None:
    if not groups:
        return
    set_groups = getattr(context, "set_groups", None)
    if set_groups is not None:
        set_groups(":".join(groups))
    else:
        (group,) = groups
        context.set_ecdh_curve(group)


def _load_pair(context: ssl.SSLContext, settings: ServingSettings) -> None:
    if settings.cert_file:
        context.load_cert_chain(settings.cert_file, settings.key_file)
        return
    if settings.cert_dir:
        directory = Path(settings.cert_dir)
        cert, key = directory / f"{PAIR_NAME}.crt", directory / f"{PAIR_NAME}.key"
        if not (os.access(cert, os.R_OK) and os.access(key, os.R_OK)):
            write_pair(directory, *self_signed(settings.bind_address))
            log.info("generated a self-signed certificate (%s, %s)", cert, key)
        context.load_cert_chain(cert, key)
        return
    # Python loads a certificate only from files: a private directory that lives for the
    # length of this call.
    scratch = Path(tempfile.mkdtemp(prefix="pyccm-serving-"))
    try:
        write_pair(scratch, *self_signed(settings.bind_address))
        context.load_cert_chain(scratch / f"{PAIR_NAME}.crt", scratch / f"{PAIR_NAME}.key")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log.info("generated a self-signed certificate in memory")


def write_pair(directory: Path, cert_pem: bytes, key_pem: bytes) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = directory / f"{PAIR_NAME}.key"
    # The key is created 0600 before a byte of it is written.
    descriptor = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(key_pem)
    (directory / f"{PAIR_NAME}.crt").write_bytes(cert_pem)


def self_signed(bind_address: str) -> tuple[bytes, bytes]:
    """A one-year self-signed certificate and its key, PEM, made by a child process
    (`pyccm.manager.certificate`), so that the manager never loads cryptography."""
    child = lifetime.spawn(
        [sys.executable, "-m", "pyccm.manager.certificate", bind_address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = child.communicate(timeout=CERTIFICATE_TIMEOUT)
    except subprocess.TimeoutExpired:
        lifetime.stop(child)
        raise ValueError("making a self-signed certificate timed out") from None
    marker = out.find(b"-----BEGIN PRIVATE KEY-----")
    if child.returncode != 0 or marker <= 0:
        reason = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ValueError(f"making a self-signed certificate failed: {reason[0]}")
    return out[:marker], out[marker:]


def peer_identity(certificate: Mapping[str, Any] | None) -> tuple[str, tuple[str, ...]] | None:
    """(user, groups) of a verified client certificate (CN, O fields), as upstream's
    CommonNameUserConversion; None without one."""
    if not certificate:
        return None
    user, groups = "", []
    for rdn in certificate.get("subject") or ():
        for key, value in rdn:
            if key == "commonName":
                user = value
            elif key == "organizationName":
                groups.append(value)
    return (user, tuple(groups)) if user else None
