"""Nova caps server lists at `[api] max_limit` (1000); Neutron pages only when asked.

Nova lists servers newest first, adds `servers_links` only when a page is full (the href
repeats the query with the last id as marker), answers 400 for an unknown marker and an
empty list for `limit=0`. Neutron, whose `pagination_max_limit` is unlimited by default,
pages only when the client sends `limit`: then rows come by id, a page carries `next`
(unless a forward page came back short) and `previous` links that keep the filters, and
an unknown marker is the resource's 404.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from pyccm_sim.openstack.testing import OpenStackSimHandle

SERVERS = "/compute/v2.1/servers"
PORTS = "/network/v2.0/ports"
SEEDED_SERVERS = 5


def _get(sim: OpenStackSimHandle, conn: Any, url: str, **params: str) -> tuple[int, Any]:
    answer = requests.get(
        url if url.startswith("http") else sim.url + url,
        params=params,
        headers={"X-Auth-Token": conn.authorize()},
        timeout=30,
    )
    return answer.status_code, answer.json()


def test_1005_servers_come_as_1000_then_5(sim: OpenStackSimHandle, conn: Any) -> None:
    for index in range(6, 6 + 1000):
        sim.add_server(index)

    _, first = _get(sim, conn, f"{SERVERS}/detail")
    (following,) = first["servers_links"]
    _, second = _get(sim, conn, following["href"])
    everything = list(conn.compute.servers())

    last = first["servers"][-1]["id"]
    assert len(first["servers"]) == 1000
    assert following == {"rel": "next", "href": f"{sim.url}{SERVERS}/detail?marker={last}"}
    assert len(second["servers"]) == SEEDED_SERVERS
    assert "servers_links" not in second
    assert len({s["id"] for s in first["servers"] + second["servers"]}) == 1005
    assert len({s.id for s in everything}) == 1005


def test_servers_come_newest_first_and_the_link_repeats_the_query(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    sim.set_knobs(nova_page_limit=2)
    active = [s for s in sim.resources("server") if s["status"] == "ACTIVE"]
    by_age = sorted(active, key=lambda s: (s["created"], s["id"]), reverse=True)

    _, first = _get(sim, conn, SERVERS, status="ACTIVE")
    (following,) = first["servers_links"]
    query = parse_qs(urlsplit(following["href"]).query)

    assert [s["id"] for s in first["servers"]] == [s["id"] for s in by_age[:2]]
    assert query == {"marker": [by_age[1]["id"]], "status": ["ACTIVE"]}


def test_a_short_page_has_no_link_and_limit_0_is_empty(sim: OpenStackSimHandle, conn: Any) -> None:
    _, capped = _get(sim, conn, SERVERS, limit="3")
    (following,) = capped["servers_links"]
    _, rest = _get(sim, conn, following["href"])
    _, nothing = _get(sim, conn, SERVERS, limit="0")

    assert len(capped["servers"]) == 3
    assert len(rest["servers"]) == SEEDED_SERVERS - 3
    assert "servers_links" not in rest
    assert nothing == {"servers": []}


def test_an_unknown_nova_marker_is_400(sim: OpenStackSimHandle, conn: Any) -> None:
    status, body = _get(sim, conn, SERVERS, marker="no-such-server")

    assert (status, body) == (
        400,
        {"badRequest": {"code": 400, "message": "marker [no-such-server] not found"}},
    )


def test_neutron_does_not_page_without_a_limit(sim: OpenStackSimHandle, conn: Any) -> None:
    status, body = _get(sim, conn, PORTS)

    assert status == 200
    assert len(body["ports"]) == len(sim.resources("port"))
    assert "ports_links" not in body


def test_neutron_pages_by_id_with_next_and_previous_links(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    network_id = sim.seeded.private_network_id
    expected = sorted(p["id"] for p in sim.resources("port") if p["network_id"] == network_id)

    pages = []
    url = PORTS
    params = {"limit": "2", "network_id": network_id}
    while url:
        _, body = _get(sim, conn, url, **params)
        pages.append(body)
        params = {}
        url = next((x["href"] for x in body["ports_links"] if x["rel"] == "next"), "")

    assert [p["id"] for page in pages for p in page["ports"]] == expected
    assert all(len(page["ports"]) == 2 for page in pages[:-1])
    first_links = {x["rel"]: parse_qs(urlsplit(x["href"]).query) for x in pages[0]["ports_links"]}
    assert first_links["next"] == {
        "limit": ["2"],
        "network_id": [network_id],
        "marker": [expected[1]],
    }
    assert first_links["previous"] == {
        "limit": ["2"],
        "network_id": [network_id],
        "marker": [expected[0]],
        "page_reverse": ["True"],
    }


@pytest.mark.parametrize(
    ("params", "status", "error"),
    [
        (
            {"limit": "2", "marker": "no-such-port"},
            404,
            {"type": "PortNotFound", "message": "Port no-such-port could not be found."},
        ),
        (
            {"limit": "two"},
            400,
            {
                "type": "BadRequest",
                "message": "Bad limit request: Limit must be an integer 0 or greater and "
                "not 'two'.",
            },
        ),
    ],
)
def test_neutron_refuses_an_unknown_marker_or_a_bad_limit(
    sim: OpenStackSimHandle, conn: Any, params: dict[str, str], status: int, error: Any
) -> None:
    answer = _get(sim, conn, PORTS, **params)

    assert answer == (status, {"NeutronError": {**error, "detail": ""}})


def test_neutron_ignores_a_marker_without_a_limit(sim: OpenStackSimHandle, conn: Any) -> None:
    status, body = _get(sim, conn, PORTS, marker="no-such-port")

    assert status == 200
    assert len(body["ports"]) == len(sim.resources("port"))
