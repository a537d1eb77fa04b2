"""A standalone pool create with inline members or a monitor fails as Octavia 19 fails.

The pool schema accepts `members` and `healthmonitor` (the fully populated load-balancer
create uses the same type), but `PoolsController.post` never builds them: the dicts reach
the SQLAlchemy model, which raises an AttributeError, and WSME answers 500 with the
exception text. Nothing is created and the load balancer stays as it was. The same pool
body nested in a load-balancer create is fine.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node

LBAAS = "/load-balancer/v2/lbaas"
MEMBER = {"address": seed_node(0).internal_ip, "protocol_port": 30080}
MONITOR = {"type": "TCP", "delay": 5, "timeout": 3, "max_retries": 1}
SERVER_FAULT = "'dict' object has no attribute '_sa_instance_state'"


def _post(sim: OpenStackSimHandle, token: str, path: str, body: Any) -> tuple[int, Any]:
    answer = requests.post(
        sim.url + LBAAS + path, json=body, headers={"X-Auth-Token": token}, timeout=10
    )
    return answer.status_code, answer.json()


def _pool(**extra: Any) -> dict[str, Any]:
    return {"name": "p", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN", **extra}


@pytest.fixture
def lb_id(sim: OpenStackSimHandle, conn: Any) -> str:
    body = {"loadbalancer": {"name": "bare", "vip_subnet_id": sim.seeded.private_subnet_id}}
    status, created = _post(sim, conn.authorize(), "/loadbalancers", body)
    assert status == 201, created
    sim.settle()
    lb: str = created["loadbalancer"]["id"]
    return lb


@pytest.mark.parametrize(
    "children",
    [
        {"members": [MEMBER]},
        {"healthmonitor": MONITOR},
        {"members": [MEMBER], "healthmonitor": MONITOR},
    ],
    ids=["members", "healthmonitor", "both"],
)
def test_pool_create_with_inline_children_is_500_and_creates_nothing(
    sim: OpenStackSimHandle, conn: Any, lb_id: str, children: dict[str, Any]
) -> None:
    before = sim.counters()

    status, body = _post(
        sim, conn.authorize(), "/pools", {"pool": _pool(loadbalancer_id=lb_id, **children)}
    )

    assert (status, body) == (
        500,
        {"faultcode": "Server", "faultstring": SERVER_FAULT, "debuginfo": None},
    )
    assert sim.counters() == before
    assert sim.inventory()["pool"] == sim.inventory()["member"] == 0
    assert sim.resources("loadbalancer")[0]["provisioning_status"] == "ACTIVE"


def test_empty_inline_children_are_accepted(sim: OpenStackSimHandle, conn: Any, lb_id: str) -> None:
    body = {"pool": _pool(loadbalancer_id=lb_id, members=[], healthmonitor=None)}

    status, created = _post(sim, conn.authorize(), "/pools", body)

    assert status == 201, created
    assert sim.inventory()["pool"] == 1


def test_a_pool_for_a_listener_that_does_not_exist_is_500_a_malformed_id_400(
    sim: OpenStackSimHandle, conn: Any, lb_id: str
) -> None:
    missing = "6a4f2b7e-0000-4000-8000-000000000000"
    status, body = _post(sim, conn.authorize(), "/pools", {"pool": _pool(listener_id=missing)})

    assert (status, body["faultstring"]) == (
        500,
        "'NoneType' object has no attribute 'load_balancer_id'",
    )
    assert sim.inventory()["pool"] == 0
    malformed = _post(sim, conn.authorize(), "/pools", {"pool": _pool(listener_id="nope")})
    assert malformed == (
        400,
        {
            "faultcode": "Client",
            "faultstring": "Invalid input for field/attribute listener_id. Value: 'nope'. "
            "Value should be UUID format",
            "debuginfo": None,
        },
    )


def test_the_same_children_are_fine_inside_a_load_balancer_create(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    pool = _pool(members=[MEMBER], healthmonitor=MONITOR)
    listener = {"name": "l", "protocol": "TCP", "protocol_port": 80, "default_pool": pool}
    body = {
        "loadbalancer": {
            "name": "full",
            "vip_subnet_id": sim.seeded.private_subnet_id,
            "listeners": [listener],
        }
    }

    status, created = _post(sim, conn.authorize(), "/loadbalancers", body)

    assert status == 201, created
    assert (sim.inventory()["member"], sim.inventory()["healthmonitor"]) == (1, 1)
