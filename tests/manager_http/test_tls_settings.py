"""The TLS side of the secure port: which certificate it presents, the TLS versions and
suites it accepts, and client certificates as a way to authenticate."""

from __future__ import annotations

import ipaddress
import socket
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from pyccm.manager.serving import ServingSettings
from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.certificates import client_ca, issue_client, issue_pair
from tests.support.https import (
    CERT_READER,
    PAIR,
    READER_TOKEN,
    der_of,
    fetch,
    mark,
    peer_certificate,
    reviews,
    serving,
    trusting,
)


def test_a_pair_already_in_cert_dir_is_reused(ccm_kubeconfig: Path, tmp_path: Path) -> None:
    _, cert, key = issue_pair(tmp_path, common_name="kept")
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / f"{PAIR}.crt").write_bytes(cert.read_bytes())
    (certs / f"{PAIR}.key").write_bytes(key.read_bytes())
    with serving(ccm_kubeconfig, serving=ServingSettings(port=0, cert_dir=str(certs))) as server:
        assert peer_certificate(server.port) == der_of(cert)


def test_without_files_or_a_directory_the_pair_lives_in_memory(
    ccm_kubeconfig: Path, tmp_path: Path
) -> None:
    settings = ServingSettings(port=0)
    with (
        serving(ccm_kubeconfig, serving=settings) as first,
        serving(ccm_kubeconfig, serving=settings) as second,
    ):
        # Each start makes its own; nothing is left on disk for the next.
        presented = peer_certificate(first.port)
        assert presented != peer_certificate(second.port)
    names = x509.load_der_x509_certificate(presented).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert "localhost" in names.value.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("127.0.0.1") in names.value.get_values_for_type(x509.IPAddress)


def _handshake(
    port: int, *, maximum: ssl.TLSVersion | None = None, curve: str = ""
) -> tuple[str, str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if maximum is not None:
        context.maximum_version = maximum
    if curve:
        # The only key exchange group this client offers.
        context.set_ecdh_curve(curve)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw) as tls,
    ):
        version, cipher = tls.version(), tls.cipher()
    assert version is not None
    assert cipher is not None
    return version, cipher[0]


def test_tls_min_version_refuses_older_clients(ccm_kubeconfig: Path) -> None:
    settings = ServingSettings(port=0, min_tls_version="VersionTLS13")
    with serving(ccm_kubeconfig, serving=settings) as server:
        assert _handshake(server.port)[0] == "TLSv1.3"
        with pytest.raises(ssl.SSLError):
            _handshake(server.port, maximum=ssl.TLSVersion.TLSv1_2)


def test_tls_cipher_suites_choose_the_tls12_suite(ccm_kubeconfig: Path) -> None:
    settings = ServingSettings(
        port=0, cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256")
    )
    with serving(ccm_kubeconfig, serving=settings) as server:
        assert _handshake(server.port, maximum=ssl.TLSVersion.TLSv1_2) == (
            "TLSv1.2",
            "ECDHE-ECDSA-AES256-GCM-SHA384",
        )


def test_tls_curve_preferences_refuse_a_client_without_the_allowed_curve(
    ccm_kubeconfig: Path,
) -> None:
    # 24: Go's CurveP384. TLS 1.3: in TLS 1.2 a client's groups also bound the curve of the
    # server's ECDSA certificate, which would refuse these clients for another reason.
    settings = ServingSettings(port=0, curve_preferences=("24",))
    with serving(ccm_kubeconfig, serving=settings) as server:
        assert _handshake(server.port, curve="secp384r1")[0] == "TLSv1.3"
        with pytest.raises(ssl.SSLError):
            _handshake(server.port, curve="prime256v1")
        with pytest.raises(ssl.SSLError):
            _handshake(server.port, curve="X25519")


@pytest.mark.skipif(
    hasattr(ssl.SSLContext, "set_groups"), reason="this Python's ssl sets several groups"
)
def test_several_curves_are_refused_where_ssl_can_set_one_only() -> None:
    with pytest.raises(ValueError, match=r"one curve only; give one of 23 .*29 \(X25519\)"):
        ServingSettings(curve_preferences=("23", "29")).validate()


def test_without_tls_curve_preferences_every_default_curve_is_accepted(
    ccm_kubeconfig: Path,
) -> None:
    with serving(ccm_kubeconfig, serving=ServingSettings(port=0)) as server:
        for curve in ("prime256v1", "secp384r1", "X25519"):
            assert _handshake(server.port, curve=curve)


def _with_client_cert(cafile: Path, cert: Path, key: Path) -> ssl.SSLContext:
    context = trusting(cafile)
    context.load_cert_chain(cert, key)
    return context


def test_a_client_certificate_from_the_client_ca_authenticates_without_a_token_review(
    ccm_kubeconfig: Path, kube: KubeSimHandle, tmp_path: Path
) -> None:
    ca_files = client_ca(tmp_path)
    reader = issue_client(tmp_path, ca_files, CERT_READER, "monitoring")
    stranger = issue_client(tmp_path, ca_files, "someone-else")
    certs = tmp_path / "certs"
    settings = ServingSettings(port=0, cert_dir=str(certs), client_ca_file=str(ca_files[0]))
    with serving(ccm_kubeconfig, serving=settings) as server:
        server_cert = certs / f"{PAIR}.crt"
        since = mark(kube)
        allowed = fetch(server.port, "/metrics", context=_with_client_cert(server_cert, *reader))
        denied = fetch(server.port, "/metrics", context=_with_client_cert(server_cert, *stranger))
        # Tokens still work beside certificates.
        by_token = fetch(server.port, "/metrics", context=trusting(server_cert), token=READER_TOKEN)
    assert (allowed.status, denied.status, by_token.status) == (200, 403, 200)
    made = [r["resource"] for r in reviews(kube, since)]
    assert made.count("tokenreviews") == 1  # the bearer token's, none for the certificates
    assert made.count("subjectaccessreviews") == 3


def test_a_client_certificate_from_another_ca_is_refused_at_the_handshake(
    ccm_kubeconfig: Path, tmp_path: Path
) -> None:
    ca_files = client_ca(tmp_path)
    outsider = issue_client(tmp_path, None, CERT_READER)
    certs = tmp_path / "certs"
    settings = ServingSettings(port=0, cert_dir=str(certs), client_ca_file=str(ca_files[0]))
    with serving(ccm_kubeconfig, serving=settings) as server:
        context = _with_client_cert(certs / f"{PAIR}.crt", *outsider)
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            fetch(server.port, "/metrics", context=context)
        # The server is still there for everyone else.
        assert fetch(server.port, "/healthz", context=trusting(certs / f"{PAIR}.crt")).status == 200
