"""Routes against the simulated Neutron router: atomic and classic writes, address pairs,
rollback, blackholes, and when routes are not offered at all."""

from __future__ import annotations

from typing import Any

import pytest

from provider.errors import CloudError
from provider.interface import Route, Routes
from sim.openstack.calllog import Seq
from sim.openstack.testing import OpenStackSimHandle
from sim.scenario import seed_node
from tests.provider.conftest import MakeCloud, node

NO_ATOMIC = {"extraroute-atomic"}


def routes_of(make_cloud: MakeCloud, extra: str = "") -> Routes:
    routes = make_cloud(extra).cloud.routes()
    assert routes is not None
    return routes


def route_to(index: int) -> Route:
    seed = seed_node(index)
    return Route(
        name="",
        target_node=seed.name,
        destination_cidr=seed.pod_cidr,
        target_node_addresses=node(
            seed.name, addresses=(("InternalIP", seed.internal_ip),)
        ).status.addresses,
    )


def router(sim: OpenStackSimHandle) -> dict[str, Any]:
    return next(r for r in sim.resources("router") if r["id"] == sim.seeded.router_id)


def router_routes(sim: OpenStackSimHandle) -> list[tuple[str, str]]:
    return sorted((r["destination"], r["nexthop"]) for r in router(sim)["routes"])


def pairs_of(sim: OpenStackSimHandle, address: str) -> list[str]:
    port = next(
        p
        for p in sim.resources("port")
        if any(ip["ip_address"] == address for ip in p["fixed_ips"])
    )
    return [pair["ip_address"] for pair in port.get("allowed_address_pairs", [])]


def write_paths(sim: OpenStackSimHandle, mark: Seq) -> list[tuple[str, str]]:
    return [(c.method, c.path.split("?")[0]) for c in sim.writes(since=mark)]


def test_atomic_create_adds_the_route_and_the_address_pair(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    routes = routes_of(make_cloud)
    seed = seed_node(1)

    mark = sim.mark()
    routes.create(name_hint="uid-1", route=route_to(1))

    assert router_routes(sim) == [(seed.pod_cidr, seed.internal_ip)]
    assert pairs_of(sim, seed.internal_ip) == [seed.pod_cidr]
    writes = write_paths(sim, mark)
    assert writes[0] == ("PUT", f"/network/v2.0/routers/{sim.seeded.router_id}/add_extraroutes")
    assert [m for m, _ in writes] == ["PUT", "PUT"]


def test_listed_routes_name_their_node_and_delete_removes_route_and_pair(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    routes = routes_of(make_cloud)
    routes.create(name_hint="uid-2", route=route_to(2))
    seed = seed_node(2)
    nodes = [node(seed.name, addresses=(("InternalIP", seed.internal_ip),))]

    listed = routes.list(nodes=nodes)
    routes.delete(route=listed[0])

    assert [(r.target_node, r.destination_cidr, r.blackhole) for r in listed] == [
        (seed.name, seed.pod_cidr, False)
    ]
    assert router_routes(sim) == []
    assert pairs_of(sim, seed.internal_ip) == []


def test_without_the_atomic_extension_the_route_list_is_rewritten(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    sim.set_knobs(disabled_extensions=NO_ATOMIC)
    routes = routes_of(make_cloud)
    routes.create(name_hint="uid-1", route=route_to(1))

    mark = sim.mark()
    routes.create(name_hint="uid-2", route=route_to(2))

    assert router_routes(sim) == sorted(
        [(seed_node(i).pod_cidr, seed_node(i).internal_ip) for i in (1, 2)]
    )
    assert ("PUT", f"/network/v2.0/routers/{sim.seeded.router_id}") in write_paths(sim, mark)
    assert not [c for c in sim.calls() if "extraroutes" in c.path]


def test_a_classic_create_of_an_existing_route_writes_nothing(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    sim.set_knobs(disabled_extensions=NO_ATOMIC)
    routes = routes_of(make_cloud)
    routes.create(name_hint="uid-1", route=route_to(1))

    mark = sim.mark()
    routes.create(name_hint="uid-1", route=route_to(1))

    assert write_paths(sim, mark) == []


def test_a_classic_delete_keeps_the_other_routes(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    sim.set_knobs(disabled_extensions=NO_ATOMIC)
    routes = routes_of(make_cloud)
    for index in (1, 2, 3):
        routes.create(name_hint=f"uid-{index}", route=route_to(index))

    routes.delete(route=route_to(2))

    assert router_routes(sim) == sorted(
        [(seed_node(i).pod_cidr, seed_node(i).internal_ip) for i in (1, 3)]
    )


def test_a_failed_address_pair_rolls_the_route_back(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    routes = routes_of(make_cloud)
    # A next hop inside the router's subnet that no port holds: the pair cannot be added.
    orphan = Route(
        name="",
        target_node="ghost",
        destination_cidr="10.64.200.0/24",
        target_node_addresses=node(
            "ghost", addresses=(("InternalIP", "10.0.100.1"),)
        ).status.addresses,
    )

    with pytest.raises(CloudError, match="no port"):
        routes.create(name_hint="uid-ghost", route=orphan)

    assert router_routes(sim) == []
    assert [c for c in sim.calls() if c.path.endswith("/remove_extraroutes")]


def test_a_deleted_nodes_route_is_a_blackhole_and_goes_with_its_address_pair(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    # The Node is gone from the cluster, its server is not: upstream removes the route and
    # the pod CIDR's address pair from the server's port.
    routes = routes_of(make_cloud)
    routes.create(name_hint="uid-1", route=route_to(1))
    assert pairs_of(sim, seed_node(1).internal_ip) == [seed_node(1).pod_cidr]

    listed = routes.list(nodes=[])
    routes.delete(route=listed[0])

    assert [(r.target_node, r.blackhole) for r in listed] == [(seed_node(1).internal_ip, True)]
    assert router_routes(sim) == []
    assert pairs_of(sim, seed_node(1).internal_ip) == []


def test_without_allowed_address_pairs_no_port_is_touched(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    sim.set_knobs(disabled_extensions={"allowed-address-pairs"})
    routes = routes_of(make_cloud)

    mark = sim.mark()
    routes.create(name_hint="uid-1", route=route_to(1))

    assert router_routes(sim) == [(seed_node(1).pod_cidr, seed_node(1).internal_ip)]
    assert not [c for c in sim.calls(since=mark) if "/ports" in c.path]


def test_an_ipv6_destination_needs_an_ipv6_internal_ip(make_cloud: MakeCloud) -> None:
    routes = routes_of(make_cloud)
    route = Route(
        name="",
        target_node="node-0001",
        destination_cidr="fd00:10::/64",
        target_node_addresses=route_to(1).target_node_addresses,
    )

    with pytest.raises(CloudError, match="no address found for host node-0001"):
        routes.create(name_hint="uid-1", route=route)


def test_a_deleted_node_port_does_not_block_the_route_delete(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    routes = routes_of(make_cloud)
    routes.create(name_hint="uid-1", route=route_to(1))
    sim.delete_server("node-0001")

    routes.delete(route=route_to(1))

    assert router_routes(sim) == []


@pytest.mark.parametrize(
    ("extra", "disabled"),
    [
        ("[Route]\nrouter-id =\n", set()),
        ("", {"extraroute", "extraroute-atomic"}),
    ],
)
def test_routes_are_not_offered_without_a_router_or_the_extension(
    sim: OpenStackSimHandle, make_cloud: MakeCloud, extra: str, disabled: set[str]
) -> None:
    sim.set_knobs(disabled_extensions=disabled)

    assert make_cloud(extra).cloud.routes() is None


def test_the_calls_of_an_atomic_create_and_delete(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    routes = routes_of(make_cloud)
    routes.create(name_hint="uid-1", route=route_to(1))  # learns the router's networks once
    router_path = f"/network/v2.0/routers/{sim.seeded.router_id}"

    mark = sim.mark()
    routes.create(name_hint="uid-2", route=route_to(2))
    created = [(c.method, c.path.split("?")[0]) for c in sim.calls(since=mark)]
    mark = sim.mark()
    routes.delete(route=route_to(2))
    deleted = [(c.method, c.path.split("?")[0]) for c in sim.calls(since=mark)]

    port_update = ("PUT", created[-1][1])
    assert created == [
        ("PUT", f"{router_path}/add_extraroutes"),
        ("GET", "/network/v2.0/ports"),
        port_update,
    ]
    assert deleted == [
        ("PUT", f"{router_path}/remove_extraroutes"),
        ("GET", "/network/v2.0/ports"),
        port_update,
    ]
