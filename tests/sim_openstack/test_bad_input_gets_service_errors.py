"""Bad input never crashes the simulator: each service answers in its own error shape."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from pyccm_sim.openstack.testing import OpenStackSimHandle

MALFORMED = [
    ("/network/v2.0/ports", "NeutronError"),
    ("/load-balancer/v2/lbaas/loadbalancers", "faultstring"),
    ("/identity/v3/auth/tokens", "error"),
]


@pytest.fixture
def token(conn: Any) -> str:
    value: str = conn.authorize()
    return value


@pytest.mark.parametrize(("path", "shape"), MALFORMED)
def test_malformed_json_is_400_in_the_service_shape(
    sim: OpenStackSimHandle, token: str, path: str, shape: str
) -> None:
    answer = requests.post(
        sim.url + path,
        data=b"{not json",
        timeout=5,
        headers={"X-Auth-Token": token, "Content-Type": "application/json"},
    )

    assert answer.status_code == 400
    assert shape in answer.json()


def test_unknown_neutron_attribute_is_400_unrecognized(sim: OpenStackSimHandle, token: str) -> None:
    body = {"port": {"network_id": sim.seeded.private_network_id, "colour": "blue"}}

    answer = requests.post(
        f"{sim.url}/network/v2.0/ports", json=body, headers={"X-Auth-Token": token}, timeout=5
    )

    assert answer.status_code == 400
    assert answer.json()["NeutronError"]["message"] == "Unrecognized attribute(s) 'colour'"


def test_unknown_octavia_attribute_is_400(sim: OpenStackSimHandle, token: str) -> None:
    body = {"loadbalancer": {"vip_subnet_id": sim.seeded.private_subnet_id, "colour": "blue"}}

    answer = requests.post(
        f"{sim.url}/load-balancer/v2/lbaas/loadbalancers",
        json=body,
        headers={"X-Auth-Token": token},
        timeout=5,
    )

    assert answer.status_code == 400
    assert "Unknown attribute for argument loadbalancer: colour" in answer.json()["faultstring"]
    assert sim.inventory()["loadbalancer"] == 0


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("/network/v2.0/ports/not-a-uuid", "NeutronError"),
        ("/load-balancer/v2.0/lbaas/listeners/not-a-uuid", "faultstring"),
        ("/compute/v2.1/flavors/999", "itemNotFound"),
    ],
)
def test_bad_ids_are_404(sim: OpenStackSimHandle, token: str, path: str, key: str) -> None:
    answer = requests.get(sim.url + path, headers={"X-Auth-Token": token}, timeout=5)

    assert answer.status_code == 404
    assert key in answer.json()


def test_wrong_method_is_405_and_unknown_path_404(sim: OpenStackSimHandle, token: str) -> None:
    headers = {"X-Auth-Token": token}

    wrong = requests.patch(f"{sim.url}/network/v2.0/ports", json={}, headers=headers, timeout=5)
    unknown = requests.get(f"{sim.url}/load-balancer/v2/lbaas/gizmos", headers=headers, timeout=5)

    assert wrong.status_code == 405
    assert wrong.json()["NeutronError"]["type"] == "HTTPMethodNotAllowed"
    assert unknown.status_code == 404
    assert "faultstring" in unknown.json()


def test_wrong_types_in_octavia_tree_are_400_and_create_nothing(
    sim: OpenStackSimHandle, token: str
) -> None:
    listener = {"protocol": "TCP", "protocol_port": "eighty"}
    body = {
        "loadbalancer": {"vip_subnet_id": sim.seeded.private_subnet_id, "listeners": [listener]}
    }
    ports_before = sim.inventory()["port"]

    answer = requests.post(
        f"{sim.url}/load-balancer/v2/lbaas/loadbalancers",
        json=body,
        headers={"X-Auth-Token": token},
        timeout=5,
    )

    assert answer.status_code == 400
    assert sim.inventory()["loadbalancer"] == 0
    # Validation happens before the VIP port is created: nothing leaks into Neutron.
    assert sim.inventory()["port"] == ports_before


def test_body_of_the_wrong_json_type_is_400(sim: OpenStackSimHandle, token: str) -> None:
    headers = {"X-Auth-Token": token}

    neutron = requests.put(
        f"{sim.url}/network/v2.0/routers/{sim.seeded.router_id}",
        json=[1, 2],
        headers=headers,
        timeout=5,
    )
    octavia = requests.post(
        f"{sim.url}/load-balancer/v2/lbaas/pools", json="pool", headers=headers, timeout=5
    )
    routes = requests.put(
        f"{sim.url}/network/v2.0/routers/{sim.seeded.router_id}",
        json={"router": {"routes": [{"destination": "x", "nexthop": "y"}]}},
        headers=headers,
        timeout=5,
    )

    assert (neutron.status_code, octavia.status_code, routes.status_code) == (400, 400, 400)
    assert requests.get(f"{sim.url}/_sim/health", timeout=5).json() == {"ok": True}
