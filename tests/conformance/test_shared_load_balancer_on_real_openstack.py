"""A Service refused a shared load balancer writes nothing to the real cloud,
as tests/provider_lb/test_refused_shared_load_balancer_users.py shows on the
simulator.

With `max-shared-lb = 3`, Service a owns a load balancer (port 80), b shares it (8080) and
c asks to share it on 8080 too: c gets upstream's `SyncLoadBalancerFailed` Warning, the real
Octavia and Neutron access logs show no write after it asked, the load balancer keeps the
tags of a and b (c's used to stay, taking a slot and keeping a's deletion from deleting it),
a fourth Service still joins, and once the others are gone a's deletion deletes the load
balancer. A guest refused because the load balancer has no floating IP (its owner is
internal) writes nothing either.

The service controller (what the service worker runs) on the provider's own code against
the real services, as in test_cluster_ownership_on_real_openstack.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from pyccm.protocol.messages import RecordEvent
from pyccm.protocol.views import Service
from pyccm.provider.openstack import create_cloud
from pyccm.provider.settings import ProviderSettings
from tests.conformance.realcloud import RealCloud
from tests.provider_lb.sharing import apply, lb_id_of, remove, sharing
from tests.support.lb import nodes, service
from tests.support.services import Harness, harness
from tests.support.waiting import wait_for

pytestmark = pytest.mark.conformance

CLUSTER = "sharing"
INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
# Real services on sqlite, 0.5 s provisioning: generous, and no timing target.
SETTLE = 120.0
PAUSE = 0.5


def tag(name: str) -> str:
    return f"kube_service_{CLUSTER}_default_{name}"


@pytest.fixture
def h(real_cloud: RealCloud, tmp_path: Path) -> Iterator[Harness]:
    """The service controller on the Octavia provider, `max-shared-lb = 3`, the cloud's
    three nodes; what a failed test left of this cluster's is removed at the end."""
    path = tmp_path / "cloud.conf"
    path.write_text(
        real_cloud.cloud_conf_path.read_text() + "\n[LoadBalancer]\nmax-shared-lb = 3\n"
    )
    settings = ProviderSettings(
        cloud_config=path, cluster_name=CLUSTER, cloud_api_qps=1000.0, cloud_api_burst=1000
    )
    cloud = create_cloud(settings=settings, registry=CollectorRegistry(), environ={})
    lbs = cloud.load_balancers()
    assert lbs is not None
    controller = harness(nodes=0, load_balancers=lbs)
    for node in nodes(3):
        controller.put(node)
    try:
        yield controller
    finally:
        cloud.close()
        _remove_leftovers(real_cloud)


def _remove_leftovers(real_cloud: RealCloud) -> None:
    """Deletes this cluster's load balancers (and their floating IPs) until none is left;
    one still busy with a test's last write is deleted once it is ACTIVE again."""
    conn = real_cloud.connection("admin")

    def gone() -> bool:
        left = [
            lb
            for lb in conn.load_balancer.load_balancers()
            if lb.name.startswith(tag("")) and lb.provisioning_status != "DELETED"
        ]
        for lb in left:
            for fip in conn.network.ips(port_id=lb.vip_port_id):
                conn.network.delete_ip(fip)
            if lb.provisioning_status in {"ACTIVE", "ERROR"}:
                conn.load_balancer.delete_load_balancer(lb, cascade=True)
        return not left

    wait_for(gone, timeout=SETTLE, what=f"no load balancer of {CLUSTER} left")


def settled(h: Harness, svc: Service) -> tuple[RecordEvent, ...]:
    return apply(h, svc, timeout=SETTLE, pause=PAUSE)


def lb_tags(real_cloud: RealCloud, lb_id: str) -> list[str]:
    return sorted(real_cloud.connection("ccm").load_balancer.get_load_balancer(lb_id).tags)


def listener_ports(real_cloud: RealCloud, lb_id: str) -> list[int]:
    octavia = real_cloud.connection("ccm").load_balancer
    listed = octavia.get_load_balancer(lb_id).listeners  # not listeners(loadbalancer_id=...)
    return sorted(octavia.get_listener(item["id"]).protocol_port for item in listed)


def test_a_service_refused_for_a_port_in_use_writes_nothing_and_the_owner_deletes_the_lb(
    real_cloud: RealCloud, h: Harness
) -> None:
    assert settled(h, service("a", ports=((80, 30080, "TCP"),))) == ()
    lb_id = lb_id_of(h, "default/a")
    assert settled(h, sharing("b", 8080, lb_id)) == ()
    assert lb_tags(real_cloud, lb_id) == [tag("a"), tag("b")]
    mark = real_cloud.mark()

    (warning,) = settled(h, sharing("c", 8080, lb_id))

    assert warning.reason == "SyncLoadBalancerFailed"
    assert warning.message == (
        f"Error syncing load balancer: the listener port 8080 already exists on load "
        f"balancer {lb_id} (used by another Service)"
    )
    assert real_cloud.writes(since=mark) == []
    assert lb_tags(real_cloud, lb_id) == [tag("a"), tag("b")]
    assert listener_ports(real_cloud, lb_id) == [80, 8080]

    # The refused Service took no max-shared-lb slot: a third one joins.
    assert settled(h, sharing("d", 9090, lb_id)) == ()
    assert lb_tags(real_cloud, lb_id) == [tag("a"), tag("b"), tag("d")]

    for guest in ("b", "d"):
        remove(h, f"default/{guest}", timeout=SETTLE, pause=PAUSE)
    assert lb_tags(real_cloud, lb_id) == [tag("a")]
    conn = real_cloud.connection("ccm")
    (fip,) = conn.network.ips(port_id=conn.load_balancer.get_load_balancer(lb_id).vip_port_id)
    remove(h, "default/a", timeout=SETTLE, pause=PAUSE)

    # No longer shared: deleted, with the floating IP pyccm made for it.
    wait_for(
        lambda: conn.load_balancer.find_load_balancer(lb_id) is None,
        timeout=SETTLE,
        what=f"load balancer {lb_id} deleted with its owner",
    )
    assert fip.id not in {f.id for f in conn.network.ips()}


def test_a_service_refused_for_want_of_a_floating_ip_writes_nothing(
    real_cloud: RealCloud, h: Harness
) -> None:
    internal_owner = service("a", ports=((80, 30080, "TCP"),), annotations={INTERNAL: "true"})
    assert settled(h, internal_owner) == ()
    lb_id = lb_id_of(h, "default/a")
    mark = real_cloud.mark()

    (warning,) = settled(h, sharing("b", 8080, lb_id))

    assert warning.reason == "SyncLoadBalancerFailed"
    assert warning.message == (
        f"Error syncing load balancer: load balancer {lb_id} is shared and has no floating "
        "IP: only its owner adds one"
    )
    assert real_cloud.writes(since=mark) == []
    assert lb_tags(real_cloud, lb_id) == [tag("a")]
    assert listener_ports(real_cloud, lb_id) == [80]
    remove(h, "default/a", timeout=SETTLE, pause=PAUSE)
