"""A floating IP on a port of a dual-stack network stands for the port's one IPv4 address,
and needs a router with an interface on THAT address's subnet, as in the real Neutron
(l3_db._internal_fip_assoc_data, get_router_for_floatingip; the conformance tier sends the
same requests to Neutron 29 in test_beyond_upstream_on_real_openstack.py). The simulator
used to take the first IPv4 address of a port with several, and any router on the port's
network."""

from __future__ import annotations

from typing import Any

import pytest

from pyccm_sim.openstack.testing import OpenStackSimHandle


@pytest.fixture
def conn(dual_conn: Any) -> Any:
    """This module's connection is to the dual-stack simulator (conftest.py)."""
    return dual_conn


def port_on(conn: Any, network_id: str, *subnets: str) -> Any:
    return conn.network.create_port(
        network_id=network_id, fixed_ips=[{"subnet_id": s} for s in subnets]
    )


def associate(
    dual: OpenStackSimHandle, conn: Any, port: Any, fixed: str | None = None
) -> tuple[int, Any]:
    body: dict[str, Any] = {"floating_network_id": dual.seeded.public_network_id}
    body["port_id"] = port.id
    if fixed is not None:
        body["fixed_ip_address"] = fixed
    reply = conn.network.post("/floatingips", json={"floatingip": body})
    return reply.status_code, reply.json()


def test_a_dual_stack_port_gets_it_on_its_ipv4_address(dual: OpenStackSimHandle, conn: Any) -> None:
    seeded = dual.seeded
    port = port_on(
        conn, seeded.private_network_id, seeded.private_subnet_v6_id, seeded.private_subnet_id
    )
    (ipv4,) = [
        f["ip_address"] for f in port.fixed_ips if f["subnet_id"] == seeded.private_subnet_id
    ]

    status, body = associate(dual, conn, port)

    assert status == 201
    assert body["floatingip"]["fixed_ip_address"] == ipv4


def test_refused_as_neutron_refuses_it(dual: OpenStackSimHandle, conn: Any) -> None:
    seeded = dual.seeded
    network = seeded.private_network_id
    # A second IPv4 subnet on the tenant network, with no router interface.
    unrouted = conn.network.create_subnet(
        network_id=network, ip_version=4, cidr="10.21.0.0/24", name="unrouted"
    )
    v6_only = port_on(conn, network, seeded.private_subnet_v6_id)
    two_v4 = port_on(conn, network, seeded.private_subnet_id, unrouted.id)
    behind_no_router = port_on(conn, network, unrouted.id)
    (v6_address,) = [f["ip_address"] for f in v6_only.fixed_ips]

    answers = {
        "no IPv4": associate(dual, conn, v6_only),
        "an IPv6 address": associate(dual, conn, v6_only, v6_address),
        "two IPv4": associate(dual, conn, two_v4),
        "unrouted": associate(dual, conn, behind_no_router),
        "not an address": associate(dual, conn, two_v4, "10.0.0.999"),
    }

    assert {case: status for case, (status, _) in answers.items()} == {
        "no IPv4": 400,
        "an IPv6 address": 400,
        "two IPv4": 400,
        "unrouted": 404,
        "not an address": 400,
    }
    messages = {case: body["NeutronError"]["message"] for case, (_, body) in answers.items()}
    assert messages["no IPv4"] == (
        f"Bad floatingip request: Cannot add floating IP to port {v6_only.id} that has no "
        "fixed IPv4 addresses."
    )
    assert messages["an IPv6 address"] == (
        f"Bad floatingip request: Cannot process floating IP association with {v6_address}, "
        "since that is not an IPv4 address."
    )
    assert messages["two IPv4"] == (
        f"Bad floatingip request: Port {two_v4.id} has multiple fixed IPv4 addresses.  Must "
        "provide a specific IPv4 address when assigning a floating IP."
    )
    assert messages["unrouted"] == (
        f"External network {seeded.public_network_id} is not reachable from subnet "
        f"{unrouted.id}.  Therefore, cannot associate Port {behind_no_router.id} with a "
        "Floating IP."
    )
    assert messages["not an address"] == (
        "Invalid input for fixed_ip_address. Reason: '10.0.0.999' is not a valid IP address."
    )
    assert answers["unrouted"][1]["NeutronError"]["type"] == "ExternalGatewayForFloatingIPNotFound"
    assert dual.resources("floatingip") == []
