"""Nova through openstacksdk: lookup by name regex and id, status, addresses, flavors."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from openstack import exceptions as sdk_exceptions

from pyccm_sim.openstack.testing import OpenStackSimHandle, running_openstack_sim
from pyccm_sim.scenario import seed_node


def _token(sim: OpenStackSimHandle) -> str:
    token: str = sim.connection().authorize()
    return token


def test_servers_name_filter_is_an_unanchored_regex(conn: Any) -> None:
    anchored = [s.name for s in conn.compute.servers(details=True, name="^node-0001$")]
    unanchored = sorted(s.name for s in conn.compute.servers(details=True, name="node-000[013]"))

    assert anchored == ["node-0001"]
    assert unanchored == ["node-0000", "node-0001", "node-0003"]


def test_seeded_server_has_the_fields_the_ccm_reads(conn: Any) -> None:
    (server,) = conn.compute.servers(details=True, name="^node-0000$")

    assert server.status == "ACTIVE"
    assert server.availability_zone == "az-1"
    assert server.flavor.id == "3"
    assert server.addresses == {
        "private": [
            {
                "version": 4,
                "addr": seed_node(0).internal_ip,
                "OS-EXT-IPS:type": "fixed",
                "OS-EXT-IPS-MAC:mac_addr": server.addresses["private"][0][
                    "OS-EXT-IPS-MAC:mac_addr"
                ],
            }
        ]
    }
    assert server.access_ipv4 == ""
    assert server.metadata == {}


def test_shutoff_and_deleted_variants(conn: Any) -> None:
    (shutoff,) = conn.compute.servers(details=True, name="^node-0001$")
    deleted = list(conn.compute.servers(details=True, name="^node-0002$"))

    assert shutoff.status == "SHUTOFF"
    assert deleted == []


def test_floating_ip_shows_up_as_a_floating_address(conn: Any) -> None:
    (server,) = conn.compute.servers(details=True, name="^node-0003$")

    types = [entry["OS-EXT-IPS:type"] for entry in server.addresses["private"]]

    assert types == ["fixed", "floating"]


def test_unknown_server_id_is_404_item_not_found(sim: OpenStackSimHandle, conn: Any) -> None:
    missing = "00000000-0000-4000-8000-000000000000"

    with pytest.raises(sdk_exceptions.NotFoundException):
        conn.compute.get_server(missing)
    raw = requests.get(
        f"{sim.url}/compute/v2.1/servers/{missing}",
        headers={"X-Auth-Token": _token(sim)},
        timeout=5,
    )
    assert raw.status_code == 404
    assert raw.json() == {
        "itemNotFound": {"code": 404, "message": f"Instance {missing} could not be found."}
    }


def test_flavor_lookup_by_id(conn: Any) -> None:
    flavor = conn.compute.get_flavor("3")

    assert (flavor.name, flavor.vcpus, flavor.ram) == ("m1.medium", 2, 4096)


def test_microversion_is_negotiated_and_echoed(sim: OpenStackSimHandle) -> None:
    headers = {"X-Auth-Token": _token(sim), "OpenStack-API-Version": "compute 2.1"}

    answer = requests.get(f"{sim.url}/compute/v2.1/servers", headers=headers, timeout=5)
    too_new = requests.get(
        f"{sim.url}/compute/v2.1/servers",
        headers={**headers, "OpenStack-API-Version": "compute 2.90"},
        timeout=5,
    )

    assert answer.headers["OpenStack-API-Version"] == "compute 2.1"
    assert answer.headers["X-OpenStack-Nova-API-Version"] == "2.1"
    assert too_new.status_code == 406


def test_high_microversion_embeds_the_flavor_original_name(sim: OpenStackSimHandle) -> None:
    sim.set_knobs(nova_max_microversion="2.96")
    conn = sim.connection()

    server = conn.compute.get_server(sim.resources("server")[0]["id"])

    assert server.flavor.original_name == "m1.medium"
    assert any(call.path.startswith("/compute/v2.1/servers/") for call in sim.calls())


def test_stop_and_start_through_the_sdk_change_status(sim: OpenStackSimHandle, conn: Any) -> None:
    (server,) = conn.compute.servers(details=True, name="^node-0000$")

    conn.compute.stop_server(server)
    stopped = conn.compute.get_server(server.id).status
    conn.compute.start_server(server)

    assert stopped == "SHUTOFF"
    assert conn.compute.get_server(server.id).status == "ACTIVE"


def test_handle_seeding_helpers_change_what_nova_reports(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    sim.add_server(2)
    sim.set_server_status("node-0000", "SHUTOFF")
    sim.delete_server("node-0004")
    address = sim.add_floating_ip("node-0005")

    names = {s.name: s for s in conn.compute.servers(details=True)}

    assert names["node-0002"].addresses["private"][0]["addr"] == seed_node(2).internal_ip
    assert names["node-0000"].status == "SHUTOFF"
    assert "node-0004" not in names
    assert address in [a["addr"] for a in names["node-0005"].addresses["private"]]


def test_many_servers_page_with_limit_and_marker() -> None:
    with running_openstack_sim(seed_nodes=25) as big:
        conn = big.connection()

        names = [s.name for s in conn.compute.servers(details=True, limit=10)]
        pages = [c for c in big.calls() if c.path.startswith("/compute/v2.1/servers/detail")]

    assert len(names) == 25
    assert len(names) == len(set(names))
    assert len(pages) >= 3
