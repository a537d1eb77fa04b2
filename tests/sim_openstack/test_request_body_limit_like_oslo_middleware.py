"""Octavia and Nova refuse bodies over `max_request_body_size` (413), Neutron does not.

The limit is oslo.middleware's `RequestBodySizeLimiter` (114,688 bytes unless raised), in
front of authentication, so its 413 is webob's own body, negotiated on Accept.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest
import requests

from pyccm_sim.openstack.cli import knob_values, register
from pyccm_sim.openstack.settings import DEFAULT_MAX_REQUEST_BODY_SIZE, Knobs
from pyccm_sim.openstack.testing import OpenStackSimHandle

EXPLANATION = "Request is too large. Larger than max_request_body_size (%s)."
MEMBERS_PATH = "/load-balancer/v2/lbaas/pools/{pool}/members"


def _members(sim: OpenStackSimHandle, count: int) -> list[dict[str, Any]]:
    return [
        {
            "address": f"10.0.{index // 250}.{index % 250 + 2}",
            "protocol_port": 30080,
            "subnet_id": sim.seeded.private_subnet_id,
        }
        for index in range(count)
    ]


def _pool(sim: OpenStackSimHandle, conn: Any) -> str:
    lb = conn.load_balancer.create_load_balancer(
        name="big", vip_subnet_id=sim.seeded.private_subnet_id
    )
    sim.settle()
    listener = conn.load_balancer.create_listener(
        load_balancer_id=lb.id, protocol="TCP", protocol_port=80
    )
    sim.settle()
    pool = conn.load_balancer.create_pool(
        listener_id=listener.id, protocol="TCP", lb_algorithm="ROUND_ROBIN"
    )
    sim.settle()
    return str(pool.id)


def _put_members(
    sim: OpenStackSimHandle, conn: Any, pool: str, count: int, accept: str = "*/*"
) -> requests.Response:
    headers = {"X-Auth-Token": conn.authorize(), "Accept": accept}
    return requests.put(
        sim.url + MEMBERS_PATH.format(pool=pool),
        json={"members": _members(sim, count)},
        headers=headers,
        timeout=30,
    )


def test_a_batch_member_update_over_112_kib_is_413_and_changes_nothing(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    pool = _pool(sim, conn)

    refused = _put_members(sim, conn, pool, 3000, accept="application/json")

    assert len(refused.request.body or b"") > DEFAULT_MAX_REQUEST_BODY_SIZE
    assert refused.status_code == 413
    assert refused.json() == {
        "message": EXPLANATION + "<br /><br />\n\n\n",
        "code": "413 Request Entity Too Large",
        "title": "Request Entity Too Large",
    }
    assert sim.inventory()["member"] == 0
    assert sim.calls()[-1].status == 413


def test_a_body_just_under_the_limit_is_served(sim: OpenStackSimHandle, conn: Any) -> None:
    pool = _pool(sim, conn)

    accepted = _put_members(sim, conn, pool, 1000)

    assert len(accepted.request.body or b"") <= DEFAULT_MAX_REQUEST_BODY_SIZE
    assert accepted.status_code == 202
    sim.settle()
    assert sim.inventory()["member"] == 1000


def test_a_raised_limit_accepts_the_same_body(sim: OpenStackSimHandle, conn: Any) -> None:
    pool = _pool(sim, conn)
    sim.set_knobs(max_request_body_size=4 * 1024 * 1024)

    accepted = _put_members(sim, conn, pool, 3000)

    assert accepted.status_code == 202
    sim.settle()
    assert sim.inventory()["member"] == 3000


@pytest.mark.parametrize(
    ("accept", "content_type", "text"),
    [
        (None, "text/plain", f"413 Request Entity Too Large\n\n{EXPLANATION}\n\n   "),
        ("*/*", "text/html", f"  {EXPLANATION}<br /><br />\n\n\n\n </body>\n</html>"),
        ("application/json, text/html;q=0.5", "application/json", '"code": "413 Request'),
    ],
)
def test_the_413_body_is_webobs_negotiated_on_accept(
    sim: OpenStackSimHandle, accept: str | None, content_type: str, text: str
) -> None:
    # No token: the limit is checked before authentication. None drops requests' own
    # `Accept: */*`, so no Accept header is sent.
    headers = {"Accept": accept}
    body = b'{"server": {"name": "' + b"x" * DEFAULT_MAX_REQUEST_BODY_SIZE + b'"}}'

    answer = requests.post(
        sim.url + "/compute/v2.1/servers", data=body, headers=headers, timeout=30
    )

    assert answer.status_code == 413
    assert answer.headers["Content-Type"].startswith(content_type)
    assert text in answer.text


def test_neutron_has_no_body_limit(sim: OpenStackSimHandle, conn: Any) -> None:
    routes = [
        {
            "destination": f"10.{100 + i // 250}.{i % 250}.0/24",
            "nexthop": f"10.0.{i // 250}.{i % 250 + 2}",
        }
        for i in range(3000)
    ]
    path = f"/network/v2.0/routers/{sim.seeded.router_id}/add_extraroutes"

    answer = requests.put(
        sim.url + path,
        json={"router": {"routes": routes}},
        headers={"X-Auth-Token": conn.authorize()},
        timeout=30,
    )

    assert len(answer.request.body or b"") > DEFAULT_MAX_REQUEST_BODY_SIZE
    assert answer.status_code == 200
    assert len(answer.json()["router"]["routes"]) == 3000


def _cli_knobs(*flags: str) -> Knobs:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    knobs = Knobs()
    knobs.update(knob_values(parser.parse_args(["openstack", *flags])))
    return knobs


def test_the_cli_flag_sets_the_limit_and_defaults_to_the_services_own() -> None:
    assert _cli_knobs().max_request_body_size == 114_688
    assert _cli_knobs("--max-request-body-size", "4194304").max_request_body_size == 4_194_304
    assert _cli_knobs("--max-request-body-size", "0").max_request_body_size == 0
