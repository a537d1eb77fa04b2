"""Router routes (PUT and atomic extraroutes) and security-group rules."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from openstack import exceptions as sdk_exceptions

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node

ROUTE_0 = {"destination": seed_node(0).pod_cidr, "nexthop": seed_node(0).internal_ip}
ROUTE_1 = {"destination": seed_node(1).pod_cidr, "nexthop": seed_node(1).internal_ip}


def test_put_routes_replaces_the_list(sim: OpenStackSimHandle, conn: Any) -> None:
    router = conn.network.get_router(sim.seeded.router_id)

    conn.network.update_router(router, routes=[ROUTE_0, ROUTE_1])
    conn.network.update_router(router, routes=[ROUTE_1])

    assert conn.network.get_router(router.id).routes == [ROUTE_1]


def test_add_and_remove_extraroutes_have_set_semantics(sim: OpenStackSimHandle, conn: Any) -> None:
    router = conn.network.get_router(sim.seeded.router_id)

    conn.network.add_extra_routes_to_router(router, body={"router": {"routes": [ROUTE_0]}})
    conn.network.add_extra_routes_to_router(router, body={"router": {"routes": [ROUTE_0, ROUTE_1]}})
    after_add = conn.network.get_router(router.id).routes
    conn.network.remove_extra_routes_from_router(
        router, body={"router": {"routes": [ROUTE_0, ROUTE_0]}}
    )
    conn.network.remove_extra_routes_from_router(router, body={"router": {"routes": [ROUTE_0]}})

    assert after_add == [ROUTE_0, ROUTE_1]
    assert conn.network.get_router(router.id).routes == [ROUTE_1]


def test_nexthop_outside_router_subnets_is_400(sim: OpenStackSimHandle, conn: Any) -> None:
    router = conn.network.get_router(sim.seeded.router_id)
    stray = {"destination": "10.64.9.0/24", "nexthop": "192.168.77.7"}

    with pytest.raises(sdk_exceptions.BadRequestException, match="nexthop is not connected"):
        conn.network.add_extra_routes_to_router(router, body={"router": {"routes": [stray]}})
    with pytest.raises(sdk_exceptions.BadRequestException):
        conn.network.update_router(router, routes=[stray])


def test_atomic_extraroutes_are_404_when_the_extension_is_disabled(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    sim.set_knobs(disabled_extensions={"extraroute-atomic"})
    router = conn.network.get_router(sim.seeded.router_id)

    with pytest.raises(sdk_exceptions.NotFoundException):
        conn.network.add_extra_routes_to_router(router, body={"router": {"routes": [ROUTE_0]}})
    conn.network.update_router(router, routes=[ROUTE_0])

    assert conn.network.get_router(router.id).routes == [ROUTE_0]


def test_max_routes_knob_caps_the_router_with_neutrons_router_route_quota_409(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    # Neutron 29 enforces the per-router limit as the `router_route` quota: neutron-lib's
    # OverQuota (409), whether the routes come by PUT or by add_extraroutes.
    sim.set_knobs(max_routes=1)
    router = conn.network.get_router(sim.seeded.router_id)
    conn.network.add_extra_routes_to_router(router, body={"router": {"routes": [ROUTE_0]}})

    with pytest.raises(sdk_exceptions.ConflictException) as put:
        conn.network.update_router(router, routes=[ROUTE_0, ROUTE_1])
    add = _neutron(
        sim,
        conn,
        "PUT",
        f"/routers/{router.id}/add_extraroutes",
        {"router": {"routes": [ROUTE_0, ROUTE_1]}},
    )
    again = _neutron(
        sim,
        conn,
        "PUT",
        f"/routers/{router.id}/add_extraroutes",
        {"router": {"routes": [ROUTE_0]}},
    )

    assert put.value.status_code == 409
    assert add == (
        409,
        {
            "NeutronError": {
                "type": "OverQuota",
                "message": "Quota exceeded for resources: ['router_route'].",
                "detail": "",
            }
        },
    )
    assert again[0] == 200  # already held: the router still holds one route
    assert conn.network.get_router(router.id).routes == [ROUTE_0]


def test_security_group_rules_create_list_and_refuse_duplicates(conn: Any) -> None:
    group = conn.network.create_security_group(name="lb-sg-uid-ns-svc", description="test")
    rule = {
        "security_group_id": group.id,
        "direction": "ingress",
        "protocol": "tcp",
        "ether_type": "IPv4",
        "remote_ip_prefix": "10.0.0.0/16",
        "port_range_min": 30080,
        "port_range_max": 30080,
    }

    created = conn.network.create_security_group_rule(**rule)
    with pytest.raises(sdk_exceptions.ConflictException):
        conn.network.create_security_group_rule(**rule)
    listed = list(conn.network.security_group_rules(security_group_id=group.id))
    by_name = [g.id for g in conn.network.security_groups(name="lb-sg-uid-ns-svc")]
    conn.network.delete_security_group_rule(created)

    assert created.id in {r.id for r in listed}
    # Neutron adds the two default egress rules to every new group.
    assert sorted(r.direction for r in listed) == ["egress", "egress", "ingress"]
    assert by_name == [group.id]
    assert len(list(conn.network.security_group_rules(security_group_id=group.id))) == 2


def _neutron(sim: OpenStackSimHandle, conn: Any, method: str, path: str, body: Any = None) -> Any:
    answer = requests.request(
        method,
        f"{sim.url}/network/v2.0{path}",
        json=body,
        headers={"X-Auth-Token": conn.authorize()},
        timeout=10,
    )
    return answer.status_code, answer.json() if answer.content else None


def test_router_create_takes_an_optional_gateway_and_no_routes(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    bare = _neutron(sim, conn, "POST", "/routers", {"router": {"name": "bare"}})
    routed = _neutron(sim, conn, "POST", "/routers", {"router": {"name": "r", "routes": []}})
    private = sim.seeded.private_network_id
    internal_gateway = _neutron(
        sim,
        conn,
        "POST",
        "/routers",
        {"router": {"name": "g", "external_gateway_info": {"network_id": private}}},
    )

    assert bare[0] == 201
    assert bare[1]["router"]["external_gateway_info"] is None
    assert routed == (
        400,
        {
            "NeutronError": {
                "type": "HTTPBadRequest",
                "message": "Attribute 'routes' not allowed in POST",
                "detail": "",
            }
        },
    )
    assert internal_gateway[1]["NeutronError"] == {
        "type": "BadRequest",
        "message": f"Bad router request: Network {private} is not an external network.",
        "detail": "",
    }
    assert sorted(r["name"] for r in sim.resources("router")) == ["bare", "router1"]


def test_a_router_with_an_interface_cannot_be_deleted(sim: OpenStackSimHandle, conn: Any) -> None:
    router_id = sim.seeded.router_id
    (interface,) = [
        p["id"]
        for p in sim.resources("port")
        if p["device_id"] == router_id and p["device_owner"] == "network:router_interface"
    ]

    status, body = _neutron(sim, conn, "DELETE", f"/routers/{router_id}")

    assert (status, body["NeutronError"]["type"]) == (409, "RouterInUse")
    assert body["NeutronError"]["message"] == (
        f"Router {router_id} has ports still attached: {interface}"
    )


def test_extraroute_answers_the_get_and_the_list_agree_after_adds_and_removes(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    router = f"/routers/{sim.seeded.router_id}"
    route = [
        {"destination": f"10.200.{i}.0/24", "nexthop": seed_node(i % 3).internal_ip}
        for i in range(6)
    ]

    def put(action: str, indexes: list[int]) -> Any:
        body = {"router": {"routes": [route[i] for i in indexes]}}
        return _neutron(sim, conn, "PUT", f"{router}/{action}", body)

    answers = [
        put("add_extraroutes", [0, 1, 2, 3]),
        put("add_extraroutes", [2, 3, 4, 5]),
        put("remove_extraroutes", [1, 4, 4]),
        put("add_extraroutes", [1]),
    ]
    _, shown = _neutron(sim, conn, "GET", router)
    _, listed = _neutron(sim, conn, "GET", "/routers?name=router1")

    expected = [route[i] for i in (0, 2, 3, 5, 1)]
    assert [s for s, _ in answers] == [200] * 4
    assert [len(a["router"]["routes"]) for _, a in answers] == [4, 6, 4, 5]
    assert answers[-1][1]["router"]["routes"] == expected
    assert shown["router"]["routes"] == expected
    assert listed["routers"][0]["routes"] == expected
