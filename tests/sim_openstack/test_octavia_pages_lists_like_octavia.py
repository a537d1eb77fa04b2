"""Octavia lists come in pages of at most `pagination_max_limit` (1000) rows.

A client that reads only the first answer misses everything past row 1000; the rest is
behind the `<collection>_links` `next` href, which Octavia adds whenever a page is full
and builds from `limit` and the last row's id alone (filters are not repeated). A page
fetched with a marker also gets a `previous` link. The cap is the `octavia_page_limit`
knob, so small pages can be tested on a handful of rows.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests

from pyccm_sim.openstack.testing import OpenStackSimHandle

LBAAS = "/load-balancer/v2/lbaas"


class Octavia:
    def __init__(self, sim: OpenStackSimHandle, token: str) -> None:
        self.base = sim.url + LBAAS
        self._headers = {"X-Auth-Token": token}

    def get(self, url: str, **params: Any) -> tuple[int, Any]:
        answer = requests.get(url, params=params, headers=self._headers, timeout=30)
        return answer.status_code, answer.json()

    def pool_with_members(self, sim: OpenStackSimHandle, count: int) -> str:
        """A load balancer whose one pool has `count` members; returns the pool id."""
        members = [
            {"address": f"10.1.{port // 250}.{port % 250 + 1}", "protocol_port": 30000 + port}
            for port in range(count)
        ]
        pool = {"name": "p", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN", "members": members}
        body = {
            "loadbalancer": {
                "name": "big",
                "vip_subnet_id": sim.seeded.private_subnet_id,
                "listeners": [
                    {"name": "l", "protocol": "TCP", "protocol_port": 80, "default_pool": pool}
                ],
            }
        }
        answer = requests.post(
            f"{self.base}/loadbalancers", json=body, headers=self._headers, timeout=60
        )
        assert answer.status_code == 201, answer.text
        sim.settle()
        (created,) = answer.json()["loadbalancer"]["pools"]
        pool_id: str = created["id"]
        return pool_id


@pytest.fixture
def octavia(sim: OpenStackSimHandle, conn: Any) -> Octavia:
    return Octavia(sim, conn.authorize())


def test_1005_members_come_as_1000_then_5_through_the_next_link(
    sim: OpenStackSimHandle, octavia: Octavia
) -> None:
    pool_id = octavia.pool_with_members(sim, 1005)
    members_url = f"{octavia.base}/pools/{pool_id}/members"

    status, first = octavia.get(members_url)
    (following,) = first["members_links"]
    _, second = octavia.get(following["href"])

    assert status == 200
    assert len(first["members"]) == 1000
    last = first["members"][-1]["id"]
    assert following == {"rel": "next", "href": f"{members_url}?limit=1000&marker={last}"}
    assert len(second["members"]) == 5
    assert second["members_links"] == [
        {
            "rel": "previous",
            "href": f"{members_url}?limit=1000&marker={second['members'][0]['id']}"
            "&page_reverse=True",
        }
    ]
    seen = [m["id"] for m in first["members"] + second["members"]]
    assert len(set(seen)) == 1005
    assert {m["id"] for m in sim.resources("member")} == set(seen)


def test_openstacksdk_follows_the_links_to_every_member(
    sim: OpenStackSimHandle, octavia: Octavia, conn: Any
) -> None:
    pool_id = octavia.pool_with_members(sim, 1005)
    mark = sim.mark()

    members = list(conn.load_balancer.members(pool_id))

    assert len({m.id for m in members}) == 1005
    assert [c.status for c in sim.calls(since=mark) if "/members" in c.path] == [200, 200]


def test_a_full_last_page_still_gets_a_next_link_to_an_empty_page(
    sim: OpenStackSimHandle, octavia: Octavia
) -> None:
    pool_id = octavia.pool_with_members(sim, 4)
    sim.set_knobs(octavia_page_limit=2)
    url = f"{octavia.base}/pools/{pool_id}/members"

    pages = []
    while url:
        _, body = octavia.get(url)
        pages.append(body)
        url = next((x["href"] for x in body["members_links"] if x["rel"] == "next"), "")

    assert [len(p["members"]) for p in pages] == [2, 2, 0]
    assert pages[-1]["members_links"] == []
    assert [[x["rel"] for x in p["members_links"]] for p in pages] == [
        ["next"],
        ["previous", "next"],
        [],
    ]


def test_a_limit_above_the_cap_is_cut_to_the_cap(sim: OpenStackSimHandle, octavia: Octavia) -> None:
    pool_id = octavia.pool_with_members(sim, 5)
    sim.set_knobs(octavia_page_limit=3)

    _, capped = octavia.get(f"{octavia.base}/pools/{pool_id}/members", limit="10")
    _, smaller = octavia.get(f"{octavia.base}/pools/{pool_id}/members", limit="2")
    sim.set_knobs(octavia_page_limit=0)
    _, uncapped = octavia.get(f"{octavia.base}/pools/{pool_id}/members")

    assert len(capped["members"]) == 3
    assert capped["members_links"][0]["href"].endswith(
        f"?limit=3&marker={capped['members'][-1]['id']}"
    )
    assert len(smaller["members"]) == 2
    assert len(uncapped["members"]) == 5
    assert uncapped["members_links"] == []


def test_the_links_carry_limit_and_marker_but_not_the_filters(
    sim: OpenStackSimHandle, octavia: Octavia
) -> None:
    octavia.pool_with_members(sim, 3)
    sim.set_knobs(octavia_page_limit=1)
    url = f"{octavia.base}/loadbalancers"

    _, page = octavia.get(url, name="big")

    (lb,) = page["loadbalancers"]
    assert page["loadbalancers_links"] == [
        {"rel": "next", "href": f"{url}?limit=1&marker={lb['id']}"}
    ]


def test_an_empty_list_still_carries_its_links_key(octavia: Octavia) -> None:
    status, body = octavia.get(f"{octavia.base}/loadbalancers")

    assert (status, body) == (200, {"loadbalancers": [], "loadbalancers_links": []})


@pytest.mark.parametrize(
    ("params", "error"),
    [
        (
            {"marker": "no-such-lb"},
            {
                "faultcode": "Client",
                "faultstring": "Supplied pagination marker 'no-such-lb' is not valid.",
                "debuginfo": None,
            },
        ),
        # The limit is parsed in a pecan hook, outside WSME: webob's error shape.
        (
            {"limit": "ten"},
            {
                "code": 400,
                "title": "Bad Request",
                "description": "Supplied pagination limit 'ten' is not valid.",
            },
        ),
    ],
)
def test_a_bad_marker_or_limit_is_400(
    octavia: Octavia, params: dict[str, str], error: dict[str, Any]
) -> None:
    status, body = octavia.get(f"{octavia.base}/loadbalancers", **params)

    assert (status, body) == (400, error)
