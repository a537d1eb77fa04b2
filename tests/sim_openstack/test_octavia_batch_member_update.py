"""The batch member update (`PUT /pools/{id}/members`) as Octavia's MembersController.put.

Members are matched by address and port; `additive_only=true` keeps the members the
request does not name (a client splitting a large update into parts that fit the body
limit relies on it); a member of the pool named twice is a 400; an update that changes
nothing is rolled back and leaves the load balancer ACTIVE.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node

LBAAS = "/load-balancer/v2/lbaas"


def _member(index: int) -> dict[str, Any]:
    return {"address": seed_node(index).internal_ip, "protocol_port": 30080, "name": f"m{index}"}


class Pool:
    def __init__(self, sim: OpenStackSimHandle, conn: Any, members: list[int]) -> None:
        self._sim = sim
        self._headers = {"X-Auth-Token": conn.authorize()}
        pool = {
            "protocol": "TCP",
            "lb_algorithm": "ROUND_ROBIN",
            "members": [_member(i) for i in members],
        }
        listener = {"protocol": "TCP", "protocol_port": 80, "default_pool": pool}
        body = {
            "loadbalancer": {
                "name": "batch",
                "vip_subnet_id": sim.seeded.private_subnet_id,
                "listeners": [listener],
            }
        }
        created = requests.post(
            f"{sim.url}{LBAAS}/loadbalancers", json=body, headers=self._headers, timeout=10
        ).json()["loadbalancer"]
        self.lb_id = created["id"]
        (self.id,) = [p["id"] for p in created["pools"]]
        sim.settle()

    def put(self, members: list[dict[str, Any]], query: str = "") -> requests.Response:
        return requests.put(
            f"{self._sim.url}{LBAAS}/pools/{self.id}/members{query}",
            json={"members": members},
            headers=self._headers,
            timeout=10,
        )

    def names(self) -> dict[str, str]:
        """Member name -> id."""
        answer = requests.get(
            f"{self._sim.url}{LBAAS}/pools/{self.id}/members", headers=self._headers, timeout=10
        )
        return {m["name"]: m["id"] for m in answer.json()["members"]}

    def lb_status(self) -> str:
        answer = requests.get(
            f"{self._sim.url}{LBAAS}/loadbalancers/{self.lb_id}", headers=self._headers, timeout=10
        )
        status: str = answer.json()["loadbalancer"]["provisioning_status"]
        return status


@pytest.mark.parametrize("spelling", ["true", "True", "1", "yes"])
def test_additive_only_keeps_the_members_the_request_does_not_name(
    sim: OpenStackSimHandle, conn: Any, spelling: str
) -> None:
    pool = Pool(sim, conn, [0, 1])
    before = pool.names()

    answer = pool.put([_member(3), _member(4)], f"?additive_only={spelling}")
    sim.settle()

    assert answer.status_code == 202
    after = pool.names()
    assert set(after) == {"m0", "m1", "m3", "m4"}
    assert {name: after[name] for name in ("m0", "m1")} == before


@pytest.mark.parametrize("query", ["", "?additive_only=false", "?additive_only=nonsense"])
def test_without_additive_only_the_request_replaces_the_members(
    sim: OpenStackSimHandle, conn: Any, query: str
) -> None:
    pool = Pool(sim, conn, [0, 1])
    kept = pool.names()["m1"]

    answer = pool.put([_member(1), _member(3)], query)
    sim.settle()

    assert answer.status_code == 202
    assert pool.names() == {"m1": kept, "m3": pool.names()["m3"]}


def test_a_member_of_the_pool_named_twice_is_400_and_a_new_one_twice_409(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    pool = Pool(sim, conn, [0])

    existing_twice = pool.put([_member(0), _member(0)])
    new_twice = pool.put([_member(3), _member(3)])

    assert existing_twice.status_code == 400
    assert existing_twice.json()["faultstring"] == (
        "Validation failure: Member must be updated only once in the same request."
    )
    assert new_twice.status_code == 409
    assert new_twice.json()["faultstring"] == (
        f"Another member on this pool is already using ip {seed_node(3).internal_ip} "
        "on protocol_port 30080"
    )
    assert set(pool.names()) == {"m0"}


@pytest.mark.parametrize(("members", "query"), [([], ""), ([0], "?additive_only=true")])
def test_an_update_that_changes_nothing_is_a_noop_that_leaves_the_lb_active(
    sim: OpenStackSimHandle, conn: Any, members: list[int], query: str
) -> None:
    pool = Pool(sim, conn, members)
    sim.set_knobs(provisioning_delay_s=30.0)

    answer = pool.put([], query)

    assert answer.status_code == 202
    assert pool.lb_status() == "ACTIVE"
    assert len(pool.names()) == len(members)
