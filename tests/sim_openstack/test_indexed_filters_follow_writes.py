"""Filtered lists answer from indexes; every write that changes a filtered field moves it.

A list by name, load balancer, pool, fixed IP, port or server name starts from the rows
holding that value instead of every row of the kind (a 5,000-node cloud has a million
members and thousands of ports): these tests rename, delete, re-associate and re-create,
then check that each filter finds exactly what the cloud now holds.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node

from .test_octavia_list_filters import LBAAS, Octavia, two

__all__ = ["two"]

Two = tuple[Octavia, dict[str, Any], dict[str, Any]]


def _octavia(sim: OpenStackSimHandle, conn: Any, method: str, path: str, body: Any = None) -> Any:
    answer = requests.request(
        method,
        f"{sim.url}{LBAAS}/{path}",
        json=body,
        headers={"X-Auth-Token": conn.authorize()},
        timeout=10,
    )
    return answer.status_code, answer.json() if answer.content else None


def _pool_of(lb: dict[str, Any]) -> str:
    (pool,) = lb["pools"]
    return str(pool["id"])


def test_a_renamed_load_balancer_is_found_by_its_new_name_only(
    sim: OpenStackSimHandle, conn: Any, two: Two
) -> None:
    octavia, first, _ = two

    status, _ = _octavia(
        sim, conn, "PUT", f"loadbalancers/{first['id']}", {"loadbalancer": {"name": "renamed"}}
    )
    sim.settle()

    assert status == 200
    assert octavia.names("loadbalancers", name="first") == set()
    assert octavia.names("loadbalancers", name="renamed") == {"renamed"}
    assert octavia.names("loadbalancers", vip_port_id=first["vip_port_id"]) == {"renamed"}


def test_a_cascade_deleted_tree_is_gone_from_every_filter(
    sim: OpenStackSimHandle, conn: Any, two: Two
) -> None:
    octavia, first, _ = two
    pool_id = _pool_of(first)

    status, _ = _octavia(sim, conn, "DELETE", f"loadbalancers/{first['id']}?cascade=true")
    sim.settle()

    assert status == 204
    assert octavia.names("loadbalancers", name="first") == set()
    assert octavia.names("listeners", loadbalancer_id=first["id"]) == set()
    assert octavia.names("pools", loadbalancer_id=first["id"]) == set()
    assert octavia.names("healthmonitors", pool_id=pool_id) == set()
    assert octavia.names("pools", name="second-pool") == {"second-pool"}
    assert sim.inventory()["member"] == 2


def test_a_batch_update_changes_only_its_own_pool(
    sim: OpenStackSimHandle, conn: Any, two: Two
) -> None:
    octavia, first, second = two
    kept = {"address": seed_node(1).internal_ip, "protocol_port": 30080, "name": "first-member-1"}
    added = {"address": seed_node(4).internal_ip, "protocol_port": 30080, "name": "added"}
    before = {m["id"]: m for m in sim.resources("member")}
    counters = sim.counters().get("member", {})

    status, _ = _octavia(
        sim, conn, "PUT", f"pools/{_pool_of(first)}/members", {"members": [kept, added]}
    )
    sim.settle()
    after = {m["id"]: m for m in sim.resources("member")}

    assert status == 202
    assert octavia.names(f"pools/{_pool_of(first)}/members") == {"first-member-1", "added"}
    assert octavia.names(f"pools/{_pool_of(second)}/members") == {
        "second-member-0",
        "second-member-1",
    }
    # The kept member is the same row; the other pool's rows are untouched.
    assert {i for i, m in after.items() if m["name"] == "first-member-1"} <= set(before)
    assert {i: m for i, m in after.items() if m["name"].startswith("second")} == {
        i: m for i, m in before.items() if m["name"].startswith("second")
    }
    assert sim.counters()["member"]["created"] == counters.get("created", 0) + 1
    assert sim.counters()["member"]["deleted"] == counters.get("deleted", 0) + 1


def test_a_batch_naming_one_address_and_port_twice_is_409_and_changes_nothing(
    sim: OpenStackSimHandle, conn: Any, two: Two
) -> None:
    octavia, first, _ = two
    member = {"address": seed_node(4).internal_ip, "protocol_port": 30080}

    status, body = _octavia(
        sim, conn, "PUT", f"pools/{_pool_of(first)}/members", {"members": [member, member]}
    )

    assert status == 409
    assert body["faultstring"] == (
        f"Another member on this pool is already using ip {seed_node(4).internal_ip} "
        "on protocol_port 30080"
    )
    assert octavia.names(f"pools/{_pool_of(first)}/members") == {
        "first-member-0",
        "first-member-1",
    }


def _neutron(sim: OpenStackSimHandle, conn: Any, method: str, path: str, body: Any = None) -> Any:
    answer = requests.request(
        method,
        f"{sim.url}/network/v2.0/{path}",
        json=body,
        headers={"X-Auth-Token": conn.authorize()},
        timeout=10,
    )
    return answer.json() if answer.content else None


def test_a_port_found_by_fixed_ip_goes_with_the_port_and_comes_back_with_a_new_one(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    address = "10.0.100.7"
    query = f"ports?fixed_ips=ip_address%3D{address}"
    fixed = [{"subnet_id": sim.seeded.private_subnet_id, "ip_address": address}]
    port = conn.network.create_port(network_id=sim.seeded.private_network_id, fixed_ips=fixed)
    found = [p["id"] for p in _neutron(sim, conn, "GET", query)["ports"]]

    conn.network.delete_port(port)
    gone = _neutron(sim, conn, "GET", query)["ports"]
    again = conn.network.create_port(network_id=sim.seeded.private_network_id, fixed_ips=fixed)

    assert found == [port.id]
    assert gone == []
    assert [p["id"] for p in _neutron(sim, conn, "GET", query)["ports"]] == [again.id]


def test_floating_ips_by_port_follow_association(sim: OpenStackSimHandle, conn: Any) -> None:
    (port,) = conn.network.ports(device_id=conn.compute.find_server("node-0000").id)
    fip = conn.network.create_ip(floating_network_id=sim.seeded.public_network_id, port_id=port.id)
    by_port = f"floatingips?port_id={port.id}"
    associated = [f["id"] for f in _neutron(sim, conn, "GET", by_port)["floatingips"]]

    conn.network.update_ip(fip, port_id=None)
    detached = _neutron(sim, conn, "GET", by_port)["floatingips"]
    by_address = _neutron(
        sim, conn, "GET", f"floatingips?floating_ip_address={fip.floating_ip_address}"
    )

    assert associated == [fip.id]
    assert detached == []
    assert [(f["id"], f["port_id"]) for f in by_address["floatingips"]] == [(fip.id, None)]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("^node-0000$", ["node-0000"]),
        ("^node\\-0003$", ["node-0003"]),
        ("^node-000[03]$", ["node-0000", "node-0003"]),
        ("node-000", ["node-0000", "node-0001", "node-0003", "node-0004", "node-0005"]),
        ("^node-0002$", []),  # the seeded cloud has no server for node 2
        ("^node-00$", []),
    ],
)
def test_servers_by_name_use_the_regex_whether_or_not_it_is_a_literal(
    sim: OpenStackSimHandle, conn: Any, pattern: str, expected: list[str]
) -> None:
    answer = requests.get(
        f"{sim.url}/compute/v2.1/servers",
        params={"name": pattern},
        headers={"X-Auth-Token": conn.authorize()},
        timeout=10,
    )

    assert sorted(s["name"] for s in answer.json()["servers"]) == expected


def test_a_deleted_server_is_gone_from_the_name_lookup(sim: OpenStackSimHandle, conn: Any) -> None:
    conn.compute.delete_server(conn.compute.find_server("node-0004"))

    assert [s.name for s in conn.compute.servers(name="^node-0004$")] == []
    assert [s.name for s in conn.compute.servers(name="^node-0005$")] == ["node-0005"]


def test_ports_by_security_group_follow_port_updates(sim: OpenStackSimHandle, conn: Any) -> None:
    group = conn.network.create_security_group(name="lb-sg-follow")
    (port,) = conn.network.ports(device_id=conn.compute.find_server("node-0001").id)
    before = port.security_group_ids

    conn.network.update_port(port, security_groups=[*before, group.id])
    tagged = [p.id for p in conn.network.ports(security_groups=[group.id])]
    conn.network.update_port(port, security_groups=before)
    untagged = [p.id for p in conn.network.ports(security_groups=[group.id])]
    conn.network.delete_security_group(group)

    assert tagged == [port.id]
    assert untagged == []
    assert [g.id for g in conn.network.security_groups(name="lb-sg-follow")] == []
