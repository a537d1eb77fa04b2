"""The provider's own connection (pyccm/provider/openstack/connection.py, keystone.py) on the
OpenStack simulator: when it asks Keystone for a token, and which proxy it goes through.
Counted in the simulator's access log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from pyccm.provider.errors import CloudError
from pyccm.provider.openstack.client import OpenStackClient, build_client
from pyccm.provider.openstack.config import load_settings
from pyccm.provider.openstack.connection import bypassed
from pyccm.provider.openstack.keystone import RENEW_BEFORE
from pyccm.provider.settings import ProviderSettings
from pyccm.sim.openstack.calllog import Seq
from pyccm.sim.openstack.testing import OpenStackSimHandle, running_openstack_sim
from tests.support.ports import free_port


def client_for(conf: Path) -> OpenStackClient:
    return build_client(
        settings=load_settings(conf, environ={}),
        provider_settings=ProviderSettings(
            cloud_config=conf, cloud_api_qps=1000.0, cloud_api_burst=1000
        ),
        registry=CollectorRegistry(),
    )


def token_requests(sim: OpenStackSimHandle, since: Seq) -> int:
    calls = sim.calls(since=since)
    return len([c for c in calls if c.method == "POST" and c.path.endswith("/auth/tokens")])


def flavors(client: OpenStackClient) -> bytes:
    return client.call("compute", "GET", "/flavors", request="flavor_list")


@pytest.fixture(scope="module")
def short_tokens() -> Iterator[OpenStackSimHandle]:
    """Tokens valid for less than the renewal margin: each one is renewed before its use."""
    with running_openstack_sim(seed_nodes=1, token_ttl_s=RENEW_BEFORE - 30) as sim:
        yield sim


def test_one_token_serves_every_call_until_it_nears_its_expiry(
    sim: OpenStackSimHandle,
) -> None:
    client = client_for(sim.cloud_conf_path)
    mark = sim.mark()
    try:
        for _ in range(5):
            flavors(client)
    finally:
        client.close()

    assert token_requests(sim, mark) == 1


def test_a_token_within_the_renewal_margin_of_its_expiry_is_renewed_before_use(
    short_tokens: OpenStackSimHandle,
) -> None:
    client = client_for(short_tokens.cloud_conf_path)
    mark = short_tokens.mark()
    try:
        for _ in range(3):
            flavors(client)
    finally:
        client.close()

    # The first call asks for a token twice (the catalog for the endpoint, then the
    # header), each later one once: never a token closer to its expiry than the margin.
    assert token_requests(short_tokens, mark) == 4


def test_calls_go_through_the_environments_proxy_unless_no_proxy_names_the_host(
    sim: OpenStackSimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_port = free_port()  # nothing listens there: a call through it fails
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy_port}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    through_proxy = client_for(sim.cloud_conf_path)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    direct = client_for(sim.cloud_conf_path)
    mark = sim.mark()
    try:
        with pytest.raises(CloudError) as refused:
            flavors(through_proxy)
        flavors(direct)
    finally:
        through_proxy.close()
        direct.close()

    assert f"port={proxy_port}" in str(refused.value)
    assert token_requests(sim, mark) == 1  # the direct client's only


@pytest.mark.parametrize(
    ("host", "no_proxy", "exempt"),
    [
        ("keystone.example.com", "example.com", True),
        ("keystone.example.com", ".example.com", True),
        ("example.com", "example.com", True),
        ("badexample.com", "example.com", False),
        ("10.0.0.5", "10.0.0.5, other", True),
        ("anything", "*", True),
        ("anything", "", False),
    ],
)
def test_no_proxy_exempts_a_host_and_its_subdomains(host: str, no_proxy: str, exempt: bool) -> None:
    assert bypassed(host, no_proxy) is exempt
