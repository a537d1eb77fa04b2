"""Fault knobs: injected statuses with Retry-After, error rates, latency, Octavia faults."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from openstack import exceptions as sdk_exceptions

from pyccm_sim.openstack.testing import OpenStackSimHandle, running_openstack_sim

from .test_octavia_load_balancers import _tree, wait_for


def _get(sim: OpenStackSimHandle, path: str, token: str) -> requests.Response:
    return requests.get(sim.url + path, headers={"X-Auth-Token": token}, timeout=5)


def test_fail_next_answers_429_with_retry_after_then_recovers(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    token = conn.authorize()
    sim.fail_next("load-balancer", 429, count=2, retry_after_s=2.5)

    answers = [_get(sim, "/load-balancer/v2/lbaas/loadbalancers", token) for _ in range(3)]

    assert [a.status_code for a in answers] == [429, 429, 200]
    assert answers[0].headers["Retry-After"] == "3"
    assert "faultstring" in answers[0].json()
    assert [c.status for c in sim.calls()][-3:] == [429, 429, 200]


def test_fail_next_only_hits_the_named_service_and_methods(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    token = conn.authorize()
    sim.fail_next("network", 503, methods=("POST",), retry_after_s=1)

    compute = _get(sim, "/compute/v2.1/servers", token).status_code
    network_get = _get(sim, "/network/v2.0/networks", token).status_code
    with pytest.raises(sdk_exceptions.HttpException) as failed:
        conn.network.create_ip(floating_network_id=sim.seeded.public_network_id)

    assert (compute, network_get) == (200, 200)
    assert failed.value.status_code == 503
    assert sim.inventory()["floatingip"] == 1


def test_error_rate_one_fails_every_call_of_that_service(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    token = conn.authorize()
    sim.set_knobs(error_rates={"compute": {500: 1.0}})

    failing = _get(sim, "/compute/v2.1/servers", token)
    other = _get(sim, "/network/v2.0/networks", token)

    assert failing.status_code == 500
    assert failing.json()["computeFault"]["code"] == 500
    assert other.status_code == 200


def test_latency_knob_shows_in_the_call_log(sim: OpenStackSimHandle, conn: Any) -> None:
    token = conn.authorize()
    sim.set_knobs(latency_ms=30.0)
    mark = sim.mark()

    _get(sim, "/network/v2.0/networks", token)

    (call,) = sim.calls(since=mark)
    assert call.latency_ms >= 30.0


def test_forced_error_puts_the_next_load_balancer_in_error(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    sim.set_knobs(force_error_next_lbs=1)

    failed = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id, "ERROR")
    healthy = wait_for(
        conn, conn.load_balancer.create_load_balancer(**_tree(sim, name="second")).id
    )
    conn.load_balancer.delete_load_balancer(failed, cascade=True)
    sim.settle()

    assert (failed.provisioning_status, failed.operating_status) == ("ERROR", "ERROR")
    assert healthy.provisioning_status == "ACTIVE"
    assert [lb["name"] for lb in sim.resources("loadbalancer")] == ["second"]


def test_stuck_load_balancer_stays_pending_update_until_released(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)

    sim.stick_load_balancer(lb.id)
    with pytest.raises(sdk_exceptions.ConflictException):
        conn.load_balancer.update_load_balancer(lb, description="x")
    stuck = conn.load_balancer.get_load_balancer(lb.id).provisioning_status
    sim.release_load_balancer(lb.id)

    assert stuck == "PENDING_UPDATE"
    assert conn.load_balancer.get_load_balancer(lb.id).provisioning_status == "ACTIVE"


def test_load_balancer_quota_is_403(sim: OpenStackSimHandle, conn: Any) -> None:
    sim.set_knobs(lb_quota=1)
    conn.load_balancer.create_load_balancer(**_tree(sim))

    with pytest.raises(sdk_exceptions.ForbiddenException, match="Quota has been met"):
        conn.load_balancer.create_load_balancer(**_tree(sim, name="over-quota"))
    assert sim.inventory()["loadbalancer"] == 1


def test_octavia_version_list_top_is_configurable_and_gates_tags() -> None:
    with running_openstack_sim(seed_nodes=1, octavia_version="2.4") as old:
        conn = old.connection()
        versions = requests.get(f"{old.url}/load-balancer/", timeout=5).json()["versions"]
        discovered = conn.load_balancer.get_endpoint_data().api_version

        with pytest.raises(sdk_exceptions.BadRequestException, match="Unknown attribute"):
            conn.load_balancer.create_load_balancer(**_tree(old))
        untagged = _tree(old)
        del untagged["tags"]
        del untagged["listeners"][0]["tags"]
        created = conn.load_balancer.create_load_balancer(**untagged)

    assert [v["id"] for v in versions][-1] == "v2.4"
    assert versions[-1]["status"] == "CURRENT"
    assert discovered == (2, 4)
    assert created.provisioning_status == "PENDING_CREATE"


def test_knobs_are_settable_through_the_admin_endpoint(sim: OpenStackSimHandle) -> None:
    answer = requests.patch(
        f"{sim.url}/_sim/knobs", json={"lb_quota": 3, "octavia_version": "2.11"}, timeout=5
    )
    refused = requests.patch(f"{sim.url}/_sim/knobs", json={"no_such_knob": 1}, timeout=5)

    assert answer.status_code == 200
    assert (sim.knobs()["lb_quota"], sim.knobs()["octavia_version"]) == (3, "2.11")
    assert refused.status_code == 400


def test_call_log_is_readable_and_resettable_through_the_admin_endpoint(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    list(conn.network.networks())
    logged = requests.get(f"{sim.url}/_sim/calls", timeout=5).json()
    requests.delete(f"{sim.url}/_sim/calls", timeout=5)
    after = requests.get(f"{sim.url}/_sim/calls?since=0", timeout=5).json()

    paths = [(c["service"], c["method"], c["path"], c["status"]) for c in logged["calls"]]
    assert ("network", "GET", "/network/v2.0/networks", 200) in paths
    assert after["calls"] == []
    assert not any(c["path"].startswith("/_sim") for c in logged["calls"])
