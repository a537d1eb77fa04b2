"""pyccm reaches the API server through the proxy client-go would use: HTTPS_PROXY unless
NO_PROXY exempts the server (a CIDR, a host:port), never for a loopback server, and a
kubeconfig's proxy-url for every request. A real CONNECT proxy logs what it tunnels; the
TLS simulator logs who each request was; kubectl, where installed, takes the same route.

The server is addressed as 0.0.0.0: Linux connects that to the local host, and, unlike
127.0.0.1 or localhost, it is not exempt from proxying (Go exempts only those), so one
simulator on 127.0.0.1 serves both the proxied and the direct cases. The certificate is
checked against `localhost` (tls-server-name), a name it carries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.errors import KubeConfigError, Unavailable
from tests.support.kubeconfigs import (
    HAVE_KUBECTL,
    TOKEN,
    TOKEN_USER,
    Authenticating,
    authenticating_sim,
    b64,
    kubectl_reads,
    who_reads,
    write_kubeconfig,
)
from tests.support.proxy import Connect, ConnectProxy, connect_proxy

PROXY_USER = "ccm:pr0xy-pa55word"
VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Authenticating]:
    with authenticating_sim(tmp_path / "pki") as sim:
        yield sim


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    with connect_proxy(require=PROXY_USER) as proxy:
        yield proxy


@pytest.fixture(autouse=True)
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _proxy_url(proxy: ConnectProxy, credentials: str = PROXY_USER) -> str:
    return proxy.url.replace("http://", f"http://{credentials}@")


def _kubeconfig(sim: Authenticating, directory: Path, host: str, **cluster: str) -> Path:
    server = {
        "server": f"https://{host}:{sim.port}",
        "certificate-authority-data": b64(sim.server_ca()),
        "tls-server-name": "localhost",
        **cluster,
    }
    return write_kubeconfig(directory / "config", cluster=server, user={"token": TOKEN})


CLIENTS = [
    pytest.param("pyccm", id="pyccm"),
    pytest.param(
        "kubectl",
        id="kubectl",
        marks=[
            pytest.mark.kubectl,
            pytest.mark.skipif(not HAVE_KUBECTL, reason="kubectl is not installed"),
        ],
    ),
]


def _reads(client: str, kubeconfig: Path, sim: Authenticating) -> str:
    if client == "kubectl":
        return kubectl_reads(kubeconfig, sim.kube)
    return who_reads(kubeconfig, sim.kube)


@pytest.mark.parametrize("client", CLIENTS)
def test_https_proxy_tunnels_the_requests_with_its_credentials(
    sim: Authenticating,
    proxy: ConnectProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    client: str,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", _proxy_url(proxy))
    monkeypatch.setenv("NO_PROXY", "kube.example.com,10.0.0.0/8")
    kubeconfig = _kubeconfig(sim, tmp_path, "0.0.0.0")
    assert _reads(client, kubeconfig, sim) == TOKEN_USER
    assert set(proxy.connects()) == {Connect(f"0.0.0.0:{sim.port}", PROXY_USER, 200)}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    "no_proxy",
    ["0.0.0.0/8", "0.0.0.0:{port}", "kube.example.com, 0.0.0.0/31", "*"],
    ids=["cidr", "address-and-port", "one-of-several", "star"],
)
def test_no_proxy_sends_the_requests_direct(
    *,
    sim: Authenticating,
    proxy: ConnectProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_proxy: str,
    client: str,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", _proxy_url(proxy))
    monkeypatch.setenv("no_proxy", no_proxy.format(port=sim.port))
    kubeconfig = _kubeconfig(sim, tmp_path, "0.0.0.0")
    assert _reads(client, kubeconfig, sim) == TOKEN_USER
    assert proxy.connects() == []


def test_a_no_proxy_entry_for_another_port_does_not_exempt_the_server(
    sim: Authenticating, proxy: ConnectProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", _proxy_url(proxy))
    monkeypatch.setenv("NO_PROXY", f"0.0.0.0:{sim.port + 1}")
    assert who_reads(_kubeconfig(sim, tmp_path, "0.0.0.0"), sim.kube) == TOKEN_USER
    assert [c.target for c in proxy.connects()] == [f"0.0.0.0:{sim.port}"]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_loopback_server_is_never_proxied(
    sim: Authenticating,
    proxy: ConnectProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    client: str,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", _proxy_url(proxy))
    assert _reads(client, _kubeconfig(sim, tmp_path, "127.0.0.1"), sim) == TOKEN_USER
    assert proxy.connects() == []


@pytest.mark.parametrize("client", CLIENTS)
def test_a_kubeconfig_proxy_url_carries_every_request(
    sim: Authenticating,
    proxy: ConnectProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    client: str,
) -> None:
    """Loopback server, NO_PROXY=*, HTTPS_PROXY at a closed port: proxy-url still wins."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "*")
    kubeconfig = _kubeconfig(sim, tmp_path, "127.0.0.1", **{"proxy-url": _proxy_url(proxy)})
    assert _reads(client, kubeconfig, sim) == TOKEN_USER
    assert set(proxy.connects()) == {Connect(f"127.0.0.1:{sim.port}", PROXY_USER, 200)}


def test_wrong_proxy_credentials_fail_the_request_without_showing_them(
    sim: Authenticating, proxy: ConnectProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "ccm:wr0ng-s3cret"
    monkeypatch.setenv("HTTPS_PROXY", _proxy_url(proxy, wrong))
    kubeconfig = _kubeconfig(sim, tmp_path, "0.0.0.0")
    client = KubeClient(settings=KubeSettings(kubeconfig=str(kubeconfig)))
    before = len(sim.kube.requests())
    try:
        with pytest.raises(Unavailable) as raised:
            client.request("GET", "/api/v1/namespaces/kube-system")
    finally:
        client.close()
    assert "wr0ng-s3cret" not in str(raised.value)
    assert "wr0ng-s3cret" not in repr(client.__dict__)
    assert proxy.connects()[0] == Connect(f"0.0.0.0:{sim.port}", wrong, 407)
    # Refused at the proxy: nothing reached the API server.
    assert len(sim.kube.requests()) == before


def test_a_socks_proxy_in_the_environment_is_one_line_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://ccm:s0cks-s3cret@proxy.corp:1080")
    kubeconfig = write_kubeconfig(
        tmp_path / "config", cluster={"server": "https://10.0.0.1:6443"}, user={"token": TOKEN}
    )
    with pytest.raises(KubeConfigError) as raised:
        KubeClient(settings=KubeSettings(kubeconfig=str(kubeconfig)))
    assert str(raised.value) == "HTTPS_PROXY: socks5 proxies are not supported (http and https are)"
