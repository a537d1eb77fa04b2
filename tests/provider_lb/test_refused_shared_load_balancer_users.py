"""A Service refused a shared load balancer writes nothing to the cloud.

It used to be tagged on the load balancer before its ports were checked: the refused
Service got its Warning, but its tag stayed, took a `max-shared-lb` slot and made the
owner's deletion keep the load balancer as still shared. Now every reason to refuse a
Service that asks to join (`load-balancer-id`) is checked by reads first: no tag, no
listener, no pool, no member, no floating IP. The service controller runs on the Octavia
provider and the OpenStack simulator, whose access log shows what was written.
"""

from __future__ import annotations

import pytest

from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.provider_lb.sharing import apply, lb_id_of, remove, sharing
from tests.support.lb import MakeLbs, nodes, one, service, writes
from tests.support.services import Harness, harness

INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
A = "kube_service_kubernetes_default_a"
B = "kube_service_kubernetes_default_b"
D = "kube_service_kubernetes_default_d"


@pytest.fixture
def h(sim: OpenStackSimHandle, make_lbs: MakeLbs) -> Harness:
    """The service controller on the Octavia provider, three nodes, `max-shared-lb = 3`."""
    controller = harness(nodes=0, load_balancers=make_lbs("[LoadBalancer]\nmax-shared-lb = 3"))
    for node in nodes(3, sim=sim):
        controller.put(node)
    return controller


def owner_and_guest(h: Harness, **owner_annotations: str) -> str:
    """Service a on port 80 (the owner) and b on 8080 sharing its load balancer; its id."""
    assert apply(h, service("a", ports=((80, 30080, "TCP"),), annotations=owner_annotations)) == ()
    lb_id = lb_id_of(h, "default/a")
    assert apply(h, sharing("b", 8080, lb_id)) == ()
    return lb_id


def test_a_service_refused_for_a_port_in_use_gets_the_warning_and_writes_nothing(
    sim: OpenStackSimHandle, h: Harness
) -> None:
    lb_id = owner_and_guest(h)
    before = {kind: sim.resources(kind) for kind in ("listener", "pool", "member", "floatingip")}
    mark = sim.mark()

    (warning,) = apply(h, sharing("c", 8080, lb_id))
    # The worker syncs a failed Service again (backed off): the same answer, still nothing.
    (again,) = apply(h, sharing("c", 8080, lb_id))

    assert warning.reason == again.reason == "SyncLoadBalancerFailed"
    assert (
        warning.message
        == again.message
        == (
            f"Error syncing load balancer: the listener port 8080 already exists on load "
            f"balancer {lb_id} (used by another Service)"
        )
    )
    assert sorted(one(sim, "loadbalancer")["tags"]) == [A, B]
    assert writes(sim, mark) == []
    assert {kind: sim.resources(kind) for kind in before} == before


def test_a_refused_service_takes_no_max_shared_lb_slot(sim: OpenStackSimHandle, h: Harness) -> None:
    lb_id = owner_and_guest(h)
    assert apply(h, sharing("c", 8080, lb_id))  # refused

    # The third of max-shared-lb = 3 (the refused Service's stale tag used to take it).
    assert apply(h, sharing("d", 9090, lb_id)) == ()

    assert sorted(one(sim, "loadbalancer")["tags"]) == [A, B, D]
    assert sorted(li["protocol_port"] for li in sim.resources("listener")) == [80, 8080, 9090]


def test_the_owner_deletes_the_load_balancer_once_its_guest_left_despite_a_refusal(
    sim: OpenStackSimHandle, h: Harness
) -> None:
    lb_id = owner_and_guest(h)
    assert apply(h, sharing("c", 8080, lb_id))  # refused

    remove(h, "default/b")
    assert one(sim, "loadbalancer")["tags"] == [A]
    remove(h, "default/a")

    # No longer shared: deleted, with the floating IP pyccm made for it.
    assert sim.resources("loadbalancer") == []
    assert sim.resources("floatingip") == []


def test_a_service_refused_for_want_of_a_floating_ip_writes_nothing(
    sim: OpenStackSimHandle, h: Harness
) -> None:
    # An internal owner: its load balancer has no floating IP, and only the owner adds one.
    assert apply(h, service("a", ports=((80, 30080, "TCP"),), annotations={INTERNAL: "true"})) == ()
    lb_id = lb_id_of(h, "default/a")
    mark = sim.mark()

    (warning,) = apply(h, sharing("b", 8080, lb_id))

    assert warning.reason == "SyncLoadBalancerFailed"
    assert warning.message == (
        f"Error syncing load balancer: load balancer {lb_id} is shared and has no floating "
        "IP: only its owner adds one"
    )
    assert writes(sim, mark) == []
    assert one(sim, "loadbalancer")["tags"] == [A]
    assert [li["protocol_port"] for li in sim.resources("listener")] == [80]
    assert sim.resources("floatingip") == []
