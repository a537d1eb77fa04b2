"""Lists longer than a page, on the real services: Octavia caps every list at 1,000 items
(`pagination_max_limit`) and Nova at 1,000 (`[api] max_limit`); past that they answer one
page and a "next" link. A pool of 1,500 members must be read whole, or every no-op resync
would send a needless batch update (and, in serial mode, never converge).

These run the provider itself (the service worker's code) against the real cloud, so
1,500 members need no 1,500-node cluster; what the provider did is counted from the real
servers' own access logs.

On 2024.1 the pool is smaller and pyccm's HTTP timeout longer (`POOL`): Octavia 14 turns
each member it lists into a data model together with its whole pool (every member of it:
`get_all`'s `to_data_model()` after `subqueryload(Member.pool)`), so a page of 1,000 from a
pool of n costs 1,000 x n conversions; here, on sqlite, the first page of a 1,500-member
pool took 110 s and the second 66 s, over pyccm's default 60 s. Any pool over one page
has a first page that slow (1,000 x 1,001 at least), so the 2024.1 case keeps the paging
(1,000 + 1: two reads) with the smallest pool that crosses the page, and gives this
provider `[Metadata] request-timeout` for that page; pyccm's default stays 60 s (upstream's).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from prometheus_client import CollectorRegistry

from pyccm.protocol.views import (
    Node,
    NodeAddress,
    NodeSpec,
    NodeStatus,
    OwnerMeta,
    Service,
    ServicePort,
    ServiceSpec,
)
from pyccm.provider.errors import RetryAfter
from pyccm.provider.openstack import create_cloud
from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm.provider.openstack.common.resources import Server
from pyccm.provider.settings import ProviderSettings
from tests.conformance.realcloud import RealCloud, per_release
from tests.support.waiting import wait_for

pytestmark = pytest.mark.conformance

T = TypeVar("T")


@dataclass(frozen=True)
class PoolCase:
    members: int
    # `[Metadata] request-timeout` of the provider, seconds (0: pyccm's default, 60 s).
    request_timeout: float
    # How long an ensure may take to converge (it reads the pool's members whole).
    converge_timeout: float
    # pytest-timeout's limit for the whole test: five reads of the members, each a few
    # minutes long on Octavia 14 here.
    test_timeout: float


POOL = per_release(
    {
        "2026.2": PoolCase(
            members=1_500, request_timeout=0, converge_timeout=180, test_timeout=120
        ),
        # Octavia 14: about 75 s for the first page of a 1,001-member pool (module docstring).
        "2024.1": PoolCase(
            members=1_001, request_timeout=300, converge_timeout=900, test_timeout=1800
        ),
        # Octavia 16 lists members with a limited graph (`limited_graph`): no longer quadratic.
        "2025.1": PoolCase(
            members=1_500, request_timeout=0, converge_timeout=180, test_timeout=600
        ),
    }
)
SERVERS = 1_500


@pytest.fixture
def cloud(real_cloud: RealCloud, tmp_path: Path) -> Iterator[OpenStackCloud]:
    path = tmp_path / "cloud.conf"
    conf = real_cloud.cloud_conf_path.read_text()
    if POOL.request_timeout:
        conf += f"\n[Metadata]\nrequest-timeout = {POOL.request_timeout:.0f}s\n"
    path.write_text(conf)
    provider_settings = ProviderSettings(
        cloud_config=path, cluster_name="paging", cloud_api_qps=1000.0, cloud_api_burst=1000
    )
    built = create_cloud(settings=provider_settings, registry=CollectorRegistry(), environ={})
    yield built
    built.close()


def many_nodes(count: int) -> list[Node]:
    """`count` nodes with addresses in the tenant subnet (members need no server)."""
    first = int(ipaddress.IPv4Address("10.0.16.0"))
    return [
        Node(
            metadata=OwnerMeta(name=f"paged-{i:05d}", uid=f"uid-paged-{i}"),
            spec=NodeSpec(),
            status=NodeStatus(
                addresses=(
                    NodeAddress(type="InternalIP", address=str(ipaddress.IPv4Address(first + i))),
                )
            ),
        )
        for i in range(count)
    ]


def big_service() -> Service:
    return Service(
        metadata=OwnerMeta(name="big", namespace="paging", uid="uid-big"),
        spec=ServiceSpec(
            type="LoadBalancer",
            ports=(ServicePort(name="http", protocol="TCP", port=80, node_port=30080),),
        ),
    )


def until_done(call: Callable[[], T], *, timeout: float = 180.0) -> T:
    """Repeat `call` while it raises RetryAfter, as the worker would (after a short wait)."""
    outcome: list[T] = []

    def attempt() -> bool:
        try:
            outcome.append(call())
        except RetryAfter:
            return False
        return True

    wait_for(attempt, timeout=timeout, what="the provider call converged")
    return outcome[0]


@pytest.mark.timeout(POOL.test_timeout)
def test_a_pool_over_octavias_page_is_read_whole_and_a_resync_writes_nothing(
    real_cloud: RealCloud, cloud: OpenStackCloud
) -> None:
    lbs = cloud.load_balancers()
    assert lbs is not None
    nodes = many_nodes(POOL.members)
    service = big_service()
    converge = POOL.converge_timeout
    until_done(lambda: lbs.ensure(service=service, nodes=nodes), timeout=converge)
    octavia = real_cloud.connection("ccm").load_balancer
    (pool,) = [p for p in octavia.pools() if p.name.startswith("pool_0_kube_service_paging")]
    assert len(list(octavia.members(pool.id))) == POOL.members  # openstacksdk pages too

    mark = real_cloud.mark()
    until_done(lambda: lbs.ensure(service=service, nodes=nodes), timeout=converge)
    member_pages = [
        c for c in real_cloud.calls(since=mark) if c.method == "GET" and c.path.endswith("/members")
    ]
    assert len(member_pages) == 2  # 1,000 + the rest, following the next link
    assert real_cloud.writes(since=mark) == []

    mark = real_cloud.mark()
    until_done(lambda: lbs.update(service=service, nodes=nodes[1:]), timeout=converge)
    assert [(c.method, c.path.rsplit("/", 1)[-1]) for c in real_cloud.writes(since=mark)] == [
        ("PUT", "members")
    ]
    # The settler removes the member before it makes the load balancer ACTIVE again.
    (lb,) = [lb for lb in octavia.load_balancers() if lb.name.endswith("_paging_big")]
    wait_for(
        lambda: octavia.get_load_balancer(lb.id).provisioning_status == "ACTIVE",
        timeout=60,
        what="the member update applied",
    )
    assert len(list(octavia.members(pool.id))) == POOL.members - 1

    until_done(lambda: lbs.ensure_deleted(service=service), timeout=converge)
    assert [lb for lb in octavia.load_balancers() if lb.name.endswith("_paging_big")] == []


def test_a_server_list_longer_than_novas_page_is_read_whole(
    real_cloud: RealCloud, cloud: OpenStackCloud
) -> None:
    before = len(list(real_cloud.connection("ccm").compute.servers()))
    first = int(ipaddress.IPv4Address("10.0.32.0"))
    extra = [
        (f"paged-server-{i:04d}", str(ipaddress.IPv4Address(first + i)))
        for i in range(SERVERS - before + 1)
    ]
    real_cloud.add_servers(extra, ports=False)
    everything: list[Any] = cloud.client.list_all(
        Server, "compute", "/servers/detail", key="servers", request="server_list"
    )
    assert len(everything) == SERVERS + 1
    assert len({s.id for s in everything}) == SERVERS + 1
