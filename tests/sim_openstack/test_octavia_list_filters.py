"""Octavia list endpoints filter server-side on their fields, as the real service does.

Two load balancers, each with a listener, a pool, two members and a health monitor; every
query below must return only the rows of the one it names.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node

LBAAS = "/load-balancer/v2/lbaas"


def _tree(sim: OpenStackSimHandle, name: str, port: int) -> dict[str, Any]:
    members = [
        {
            "name": f"{name}-member-{i}",
            "address": seed_node(i).internal_ip,
            "protocol_port": 30000 + port,
            "subnet_id": sim.seeded.private_subnet_id,
        }
        for i in (0, 1)
    ]
    monitor = {"type": "TCP", "delay": 5, "timeout": 3, "max_retries": 1, "name": f"{name}-hm"}
    pool = {
        "name": f"{name}-pool",
        "protocol": "TCP",
        "lb_algorithm": "ROUND_ROBIN",
        "members": members,
        "healthmonitor": monitor,
    }
    listener = {
        "name": f"{name}-listener",
        "protocol": "TCP",
        "protocol_port": port,
        "default_pool": pool,
    }
    return {
        "loadbalancer": {
            "name": name,
            "vip_subnet_id": sim.seeded.private_subnet_id,
            "tags": [name, "kube"],
            "listeners": [listener],
        }
    }


class Octavia:
    def __init__(self, sim: OpenStackSimHandle, token: str) -> None:
        self._url = sim.url + LBAAS
        self._headers = {"X-Auth-Token": token}

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = requests.post(
            f"{self._url}/loadbalancers", json=body, headers=self._headers, timeout=5
        )
        assert answer.status_code == 201, answer.text
        created: dict[str, Any] = answer.json()["loadbalancer"]
        return created

    def names(self, collection: str, **query: str) -> set[str]:
        answer = requests.get(
            f"{self._url}/{collection}", params=query, headers=self._headers, timeout=5
        )
        assert answer.status_code == 200, answer.text
        key = collection.rsplit("/", 1)[-1]
        return {row["name"] for row in answer.json()[key]}


@pytest.fixture
def two(sim: OpenStackSimHandle, conn: Any) -> tuple[Octavia, dict[str, Any], dict[str, Any]]:
    octavia = Octavia(sim, conn.authorize())
    first = octavia.create(_tree(sim, "first", 80))
    second = octavia.create(_tree(sim, "second", 443))
    sim.settle()
    return octavia, first, second


@pytest.mark.parametrize(
    ("collection", "suffix"),
    [("listeners", "listener"), ("pools", "pool")],
)
def test_listeners_and_pools_filter_by_loadbalancer_id(
    two: tuple[Octavia, dict[str, Any], dict[str, Any]], collection: str, suffix: str
) -> None:
    octavia, first, second = two

    assert octavia.names(collection, loadbalancer_id=first["id"]) == {f"first-{suffix}"}
    assert octavia.names(collection, loadbalancer_id=second["id"]) == {f"second-{suffix}"}
    assert octavia.names(collection, loadbalancer_id="no-such-lb") == set()
    assert octavia.names(collection) == {f"first-{suffix}", f"second-{suffix}"}


def test_health_monitors_filter_by_pool_id(
    two: tuple[Octavia, dict[str, Any], dict[str, Any]],
) -> None:
    octavia, first, _ = two
    (pool_id,) = [p["id"] for p in first["pools"]]

    assert octavia.names("healthmonitors", pool_id=pool_id) == {"first-hm"}
    assert octavia.names("healthmonitors") == {"first-hm", "second-hm"}


@pytest.mark.parametrize(
    ("collection", "field", "value", "expected"),
    [
        ("loadbalancers", "name", "second", {"second"}),
        ("listeners", "name", "first-listener", {"first-listener"}),
        ("listeners", "protocol_port", "443", {"second-listener"}),
        ("pools", "name", "second-pool", {"second-pool"}),
        ("healthmonitors", "name", "first-hm", {"first-hm"}),
        ("loadbalancers", "provisioning_status", "PENDING_UPDATE", set()),
        ("loadbalancers", "provisioning_status", "ACTIVE", {"first", "second"}),
        ("loadbalancers", "operating_status", "ONLINE", {"first", "second"}),
        ("listeners", "operating_status", "OFFLINE", set()),
        ("loadbalancers", "tags", "first", {"first"}),
        ("loadbalancers", "tags-any", "first,second", {"first", "second"}),
        ("loadbalancers", "not-tags", "second", {"first"}),
    ],
)
def test_list_endpoints_filter_on_their_fields(
    two: tuple[Octavia, dict[str, Any], dict[str, Any]],
    collection: str,
    field: str,
    value: str,
    expected: set[str],
) -> None:
    octavia, _, _ = two

    assert octavia.names(collection, **{field: value}) == expected


@pytest.mark.parametrize("field", ["id", "vip_port_id", "vip_address"])
def test_load_balancers_filter_by_their_id_and_vip(
    two: tuple[Octavia, dict[str, Any], dict[str, Any]], field: str
) -> None:
    octavia, first, second = two

    assert octavia.names("loadbalancers", **{field: first[field]}) == {"first"}
    assert octavia.names("loadbalancers", **{field: second[field]}) == {"second"}


def test_load_balancers_filter_by_project_id(
    two: tuple[Octavia, dict[str, Any], dict[str, Any]],
) -> None:
    octavia, first, _ = two

    assert octavia.names("loadbalancers", project_id=first["project_id"]) == {"first", "second"}
    assert octavia.names("loadbalancers", project_id="someone-else") == set()


def test_members_filter_within_their_pool(
    two: tuple[Octavia, dict[str, Any], dict[str, Any]],
) -> None:
    octavia, first, _ = two
    (pool_id,) = [p["id"] for p in first["pools"]]
    members = f"pools/{pool_id}/members"

    assert octavia.names(members) == {"first-member-0", "first-member-1"}
    assert octavia.names(members, name="first-member-1") == {"first-member-1"}
    assert octavia.names(members, address=seed_node(0).internal_ip) == {"first-member-0"}
    assert octavia.names(members, pool_id=pool_id) == {"first-member-0", "first-member-1"}
