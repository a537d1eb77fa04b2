"""A kubeconfig's ways to reach and trust the API server and to say who we are, as
client-go reads them: each one against the TLS simulator, which logs who each request
was, and the same kubeconfig through kubectl (a real client-go) where it is installed."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pyccm.kubeapi.errors import Unavailable
from tests.support.kubeconfigs import (
    CERT_USER,
    HAVE_KUBECTL,
    PASSWORD,
    PASSWORD_USER,
    TOKEN,
    TOKEN_USER,
    Authenticating,
    authenticating_sim,
    b64,
    kubectl_reads,
    who_reads,
    write_kubeconfig,
)

# Writes a kubeconfig for the simulator into a directory; returns its path.
Case = Callable[[Authenticating, Path], Path]


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Authenticating]:
    with authenticating_sim(tmp_path / "pki") as sim:
        yield sim


def _ca_data(sim: Authenticating) -> dict[str, Any]:
    return {"server": sim.kube.url, "certificate-authority-data": b64(sim.server_ca())}


def token(sim: Authenticating, directory: Path) -> Path:
    return write_kubeconfig(directory / "config", cluster=_ca_data(sim), user={"token": TOKEN})


def token_file_and_ca_file_relative(sim: Authenticating, directory: Path) -> Path:
    # Relative paths are the kubeconfig's directory's, not the working directory's.
    (directory / "secrets").mkdir(parents=True)
    (directory / "secrets" / "token").write_text(TOKEN + "\n")
    (directory / "secrets" / "ca.crt").write_bytes(sim.server_ca())
    cluster = {"server": sim.kube.url, "certificate-authority": "secrets/ca.crt"}
    return write_kubeconfig(
        directory / "config", cluster=cluster, user={"tokenFile": "secrets/token"}
    )


def client_certificate_data(sim: Authenticating, directory: Path) -> Path:
    cert, key = sim.client
    user = {
        "client-certificate-data": b64(cert.read_bytes()),
        "client-key-data": b64(key.read_bytes()),
    }
    return write_kubeconfig(directory / "config", cluster=_ca_data(sim), user=user)


def client_certificate_files(sim: Authenticating, directory: Path) -> Path:
    cert, key = sim.client
    (directory / "pki").mkdir(parents=True)
    shutil.copy(cert, directory / "pki" / "me.crt")
    shutil.copy(key, directory / "pki" / "me.key")
    user = {"client-certificate": "pki/me.crt", "client-key": "pki/me.key"}
    return write_kubeconfig(directory / "config", cluster=_ca_data(sim), user=user)


def basic_auth(sim: Authenticating, directory: Path) -> Path:
    user = {"username": PASSWORD_USER, "password": PASSWORD}
    return write_kubeconfig(directory / "config", cluster=_ca_data(sim), user=user)


def tls_server_name(sim: Authenticating, directory: Path) -> Path:
    # The certificate names 127.0.0.1 and localhost: checked against `localhost` here.
    cluster = {**_ca_data(sim), "tls-server-name": "localhost"}
    return write_kubeconfig(directory / "config", cluster=cluster, user={"token": TOKEN})


def insecure_skip_tls_verify(sim: Authenticating, directory: Path) -> Path:
    cluster = {"server": sim.kube.url, "insecure-skip-tls-verify": True}
    return write_kubeconfig(directory / "config", cluster=cluster, user={"token": TOKEN})


CASES: list[tuple[Case, str]] = [
    (token, TOKEN_USER),
    (token_file_and_ca_file_relative, TOKEN_USER),
    (client_certificate_data, CERT_USER),
    (client_certificate_files, CERT_USER),
    (basic_auth, PASSWORD_USER),
    (tls_server_name, TOKEN_USER),
    (insecure_skip_tls_verify, TOKEN_USER),
]
IDS = [case.__name__ for case, _ in CASES]


@pytest.mark.parametrize(("case", "user"), CASES, ids=IDS)
def test_pyccm_is_who_the_kubeconfig_says(
    sim: Authenticating, tmp_path: Path, case: Case, user: str
) -> None:
    kubeconfig = case(sim, tmp_path / "kube")
    assert who_reads(kubeconfig, sim.kube) == user


@pytest.mark.kubectl
@pytest.mark.skipif(not HAVE_KUBECTL, reason="kubectl is not installed")
@pytest.mark.parametrize(("case", "user"), CASES, ids=IDS)
def test_kubectl_is_the_same_user_with_the_same_kubeconfig(
    sim: Authenticating, tmp_path: Path, case: Case, user: str
) -> None:
    kubeconfig = case(sim, tmp_path / "kube")
    assert kubectl_reads(kubeconfig, sim.kube) == user


def test_a_client_certificate_beside_a_token_is_the_identity(
    sim: Authenticating, tmp_path: Path
) -> None:
    """A client certificate beside a token: the simulator, as kube-apiserver, takes the
    certificate first (x509 before tokens), and both clients present it."""
    cert, key = sim.client
    user = {"token": TOKEN, "client-certificate": str(cert), "client-key": str(key)}
    kubeconfig = write_kubeconfig(tmp_path / "config", cluster=_ca_data(sim), user=user)
    assert who_reads(kubeconfig, sim.kube) == CERT_USER


@pytest.mark.parametrize(
    ("cluster_of", "reason"),
    [
        (
            lambda sim: {**_ca_data(sim), "tls-server-name": "elsewhere.example"},
            "Hostname mismatch",
        ),
        (lambda sim: {"server": sim.kube.url}, "CERTIFICATE_VERIFY_FAILED"),
    ],
    ids=["another-tls-server-name", "no-ca-and-not-insecure"],
)
def test_a_server_certificate_not_trusted_is_refused(
    sim: Authenticating,
    tmp_path: Path,
    cluster_of: Callable[[Authenticating], dict[str, Any]],
    reason: str,
) -> None:
    kubeconfig = write_kubeconfig(
        tmp_path / "config", cluster=cluster_of(sim), user={"token": TOKEN}
    )
    before = len(sim.kube.requests())
    with pytest.raises(Unavailable, match=reason):
        who_reads(kubeconfig, sim.kube)
    # Refused at the handshake: the token never reached the server.
    assert len(sim.kube.requests()) == before
