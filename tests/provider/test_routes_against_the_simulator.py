"""Routes against the simulated Neutron router: atomic and classic writes, address pairs,
rollback, blackholes, and when routes are not offered at all."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pyccm.provider.errors import CloudError
from pyccm.provider.interface import Route, Routes
from pyccm.provider.openstack.routes.router import OpenStackRoutes, limit_refusal, stated_limit
from pyccm_sim.openstack.calllog import Seq
from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node
from tests.support.nodes import node
from tests.support.openstack import MakeCloud

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


# --- batches -----------------------------------------------------------------------------------


def add_servers(sim: OpenStackSimHandle, indexes: range) -> None:
    for index in indexes:
        sim.add_server(index)


def batch_routes(sim: OpenStackSimHandle, make_cloud: MakeCloud, **options: Any) -> OpenStackRoutes:
    """The provider's routes on the seeded router, built with `options` (e.g. a body limit)."""
    cloud = make_cloud().cloud
    return OpenStackRoutes(
        client=cloud.client,
        router_id=sim.seeded.router_id,
        atomic="extraroute-atomic" not in sim.knobs()["disabled_extensions"],
        address_pairs=True,
        **options,
    )


def calls_by_kind(sim: OpenStackSimHandle, mark: Seq) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for call in sim.calls(since=mark):
        if call.service == "identity":
            continue
        path = call.path.split("?")[0]
        if path.startswith("/network/v2.0/ports/"):
            path = "/network/v2.0/ports/{id}"
        kinds[f"{call.method} {path.replace(sim.seeded.router_id, '{router}')}"] += 1
    return kinds


def test_a_batch_of_routes_is_one_router_call_one_port_listing_and_a_write_per_port(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    add_servers(sim, range(4, 40))
    routes = routes_of(make_cloud)

    mark = sim.mark()
    failures = routes.create_many(routes=[(f"uid-{i}", route_to(i)) for i in range(40)])

    assert failures == ()
    assert router_routes(sim) == sorted(
        (seed_node(i).pod_cidr, seed_node(i).internal_ip) for i in range(40)
    )
    assert pairs_of(sim, seed_node(39).internal_ip) == [seed_node(39).pod_cidr]
    assert calls_by_kind(sim, mark) == {
        "PUT /network/v2.0/routers/{router}/add_extraroutes": 1,
        "GET /network/v2.0/ports": 2,  # the router's networks, then their ports
        "PUT /network/v2.0/ports/{id}": 40,
    }


def test_only_the_ports_whose_pairs_change_are_written(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    add_servers(sim, range(4, 20))
    routes = routes_of(make_cloud)
    routes.create_many(routes=[(f"uid-{i}", route_to(i)) for i in range(10)])
    # A route gone from the router whose pair stayed on the port (a crash in between).
    sim.connection().network.remove_extra_routes_from_router(
        sim.seeded.router_id,
        {
            "router": {
                "routes": [
                    {"destination": seed_node(3).pod_cidr, "nexthop": seed_node(3).internal_ip}
                ]
            }
        },
    )

    mark = sim.mark()
    failures = routes.create_many(routes=[(f"uid-{i}", route_to(i)) for i in range(3, 20)])

    assert failures == ()
    # 10 new routes need a pair; node 3's port already holds its pair.
    assert calls_by_kind(sim, mark)["PUT /network/v2.0/ports/{id}"] == 10
    assert len(router_routes(sim)) == 20


def test_a_batch_is_cut_to_the_body_limit_and_a_413_splits_it(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    add_servers(sim, range(4, 24))
    # ~51 bytes a route (compact JSON): 700 bytes hold 13 routes, so 24 routes take 2 calls.
    routes = batch_routes(sim, make_cloud, max_body_bytes=700)
    sim.fail_next("network", 413, methods=("PUT",))

    mark = sim.mark()
    failures = routes.create_many(routes=[(f"uid-{i}", route_to(i)) for i in range(24)])

    assert failures == ()
    assert len(router_routes(sim)) == 24
    adds = [c for c in sim.calls(since=mark) if c.path.endswith("/add_extraroutes")]
    # The first call (13 routes) answered 413 and went again in two halves; then the other 11.
    assert [c.status for c in adds] == [413, 200, 200, 200]


def test_one_bad_route_does_not_keep_the_others_off_the_router(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    add_servers(sim, range(4, 16))
    routes = routes_of(make_cloud)
    # A next hop outside the router's subnets: Neutron refuses the whole call (400).
    stray = Route(
        name="",
        target_node="stray",
        destination_cidr="10.64.250.0/24",
        target_node_addresses=node(
            "stray", addresses=(("InternalIP", "192.168.7.7"),)
        ).status.addresses,
    )
    batch = [(f"uid-{i}", route_to(i)) for i in range(16)]
    batch.insert(5, ("uid-stray", stray))

    failures = routes.create_many(routes=batch)

    assert [(f.route.target_node, f.route_limit) for f in failures] == [("stray", None)]
    assert "nexthop is not connected" in failures[0].error
    assert len(router_routes(sim)) == 16


def test_at_the_routers_limit_the_routes_that_fit_are_added_and_the_rest_fail_with_it(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    add_servers(sim, range(4, 10))
    sim.set_knobs(max_routes=4)
    routes = routes_of(make_cloud)
    routes.create_many(routes=[("uid-0", route_to(0))])

    mark = sim.mark()
    failures = routes.create_many(routes=[(f"uid-{i}", route_to(i)) for i in range(1, 10)])

    assert len(router_routes(sim)) == 4
    assert [f.route_limit for f in failures] == [4] * 6
    assert "holds 1 routes and may hold at most 4" in failures[0].error
    assert "router_route" in failures[0].error  # the cloud's own words follow
    writes = [c for c in sim.writes(since=mark) if "/routers/" in c.path]
    # Refused, then the room found by halving: fewer calls than routes, never a loop.
    assert writes[0].status == 409
    assert len(writes) < 9


@pytest.mark.parametrize(
    ("message", "status", "limit"),
    [
        # Neutron 2023.2 on: the router_route quota.
        ("Quota exceeded for resources: ['router_route'].", 409, None),
        # Before: max_routes, which names the maximum.
        (
            "Unable to complete operation for r1. The number of routes exceeds the maximum 30.",
            400,
            30,
        ),
    ],
)
def test_both_wordings_of_the_route_limit_are_recognised(
    message: str, status: int, limit: int | None
) -> None:
    error = CloudError(
        f"router_add_extraroutes: PUT ... answered HTTP {status}: {message}", status=status
    )

    assert limit_refusal(error)
    assert stated_limit(error) == limit
    assert not limit_refusal(CloudError("Quota exceeded for resources: ['port'].", status=409))


def test_the_routers_limit_is_recognised_without_the_atomic_extension(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    sim.set_knobs(disabled_extensions=NO_ATOMIC, max_routes=2)
    routes = routes_of(make_cloud)

    failures = routes.create_many(routes=[(f"uid-{i}", route_to(i)) for i in range(4)])

    assert len(router_routes(sim)) == 2
    assert [f.route_limit for f in failures] == [2, 2]


def test_a_batch_delete_is_one_router_call_and_takes_the_pairs_back(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    add_servers(sim, range(4, 30))
    routes = routes_of(make_cloud)
    routes.create_many(routes=[(f"uid-{i}", route_to(i)) for i in range(30)])
    listed = routes.list(nodes=[])  # every route a blackhole: no node owns its next hop

    mark = sim.mark()
    failures = routes.delete_many(routes=listed[:20])

    assert failures == ()
    assert len(router_routes(sim)) == 10
    assert pairs_of(sim, seed_node(0).internal_ip) == []
    assert pairs_of(sim, seed_node(25).internal_ip) == [seed_node(25).pod_cidr]
    kinds = calls_by_kind(sim, mark)
    assert kinds["PUT /network/v2.0/routers/{router}/remove_extraroutes"] == 1
    assert kinds["PUT /network/v2.0/ports/{id}"] == 20


def test_a_failed_pair_write_undoes_only_its_own_route(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    routes = routes_of(make_cloud)
    orphan = Route(
        name="",
        target_node="ghost",
        destination_cidr="10.64.200.0/24",
        target_node_addresses=node(
            "ghost", addresses=(("InternalIP", "10.0.100.1"),)
        ).status.addresses,
    )

    failures = routes.create_many(routes=[("uid-1", route_to(1)), ("uid-ghost", orphan)])

    assert [f.route.target_node for f in failures] == ["ghost"]
    assert "no port" in failures[0].error
    assert router_routes(sim) == [(seed_node(1).pod_cidr, seed_node(1).internal_ip)]
