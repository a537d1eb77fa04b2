"""A dual-stack seed (IPv6 tenant subnet, node ports with an IPv6 fixed IP) and Octavia's
`additional_vips` (API 2.26): accepted on another subnet of the VIP network, refused as
Octavia refuses them (below 2.26, on another network, twice on one subnet)."""

from __future__ import annotations

from typing import Any

import pytest

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import node_internal_ip, node_internal_ipv6


@pytest.fixture
def conn(dual_conn: Any) -> Any:
    """This module's connection is to the dual-stack simulator (conftest.py)."""
    return dual_conn


def create(conn: Any, **body: Any) -> Any:
    return conn.load_balancer.post(
        "/lbaas/loadbalancers", json={"loadbalancer": {"name": "lb", **body}}
    )


def test_node_ports_have_an_ipv4_and_an_ipv6_address(dual: OpenStackSimHandle) -> None:
    ports = [p for p in dual.resources("port") if p["device_owner"].startswith("compute:")]
    addresses = sorted(tuple(f["ip_address"] for f in p["fixed_ips"]) for p in ports)
    assert addresses == [
        (node_internal_ip(0), node_internal_ipv6(0)),
        (node_internal_ip(1), node_internal_ipv6(1)),
    ]
    (subnet,) = [s for s in dual.resources("subnet") if s["ip_version"] == 6]
    assert subnet["id"] == dual.seeded.private_subnet_v6_id


def test_an_additional_vip_takes_an_address_of_the_other_subnet(
    dual: OpenStackSimHandle, conn: Any
) -> None:
    reply = create(
        conn,
        vip_subnet_id=dual.seeded.private_subnet_id,
        additional_vips=[{"subnet_id": dual.seeded.private_subnet_v6_id}],
    )

    assert reply.status_code == 201
    lb = reply.json()["loadbalancer"]
    (extra,) = lb["additional_vips"]
    assert extra["subnet_id"] == dual.seeded.private_subnet_v6_id
    assert extra["ip_address"].startswith("fd00:10::")
    # The real Octavia names the VIP port in each additional VIP (conformance tier:
    # test_beyond_upstream_on_real_openstack.py).
    assert extra["port_id"] == lb["vip_port_id"]
    (port,) = [p for p in dual.resources("port") if p["id"] == lb["vip_port_id"]]
    assert [f["ip_address"] for f in port["fixed_ips"]] == [lb["vip_address"], extra["ip_address"]]


@pytest.mark.parametrize(
    ("version", "extra", "error"),
    [
        ("2.25", "v6", "Unknown attribute for argument loadbalancer: additional_vips"),
        ("2.27", "public", "All VIP subnets must belong to the same network."),
        ("2.27", "v4", "Duplicate VIP subnet(s) specified."),
    ],
)
def test_additional_vips_are_refused_as_octavia_refuses_them(
    dual: OpenStackSimHandle, conn: Any, version: str, extra: str, error: str
) -> None:
    dual.set_knobs(octavia_version=version)
    subnet = {
        "v6": dual.seeded.private_subnet_v6_id,
        "public": dual.seeded.public_subnet_id,
        "v4": dual.seeded.private_subnet_id,
    }[extra]

    reply = create(
        conn, vip_subnet_id=dual.seeded.private_subnet_id, additional_vips=[{"subnet_id": subnet}]
    )

    assert reply.status_code == 400
    assert error in reply.text
    assert dual.resources("loadbalancer") == []
