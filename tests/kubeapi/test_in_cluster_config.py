"""In a pod (no kubeconfig): the API server from KUBERNETES_SERVICE_HOST/PORT (an IPv6
host in brackets), trusted with the service account's ca.crt, authenticated with its
token, which is re-read as the kubelet rotates it: on a period, and after a 401. The pod
is a fake service account directory beside the TLS simulator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm_sim.kube.settings import User
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.kubeconfigs import who_is
from tests.support.waiting import wait_for

FIRST, SECOND = "sa-token-first-1a2b", "sa-token-second-3c4d"
FIRST_USER = "system:serviceaccount:kube-system:first"
SECOND_USER = "system:serviceaccount:kube-system:second"


def tokens() -> tuple[tuple[str, User], ...]:
    return ((FIRST, User(FIRST_USER)), (SECOND, User(SECOND_USER)))


@pytest.fixture
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim(tls=True, tokens=tokens()) as handle:
        yield handle


def service_account(directory: Path, kube: KubeSimHandle, token: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    assert kube.ca_file is not None
    (directory / "ca.crt").write_bytes(kube.ca_file.read_bytes())
    rotate(directory, token)
    return directory


def rotate(directory: Path, token: str) -> None:
    """As the kubelet writes a projected token: a new file renamed over the old."""
    (directory / ".token.new").write_text(token)
    (directory / ".token.new").replace(directory / "token")


def in_pod(monkeypatch: pytest.MonkeyPatch, host: str, port: int) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))


def port_of(kube: KubeSimHandle) -> int:
    return int(kube.url.rsplit(":", 1)[1])


def test_in_a_pod_the_service_account_reaches_the_api_and_its_rotation_is_picked_up(
    kube: KubeSimHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_pod(monkeypatch, "127.0.0.1", port_of(kube))
    directory = service_account(tmp_path / "sa", kube, FIRST)
    settings = KubeSettings(service_account_dir=str(directory), token_file_period=0.2)
    client = KubeClient(settings=settings)
    try:
        assert client.host == f"https://127.0.0.1:{port_of(kube)}"
        assert who_is(client, kube) == FIRST_USER
        rotate(directory, SECOND)
        wait_for(
            lambda: who_is(client, kube) == SECOND_USER,
            timeout=10,
            what="requests with the rotated token",
        )
    finally:
        client.close()


def test_a_401_rereads_the_token_at_once_and_the_request_goes_again(
    kube: KubeSimHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_pod(monkeypatch, "127.0.0.1", port_of(kube))
    directory = service_account(tmp_path / "sa", kube, FIRST)
    # The period alone would not re-read it during this test.
    settings = KubeSettings(service_account_dir=str(directory), token_file_period=3600)
    client = KubeClient(settings=settings)
    try:
        assert who_is(client, kube) == FIRST_USER
        rotate(directory, SECOND)
        kube.call(lambda sim: sim.tokens.pop(FIRST))
        mark = len(kube.requests())
        assert who_is(client, kube) == SECOND_USER
        answered = [(r["code"], r["user"]) for r in kube.requests()[mark:]]
        assert answered == [(401, ""), (200, SECOND_USER)]
    finally:
        client.close()


def test_an_ipv6_service_host_is_bracketed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with running_kube_sim(host="::1", tls=True, tokens=tokens()) as kube:
        port = port_of(kube)
        in_pod(monkeypatch, "::1", port)
        directory = service_account(tmp_path / "sa", kube, FIRST)
        client = KubeClient(settings=KubeSettings(service_account_dir=str(directory)))
        try:
            assert client.host == f"https://[::1]:{port}"
            assert who_is(client, kube) == FIRST_USER
        finally:
            client.close()
