"""Several Services on one load balancer through `load-balancer-id`: each adds its own
tagged listeners, the limit `max-shared-lb` holds, and deleting one Service removes only
its listeners until the last one deletes the load balancer."""

from __future__ import annotations

import pytest

from pyccm.protocol.views import Service
from pyccm.provider.errors import CloudError
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, delete, ensure, nodes, one, service, with_annotations, writes

LB_ID = "loadbalancer.openstack.org/load-balancer-id"
A = "kube_service_kubernetes_default_a"
B = "kube_service_kubernetes_default_b"


def owner_and_guest(lbs: LoadBalancers) -> tuple[Service, Service]:
    first = service("a", ports=((80, 30080, "TCP"),))
    first = with_annotations(first, ensure(lbs, first, nodes(2)).annotations_to_set)
    guest = service(
        "b",
        ports=((8080, 31080, "TCP"),),
        annotations={LB_ID: first.metadata.annotations[LB_ID]},
    )
    outcome = ensure(lbs, guest, nodes(2))
    return first, with_annotations(guest, outcome.annotations_to_set)


def test_a_second_service_adds_its_tagged_listener_to_the_shared_load_balancer(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    _, guest = owner_and_guest(lbs)

    lb = one(sim, "loadbalancer")
    assert sorted(lb["tags"]) == [A, B]
    tags = {li["protocol_port"]: li["tags"] for li in sim.resources("listener")}
    assert tags == {80: [A], 8080: [B]}
    assert one(sim, "floatingip")["port_id"] == lb["vip_port_id"]
    assert guest.metadata.annotations[LB_ID] == lb["id"]
    assert (
        guest.metadata.annotations["loadbalancer.openstack.org/load-balancer-address"]
        == one(sim, "floatingip")["floating_ip_address"]
    )


def test_deleting_the_owner_keeps_the_load_balancer_for_the_guest(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    first, guest = owner_and_guest(lbs)

    delete(lbs, first)

    lb = one(sim, "loadbalancer")
    assert lb["tags"] == [B]
    assert [li["protocol_port"] for li in sim.resources("listener")] == [8080]
    assert sim.inventory()["floatingip"] == 1

    delete(lbs, guest)
    assert sim.inventory()["loadbalancer"] == 0
    assert sim.inventory()["floatingip"] == 0


def test_deleting_the_guest_removes_only_its_listener_and_tag(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    _, guest = owner_and_guest(lbs)

    delete(lbs, guest)

    assert one(sim, "loadbalancer")["tags"] == [A]
    assert [li["protocol_port"] for li in sim.resources("listener")] == [80]


def test_max_shared_lb_is_enforced(sim: OpenStackSimHandle, make_lbs: MakeLbs) -> None:
    lbs = make_lbs("[LoadBalancer]\nmax-shared-lb = 2")
    first, _ = owner_and_guest(lbs)
    third = service(
        "c", ports=((9090, 31090, "TCP"),), annotations={LB_ID: first.metadata.annotations[LB_ID]}
    )

    mark = sim.mark()

    with pytest.raises(CloudError, match="already shared by 2 Services"):
        ensure(lbs, third, nodes(1))
    assert len(sim.resources("listener")) == 2
    assert writes(sim, mark) == []


def test_an_internal_service_cannot_share(sim: OpenStackSimHandle, lbs: LoadBalancers) -> None:
    first = service("a", ports=((80, 30080, "TCP"),))
    first = with_annotations(first, ensure(lbs, first, nodes(1)).annotations_to_set)
    internal = service(
        "b",
        annotations={
            LB_ID: first.metadata.annotations[LB_ID],
            "service.beta.kubernetes.io/openstack-internal-load-balancer": "true",
        },
    )

    mark = sim.mark()

    with pytest.raises(CloudError, match="internal Service cannot share"):
        ensure(lbs, internal, nodes(1))
    assert one(sim, "loadbalancer")["tags"] == [A]
    assert writes(sim, mark) == []


def test_a_port_used_by_another_service_is_refused(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    first = service("a", ports=((80, 30080, "TCP"),))
    first = with_annotations(first, ensure(lbs, first, nodes(1)).annotations_to_set)
    clash = service(
        "b", ports=((80, 31080, "TCP"),), annotations={LB_ID: first.metadata.annotations[LB_ID]}
    )

    with pytest.raises(CloudError, match="listener port 80 already exists"):
        ensure(lbs, clash, nodes(1))
    assert [li["tags"] for li in sim.resources("listener")] == [[A]]
