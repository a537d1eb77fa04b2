"""The route controller over the real OpenStack provider and the simulated Neutron router:
routes and address pairs appear for seeded nodes, follow a removed node, and leave a foreign
route on a shared router alone. The simulator runs in this process (a thread), no workers.

A removed Node's route is deleted as a blackhole (no node owns its next hop any more), and a
blackhole delete leaves the port's allowed address pair alone, as upstream OCCM does; the
pair goes with the server's port."""

from __future__ import annotations

from typing import Any

import pytest

from pyccm.protocol.messages import RecordEvent, Topic
from pyccm.protocol.views import Node
from pyccm.workers.route.cidrs import parse_cluster_cidrs
from pyccm.workers.route.controller import KEY, RouteController, RouteSettings
from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.controller import SyncFailed
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import CLUSTER_CIDR, seed_node
from tests.support.nodes import node
from tests.support.openstack import MakeCloud
from tests.support.routes import conditions_of


def seeded_node(index: int) -> Node:
    seed = seed_node(index)
    return node(seed.name, 1, pod_cidrs=(seed.pod_cidr,), internal_ips=(seed.internal_ip,))


def router_routes(sim: OpenStackSimHandle) -> set[tuple[str, str]]:
    router = next(r for r in sim.resources("router") if r["id"] == sim.seeded.router_id)
    return {(r["destination"], r["nexthop"]) for r in router["routes"]}


def pairs_of(sim: OpenStackSimHandle, address: str) -> list[str]:
    port: dict[str, Any] = next(
        p
        for p in sim.resources("port")
        if any(ip["ip_address"] == address for ip in p["fixed_ips"])
    )
    return [pair["ip_address"] for pair in port.get("allowed_address_pairs", [])]


def controller(make_cloud: MakeCloud, replica: Replica, clock: FakeClock) -> RouteController:
    routes = make_cloud().cloud.routes()
    assert routes is not None
    settings = RouteSettings(cluster_cidrs=parse_cluster_cidrs(CLUSTER_CIDR))
    return RouteController(replica=replica, routes=routes, settings=settings, clock=clock)


def test_seeded_nodes_are_routed_and_a_removed_node_is_unrouted(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    replica, clock = Replica(), FakeClock()
    for index in range(3):
        node = seeded_node(index)
        replica.apply(Topic.NODE, node.name, node)
    routes = controller(make_cloud, replica, clock)

    actions = routes.sync(KEY)

    expected = {(seed_node(i).pod_cidr, seed_node(i).internal_ip) for i in range(3)}
    assert router_routes(sim) == expected
    assert pairs_of(sim, seed_node(1).internal_ip) == [seed_node(1).pod_cidr]
    assert set(conditions_of(actions).values()) == {("False", "RouteCreated")}

    replica.apply(Topic.NODE, seed_node(2).name, None)
    clock.advance(1.0)
    routes.sync(KEY)

    assert router_routes(sim) == expected - {(seed_node(2).pod_cidr, seed_node(2).internal_ip)}


def test_a_foreign_route_on_a_shared_router_is_left_alone(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    conn = sim.connection()
    foreign = {"destination": "192.168.99.0/24", "nexthop": seed_node(3).internal_ip}
    conn.network.add_extra_routes_to_router(sim.seeded.router_id, {"router": {"routes": [foreign]}})
    replica = Replica()
    node = seeded_node(0)
    replica.apply(Topic.NODE, node.name, node)

    controller(make_cloud, replica, FakeClock()).sync(KEY)

    assert router_routes(sim) == {
        ("192.168.99.0/24", seed_node(3).internal_ip),
        (seed_node(0).pod_cidr, seed_node(0).internal_ip),
    }


def test_at_the_routers_limit_the_refused_nodes_are_warned_and_the_sync_backs_off(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    sim.set_knobs(max_routes=2)
    replica = Replica()
    for index in range(4):
        node = seeded_node(index)
        replica.apply(Topic.NODE, node.name, node)

    with pytest.raises(SyncFailed) as failed:
        controller(make_cloud, replica, FakeClock()).sync(KEY)

    assert len(router_routes(sim)) == 2
    warnings = [a for a in failed.value.actions if isinstance(a, RecordEvent)]
    assert len(warnings) == 2
    assert all(w.reason == "FailedToCreateRoute" for w in warnings)
    assert all("may hold at most 2" in w.message for w in warnings)
    assert sorted(conditions_of(failed.value.actions).values()) == [
        ("False", "RouteCreated"),
        ("False", "RouteCreated"),
        ("True", "NoRouteCreated"),
        ("True", "NoRouteCreated"),
    ]
