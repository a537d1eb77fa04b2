"""What an operator runs while debugging pyccm works with the `openstack` CLI.

Lists and shows of load balancers, listeners, pools, members, floating IPs, ports and
servers, and creating a router (with or without a gateway) and setting a route on it.
"""

from __future__ import annotations

from typing import Any

import pytest

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node

from .test_octavia_load_balancers import LB_NAME, _tree, wait_for
from .test_openstack_cli_against_the_simulator import BINARY, _cli

pytestmark = [
    pytest.mark.openstackcli,
    pytest.mark.skipif(BINARY is None, reason="the openstack CLI is not installed"),
]


def test_load_balancer_lists_and_shows(sim: OpenStackSimHandle, conn: Any) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)
    (pool,) = conn.load_balancer.pools(loadbalancer_id=lb.id)
    (listener,) = conn.load_balancer.listeners(loadbalancer_id=lb.id)

    shown_lb = _cli(sim, "loadbalancer", "show", LB_NAME)
    listeners = _cli(sim, "loadbalancer", "listener", "list")
    shown_listener = _cli(sim, "loadbalancer", "listener", "show", listener.id)
    pools = _cli(sim, "loadbalancer", "pool", "list")
    shown_pool = _cli(sim, "loadbalancer", "pool", "show", pool.id)
    members = _cli(sim, "loadbalancer", "member", "list", pool.id)

    assert (shown_lb["id"], shown_lb["provisioning_status"]) == (lb.id, "ACTIVE")
    assert [x["id"] for x in listeners] == [listener.id]
    assert (shown_listener["protocol"], shown_listener["protocol_port"]) == ("TCP", 80)
    assert [x["id"] for x in pools] == [pool.id]
    assert shown_pool["lb_algorithm"] == "ROUND_ROBIN"
    assert sorted(x["address"] for x in members) == sorted(seed_node(i).internal_ip for i in (0, 1))


def test_network_and_server_lists_and_shows(sim: OpenStackSimHandle) -> None:
    server = next(s for s in sim.resources("server") if s["name"] == seed_node(3).name)

    fips = _cli(sim, "floating", "ip", "list")
    fip = _cli(sim, "floating", "ip", "show", fips[0]["ID"])
    ports = _cli(sim, "port", "list", "--device-id", server["id"])
    port = _cli(sim, "port", "show", ports[0]["ID"])
    shown_server = _cli(sim, "server", "show", server["name"])

    assert [x["Fixed IP Address"] for x in fips] == [seed_node(3).internal_ip]
    assert fip["port_id"] == port["id"]
    assert port["device_id"] == server["id"]
    assert (shown_server["id"], shown_server["status"]) == (server["id"], "ACTIVE")


def test_router_create_show_and_set_route(sim: OpenStackSimHandle) -> None:
    route = f"destination={seed_node(0).pod_cidr},gateway={seed_node(0).internal_ip}"

    bare = _cli(sim, "router", "create", "debug-router")
    gatewayed = _cli(sim, "router", "create", "edge", "--external-gateway", "public")
    _cli(sim, "router", "set", "--route", route, "router1", output=False)
    shown = _cli(sim, "router", "show", "router1")

    assert bare["external_gateway_info"] is None
    assert gatewayed["external_gateway_info"]["network_id"] == sim.seeded.public_network_id
    assert shown["routes"] == [
        {"destination": seed_node(0).pod_cidr, "nexthop": seed_node(0).internal_ip}
    ]
    assert sorted(r["name"] for r in sim.resources("router")) == [
        "debug-router",
        "edge",
        "router1",
    ]
