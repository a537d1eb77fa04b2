"""Ownership by cluster id (kubernetes/cloud-provider-openstack#3102): two clusters with the same
`--cluster-name` on one cloud never write each other's load balancers, floating IPs or security
groups; an untagged load balancer with the upstream name is adopted and tagged once; a load balancer
shared explicitly with `load-balancer-id` is still joined."""

from __future__ import annotations

import pytest

from pyccm.provider.errors import OwnedByAnotherCluster
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import (
    MakeLbs,
    converge,
    delete,
    ensure,
    nodes,
    one,
    service,
    with_annotations,
)

ONE = "11111111-1111-1111-1111-111111111111"
TWO = "22222222-2222-2222-2222-222222222222"
NAME = "kube_service_kubernetes_default_web"
SG_CONF = "[LoadBalancer]\nmanage-security-groups = true"


def test_everything_created_carries_the_cluster_id(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs(SG_CONF, cluster_id=ONE)
    ensure(lbs, service("web"), nodes(2, sim=sim))

    assert one(sim, "loadbalancer")["tags"] == [NAME, f"pyccm-cluster:{ONE}"]
    assert one(sim, "floatingip")["tags"] == [f"pyccm-cluster:{ONE}"]
    groups = [g for g in sim.resources("security_group") if g["name"].startswith("lb-sg-")]
    assert [g["tags"] for g in groups] == [[f"pyccm-cluster:{ONE}"]]


def test_a_second_cluster_with_the_same_name_never_writes_the_first_ones_resources(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    first, second = make_lbs(cluster_id=ONE), make_lbs(cluster_id=TWO)
    ensure(first, service("web"), nodes(2))
    before = {kind: sim.resources(kind) for kind in ("loadbalancer", "listener", "floatingip")}
    mark = sim.mark()

    # The second cluster's Service of the same namespace/name: refused, nothing written.
    with pytest.raises(OwnedByAnotherCluster) as refused:
        second.ensure(service=service("web", ports=((8080, 31080, "TCP"),)), nodes=nodes(3))
    assert refused.value.owner == ONE
    assert ONE in str(refused.value)
    assert "neither updates nor deletes" in str(refused.value)
    with pytest.raises(OwnedByAnotherCluster):
        second.update(service=service("web"), nodes=nodes(5))
    # Its deletion leaves the first cluster's load balancer and floating IP alone.
    assert second.get(service=service("web")) is None
    events = converge(lambda: second.ensure_deleted(service=service("web"))).value
    assert [e.reason for e in events] == ["LoadBalancerOwnedByAnotherCluster"]

    assert sim.writes(since=mark) == []
    assert {kind: sim.resources(kind) for kind in before} == before


def test_an_untagged_load_balancer_with_the_upstream_name_is_adopted_once(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    # What upstream's controller (or pyccm before cluster ids) left: no cluster tag.
    ensure(make_lbs(), service("web"), nodes(2))
    assert one(sim, "loadbalancer")["tags"] == [NAME]
    assert one(sim, "floatingip")["tags"] == []
    lb_id = one(sim, "loadbalancer")["id"]

    ensure(make_lbs(cluster_id=ONE), service("web"), nodes(2))
    assert one(sim, "loadbalancer")["id"] == lb_id  # the same one, not a new one
    assert one(sim, "loadbalancer")["tags"] == [NAME, f"pyccm-cluster:{ONE}"]
    assert one(sim, "floatingip")["tags"] == [f"pyccm-cluster:{ONE}"]

    # Adopted: another cluster of the same name can no longer take it.
    with pytest.raises(OwnedByAnotherCluster):
        make_lbs(cluster_id=TWO).ensure(service=service("web"), nodes=nodes(2))
    mark = sim.mark()
    ensure(make_lbs(cluster_id=ONE), service("web"), nodes(2))
    assert sim.writes(since=mark) == []  # tagged once, not on every sync


def test_a_load_balancer_shared_explicitly_is_still_joined_and_never_deleted(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    first, second = make_lbs(cluster_id=ONE), make_lbs(cluster_id=TWO)
    outcome = ensure(first, service("a", ports=((80, 30080, "TCP"),)), nodes(2))
    lb_id = outcome.annotations_to_set["loadbalancer.openstack.org/load-balancer-id"]
    guest = service(
        "b",
        ports=((8080, 31080, "TCP"),),
        annotations={"loadbalancer.openstack.org/load-balancer-id": lb_id},
    )
    guest = with_annotations(guest, ensure(second, guest, nodes(2)).annotations_to_set)
    assert sorted(li["protocol_port"] for li in sim.resources("listener")) == [80, 8080]

    delete(second, guest)
    lb = one(sim, "loadbalancer")
    assert lb["id"] == lb_id
    assert f"pyccm-cluster:{ONE}" in lb["tags"]
    assert [li["protocol_port"] for li in sim.resources("listener")] == [80]
