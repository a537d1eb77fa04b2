"""A node's label change moves it into or out of the load balancers of exactly the Services
whose node selector it now matches or no longer matches (kubernetes/kubernetes#133165:
upstream's service controller ignores label changes, so a relabelled node stays in, or out
of, every pool until some Service changes). The change goes through the node sweep, like
any backend change: the Services whose selection did not change are passed by, and those
that did get one member update each."""

from __future__ import annotations

import msgspec

from pyccm.protocol.views import Node, OwnerMeta, Service
from pyccm.provider.errors import RetryAfter
from pyccm_sim.fake_provider import ANNOTATION_NODE_SELECTOR
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, nodes, service
from tests.support.services import Harness, harness, make_node, make_service

NODE_SELECTOR = "loadbalancer.openstack.org/node-selector"


def relabelled(node: Node, **labels: str) -> Node:
    meta: OwnerMeta = msgspec.structs.replace(node.metadata, labels=labels)
    return msgspec.structs.replace(node, metadata=meta)


def selecting(svc: Service, annotation: str, selector: str) -> Service:
    meta = msgspec.structs.replace(svc.metadata, annotations={annotation: selector})
    return msgspec.structs.replace(svc, metadata=meta)


# --- the sweep's decisions, on the fake cloud -------------------------------------------------


def pools_cluster() -> Harness:
    """n1, n2 in pool blue, n3 in pool green; Services blue, green and all (no selector)."""
    h = harness(nodes=0)
    for name, pool in (("n1", "blue"), ("n2", "blue"), ("n3", "green")):
        h.put(make_node(name, labels={"pool": pool}))
    h.sweep()
    for name, selector in (("blue", "pool=blue"), ("green", "pool=green"), ("all", "")):
        svc = make_service(name)
        h.put(selecting(svc, ANNOTATION_NODE_SELECTOR, selector) if selector else svc)
        h.controller.sync(f"default/{name}")
    h.enqueued.clear()
    h.cloud.calls.clear()
    return h


def members(h: Harness, name: str) -> tuple[str, ...]:
    lb = h.cloud.load_balancer(f"default/{name}")
    assert lb is not None
    return lb.members


def test_a_relabelled_node_moves_between_the_services_that_select_it() -> None:
    h = pools_cluster()
    assert (members(h, "blue"), members(h, "green")) == (("n1", "n2"), ("n3",))

    h.put(make_node("n2", labels={"pool": "green"}, version="2"))
    keys = h.sweep()

    assert sorted(keys) == ["default/blue", "default/green"]
    for key in keys:
        h.controller.sync(key)
    assert h.cloud_calls() == ["lb_update", "lb_update"]
    assert (members(h, "blue"), members(h, "green")) == (("n1",), ("n2", "n3"))
    assert members(h, "all") == ("n1", "n2", "n3")
    # The echo of that sync, and the next syncs, cost nothing.
    for key in ("default/blue", "default/green", "default/all"):
        h.controller.sync(key)
    assert h.cloud_calls() == ["lb_update", "lb_update"]


def test_a_label_no_selector_reads_enqueues_nobody() -> None:
    h = pools_cluster()

    h.put(make_node("n1", labels={"pool": "blue", "team": "a"}, version="2"))

    assert h.sweep() == []
    assert h.cloud.calls == []


def test_a_node_that_loses_its_label_leaves_only_the_selecting_service() -> None:
    h = pools_cluster()

    h.put(make_node("n3", version="2"))  # no labels any more
    keys = h.sweep()

    assert keys == ["default/green"]
    h.controller.sync("default/green")
    assert members(h, "green") == ()
    assert h.cloud_calls() == ["lb_update"]


def test_a_selector_by_label_presence_follows_the_label_coming_and_going() -> None:
    h = harness(nodes=0)
    for name in ("n1", "n2"):
        h.put(make_node(name))
    h.sweep()
    h.put(selecting(make_service("edge"), ANNOTATION_NODE_SELECTOR, "edge"))
    h.controller.sync("default/edge")
    assert members(h, "edge") == ()

    h.put(make_node("n1", labels={"edge": ""}, version="2"))
    assert h.sweep() == ["default/edge"]
    h.controller.sync("default/edge")
    assert members(h, "edge") == ("n1",)

    h.put(make_node("n1", version="3"))
    assert h.sweep() == ["default/edge"]
    h.controller.sync("default/edge")
    assert members(h, "edge") == ()


# --- on the Octavia provider and the OpenStack simulator --------------------------------------


def converge(h: Harness, key: str) -> None:
    for _ in range(10):
        try:
            h.controller.sync(key)
            return
        except RetryAfter:
            continue
    raise AssertionError(f"{key} did not converge in 10 syncs")


def member_addresses(sim: OpenStackSimHandle, lb_name: str) -> set[str]:
    """The members of the load balancer's pools (named `pool_<i>_<lb name>`), read as an
    operator would, through the Octavia API."""
    octavia = sim.connection().load_balancer
    pools = [p["id"] for p in sim.resources("pool") if p["name"].endswith("_" + lb_name)]
    assert pools, f"no pool of {lb_name}"
    return {member.address for pool in pools for member in octavia.members(pool)}


def test_relabelling_a_node_moves_its_octavia_members_in_one_sync_per_service(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    h = harness(nodes=0, load_balancers=make_lbs())
    first, second, third = nodes(3, sim=sim)
    labelled = [
        relabelled(first, zone="a"),
        relabelled(second, zone="a"),
        relabelled(third, zone="b"),
    ]
    for node in labelled:
        h.put(node)
    h.sweep()
    one_port = ((80, 30080, "TCP"),)
    for name, zone in (("zone-a", "a"), ("zone-b", "b")):
        h.put(service(name, ports=one_port, annotations={NODE_SELECTOR: f"zone={zone}"}))
        converge(h, f"default/{name}")
    h.enqueued.clear()
    address = {n.name: n.status.addresses[0].address for n in labelled}
    lb_a, lb_b = "kube_service_kubernetes_default_zone-a", "kube_service_kubernetes_default_zone-b"
    assert member_addresses(sim, lb_a) == {address[first.name], address[second.name]}
    assert member_addresses(sim, lb_b) == {address[third.name]}
    mark = sim.mark()

    h.put(relabelled(labelled[1], zone="b"))
    keys = h.sweep()
    assert sorted(keys) == ["default/zone-a", "default/zone-b"]
    for key in keys:
        h.controller.sync(key)  # one sync each: no RetryAfter

    assert member_addresses(sim, lb_a) == {address[first.name]}
    assert member_addresses(sim, lb_b) == {address[second.name], address[third.name]}
    member_writes = [
        (c.method, c.path.split("/lbaas/")[1].split("/")[0])
        for c in sim.writes(since=mark)
        if "/members" in c.path
    ]
    assert member_writes == [("PUT", "pools"), ("PUT", "pools")]
    assert len(sim.writes(since=mark)) == 2
