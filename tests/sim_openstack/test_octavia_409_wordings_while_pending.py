"""A busy load balancer refuses writes with the wording Octavia uses for that operation.

Octavia 19 has two 409 texts: the load balancer's own PUT and DELETE answer
`LBPendingStateError` ("Invalid state <status> of loadbalancer resource <id>"), every child
controller answers `ImmutableObject` ("<resource> <id> is immutable and cannot be
updated."), and members and health monitors name their *pool* when the pool is the busy
one (it is PENDING_* after any member or monitor write, and during its own create). A
delete with children and no cascade is a 400 before any state is looked at. Bodies are
WSME faults: `{"faultcode": "Client", "faultstring": ..., "debuginfo": null}`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import requests

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node

LBAAS = "/load-balancer/v2/lbaas"
LONG_S = 30.0


class Octavia:
    """Raw HTTP to the simulated Octavia, returning (status, body)."""

    def __init__(self, sim: OpenStackSimHandle, token: str) -> None:
        self._url = sim.url + LBAAS
        self._headers = {"X-Auth-Token": token}

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        answer = requests.request(
            method, self._url + path, json=body, headers=self._headers, timeout=10
        )
        return answer.status_code, (answer.json() if answer.content else None)

    def create_tree(self, sim: OpenStackSimHandle, *, monitor: bool) -> dict[str, Any]:
        pool: dict[str, Any] = {
            "name": "pool",
            "protocol": "TCP",
            "lb_algorithm": "ROUND_ROBIN",
            "members": [
                {
                    "address": seed_node(0).internal_ip,
                    "protocol_port": 30080,
                    "subnet_id": sim.seeded.private_subnet_id,
                }
            ],
        }
        if monitor:
            pool["healthmonitor"] = {"type": "TCP", "delay": 5, "timeout": 3, "max_retries": 1}
        body = {
            "loadbalancer": {
                "name": "busy",
                "vip_subnet_id": sim.seeded.private_subnet_id,
                "listeners": [
                    {"name": "l", "protocol": "TCP", "protocol_port": 80, "default_pool": pool}
                ],
            }
        }
        status, created = self.call("POST", "/loadbalancers", body)
        assert status == 201, created
        lb: dict[str, Any] = created["loadbalancer"]
        return lb


def fault(text: str) -> dict[str, Any]:
    return {"faultcode": "Client", "faultstring": text, "debuginfo": None}


@pytest.fixture
def octavia(sim: OpenStackSimHandle, conn: Any) -> Octavia:
    return Octavia(sim, conn.authorize())


# One refused write: (method, path template, body) over ids lb / listener / pool / monitor.
Write = tuple[str, str, Callable[[dict[str, str]], Any]]
LB_PUT: Write = ("PUT", "/loadbalancers/{lb}", lambda ids: {"loadbalancer": {"name": "x"}})
LB_CASCADE_DELETE: Write = ("DELETE", "/loadbalancers/{lb}?cascade=true", lambda ids: None)
LISTENER_CREATE: Write = (
    "POST",
    "/listeners",
    lambda ids: {
        "listener": {"loadbalancer_id": ids["lb"], "protocol": "UDP", "protocol_port": 53}
    },
)
LISTENER_PUT: Write = ("PUT", "/listeners/{listener}", lambda ids: {"listener": {"name": "x"}})
POOL_CREATE: Write = (
    "POST",
    "/pools",
    lambda ids: {
        "pool": {"loadbalancer_id": ids["lb"], "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}
    },
)
POOL_PUT: Write = ("PUT", "/pools/{pool}", lambda ids: {"pool": {"name": "x"}})
MEMBER_CREATE: Write = (
    "POST",
    "/pools/{pool}/members",
    lambda ids: {"member": {"address": "10.0.0.99", "protocol_port": 30080}},
)
MEMBER_BATCH: Write = (
    "PUT",
    "/pools/{pool}/members",
    lambda ids: {"members": [{"address": "10.0.0.99", "protocol_port": 30080}]},
)
MONITOR_CREATE: Write = (
    "POST",
    "/healthmonitors",
    lambda ids: {
        "healthmonitor": {
            "pool_id": ids["pool"],
            "type": "TCP",
            "delay": 5,
            "timeout": 3,
            "max_retries": 1,
        }
    },
)
MONITOR_PUT: Write = (
    "PUT",
    "/healthmonitors/{monitor}",
    lambda ids: {"healthmonitor": {"delay": 9}},
)

LB_STATE = "Invalid state {status} of loadbalancer resource {lb}"
LB_IMMUTABLE = "Load Balancer {lb} is immutable and cannot be updated."
POOL_IMMUTABLE = "Pool {pool} is immutable and cannot be updated."


def _ids(lb: dict[str, Any]) -> dict[str, str]:
    (listener,) = lb["listeners"]
    (pool,) = lb["pools"]
    return {
        "lb": lb["id"],
        "listener": listener["id"],
        "pool": pool["id"],
        "monitor": pool["healthmonitor_id"] or "",
    }


def _refused(octavia: Octavia, write: Write, ids: dict[str, str]) -> tuple[int, Any]:
    method, path, body = write
    return octavia.call(method, path.format(**ids), body(ids))


@pytest.mark.parametrize(
    ("write", "expected"),
    [
        (LB_PUT, LB_STATE),
        (LB_CASCADE_DELETE, LB_STATE),
        (LISTENER_CREATE, LB_IMMUTABLE),
        (LISTENER_PUT, LB_IMMUTABLE),
        (POOL_CREATE, LB_IMMUTABLE),
        (POOL_PUT, LB_IMMUTABLE),
        # The pool of a tree being created is PENDING_CREATE itself.
        (MEMBER_CREATE, POOL_IMMUTABLE),
        (MEMBER_BATCH, POOL_IMMUTABLE),
        (MONITOR_CREATE, POOL_IMMUTABLE),
    ],
    ids=lambda value: value[0] + " " + value[1] if isinstance(value, tuple) else "",
)
def test_writes_during_create_get_the_wording_of_their_controller(
    sim: OpenStackSimHandle, octavia: Octavia, write: Write, expected: str
) -> None:
    sim.set_knobs(provisioning_delay_s=LONG_S)
    ids = _ids(octavia.create_tree(sim, monitor=False))

    status, body = _refused(octavia, write, ids)

    assert status == 409
    assert body == fault(expected.format(status="PENDING_CREATE", **ids))
    assert sim.resources("loadbalancer")[0]["provisioning_status"] == "PENDING_CREATE"
    assert sim.inventory()["listener"] == sim.inventory()["pool"] == 1


@pytest.mark.parametrize(
    ("write", "expected"),
    [
        (LB_PUT, LB_STATE),
        (LB_CASCADE_DELETE, LB_STATE),
        (LISTENER_PUT, LB_IMMUTABLE),
        (POOL_PUT, LB_IMMUTABLE),
        # Children ACTIVE, only the load balancer pinned: members and monitors name it.
        (MEMBER_CREATE, LB_IMMUTABLE),
        (MONITOR_PUT, LB_IMMUTABLE),
    ],
    ids=lambda value: value[0] + " " + value[1] if isinstance(value, tuple) else "",
)
def test_writes_to_a_load_balancer_stuck_in_pending_update(
    sim: OpenStackSimHandle, octavia: Octavia, write: Write, expected: str
) -> None:
    ids = _ids(octavia.create_tree(sim, monitor=True))
    sim.settle()
    sim.stick_load_balancer(ids["lb"])

    status, body = _refused(octavia, write, ids)

    assert status == 409
    assert body == fault(expected.format(status="PENDING_UPDATE", **ids))


def test_a_member_write_makes_its_pool_and_listener_busy_too(
    sim: OpenStackSimHandle, octavia: Octavia
) -> None:
    ids = _ids(octavia.create_tree(sim, monitor=True))
    sim.settle()
    sim.set_knobs(provisioning_delay_s=LONG_S)
    first, _ = _refused(octavia, MEMBER_CREATE, ids)

    second = octavia.call(
        "POST",
        f"/pools/{ids['pool']}/members",
        {"member": {"address": "10.0.0.98", "protocol_port": 30080}},
    )
    listener_put = _refused(octavia, LISTENER_PUT, ids)
    _, listener = octavia.call("GET", f"/listeners/{ids['listener']}")
    _, pool = octavia.call("GET", f"/pools/{ids['pool']}")

    assert first == 201
    assert second == (409, fault(POOL_IMMUTABLE.format(**ids)))
    assert listener_put == (409, fault(LB_IMMUTABLE.format(**ids)))
    assert listener["listener"]["provisioning_status"] == "PENDING_UPDATE"
    assert pool["pool"]["provisioning_status"] == "PENDING_UPDATE"
    # An update leaves the operating status alone; only new rows start OFFLINE.
    assert pool["pool"]["operating_status"] == "ONLINE"


def test_delete_with_children_is_400_before_the_state_is_looked_at(
    sim: OpenStackSimHandle, octavia: Octavia
) -> None:
    sim.set_knobs(provisioning_delay_s=LONG_S)
    ids = _ids(octavia.create_tree(sim, monitor=False))

    status, body = octavia.call("DELETE", f"/loadbalancers/{ids['lb']}")

    assert status == 400
    assert body == fault(
        f"Validation failure: Cannot delete Load Balancer {ids['lb']} - it has children"
    )


def test_a_load_balancer_in_error_refuses_updates_but_can_be_deleted(
    sim: OpenStackSimHandle, octavia: Octavia
) -> None:
    sim.set_knobs(force_error_next_lbs=1)
    ids = _ids(octavia.create_tree(sim, monitor=False))
    sim.settle()

    update = _refused(octavia, LB_PUT, ids)
    delete = _refused(octavia, LB_CASCADE_DELETE, ids)

    assert update == (409, fault(LB_STATE.format(status="ERROR", **ids)))
    assert delete == (204, None)
