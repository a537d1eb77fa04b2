"""InstancesV2 against the OpenStack simulator: lookups, states, metadata, call counts."""

from __future__ import annotations

from typing import Any

import pytest

from pyccm.provider.errors import AmbiguousInstance, InstanceNotFound, InvalidProviderId
from pyccm.provider.interface import Instances
from pyccm_sim.openstack.calllog import Seq
from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node
from tests.support.nodes import node
from tests.support.openstack import MakeCloud, create_server


def instances_of(make_cloud: MakeCloud, extra: str = "", **options: Any) -> Instances:
    instances = make_cloud(extra, **options).cloud.instances()
    assert instances is not None
    return instances


def server_id(sim: OpenStackSimHandle, name: str) -> str:
    return next(str(s["id"]) for s in sim.resources("server") if s["name"] == name)


def resource_calls(sim: OpenStackSimHandle, mark: Seq) -> list[tuple[str, str]]:
    """Nova and Neutron calls since `mark` (method, path), Keystone and version discovery
    (a service's root) apart."""
    return [
        (c.method, path)
        for c in sim.calls(since=mark)
        if c.service != "identity" and (path := c.path.split("?")[0]).rstrip("/").count("/") > 2
    ]


def test_metadata_by_name_carries_provider_id_type_zone_region_and_addresses(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)

    metadata = instances.instance_metadata(node=node("node-0002"))

    assert metadata.provider_id == f"openstack:///{server_id(sim, 'node-0002')}"
    assert metadata.instance_type == "m1.medium"
    assert metadata.zone == "nova"
    assert metadata.region == "RegionOne"
    assert [(a.type, a.address) for a in metadata.node_addresses] == [
        ("InternalIP", seed_node(2).internal_ip)
    ]


def test_metadata_by_provider_id_matches_the_lookup_by_name(make_cloud: MakeCloud) -> None:
    instances = instances_of(make_cloud)
    by_name = instances.instance_metadata(node=node("node-0001"))

    by_id = instances.instance_metadata(node=node("renamed", provider_id=by_name.provider_id))

    assert by_id == by_name


def test_regional_provider_ids_name_the_configured_region(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud, environ={"OS_CCM_REGIONAL": "true"})

    metadata = instances.instance_metadata(node=node("node-0001"))

    assert metadata.provider_id == f"openstack://RegionOne/{server_id(sim, 'node-0001')}"
    assert instances.instance_exists(node=node("x", provider_id=metadata.provider_id))


def test_a_provider_id_of_another_region_is_refused(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)

    with pytest.raises(InvalidProviderId, match="RegionTwo"):
        instances.instance_exists(
            node=node("x", provider_id=f"openstack://RegionTwo/{server_id(sim, 'node-0001')}")
        )


def test_a_bare_server_uuid_is_accepted(sim: OpenStackSimHandle, make_cloud: MakeCloud) -> None:
    instances = instances_of(make_cloud)

    assert instances.instance_exists(node=node("x", provider_id=server_id(sim, "node-0003")))


def test_no_server_by_that_name_is_instance_not_found_not_a_generic_error(
    make_cloud: MakeCloud,
) -> None:
    instances = instances_of(make_cloud)

    with pytest.raises(InstanceNotFound):
        instances.instance_metadata(node=node("node-9999"))
    assert instances.instance_exists(node=node("node-9999")) is False


def test_the_name_regex_is_anchored(make_cloud: MakeCloud) -> None:
    instances = instances_of(make_cloud)

    # Unanchored, "node-000" would match the four seeded servers node-0000..node-0003.
    assert instances.instance_exists(node=node("node-000")) is False


def test_a_deleted_server_does_not_exist_by_provider_id(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)
    provider_id = instances.instance_metadata(node=node("node-0001")).provider_id

    sim.delete_server("node-0001")

    assert instances.instance_exists(node=node("node-0001", provider_id=provider_id)) is False


def test_two_servers_with_the_node_name_are_ambiguous(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)
    create_server(sim, "node-0001")

    with pytest.raises(AmbiguousInstance):
        instances.instance_metadata(node=node("node-0001"))


@pytest.mark.parametrize(
    ("status", "shutdown"),
    [
        ("SHUTOFF", True),
        ("ACTIVE", False),
        ("ERROR", False),
        ("PAUSED", False),
        ("SUSPENDED", False),
    ],
)
def test_only_shutoff_is_shut_down(
    sim: OpenStackSimHandle, make_cloud: MakeCloud, status: str, shutdown: bool
) -> None:
    instances = instances_of(make_cloud)
    sim.set_server_status("node-0000", status)

    assert instances.instance_shutdown(node=node("node-0000")) is shutdown
    assert instances.instance_exists(node=node("node-0000")) is True


def test_an_availability_zone_with_spaces_becomes_a_label_value(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)
    sim.add_server(7, zone="zone A (west)")

    assert instances.instance_metadata(node=node("node-0007")).zone == "zone-A-west"


def test_a_floating_ip_on_the_server_is_an_external_ip(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)
    floating = sim.add_floating_ip("node-0001")

    addresses = instances.instance_metadata(node=node("node-0001")).node_addresses

    assert [(a.type, a.address) for a in addresses] == [
        ("InternalIP", seed_node(1).internal_ip),
        ("ExternalIP", floating),
    ]


def test_public_network_name_turns_the_tenant_address_external(make_cloud: MakeCloud) -> None:
    instances = instances_of(make_cloud, "[Networking]\npublic-network-name = private\n")

    addresses = instances.instance_metadata(node=node("node-0001")).node_addresses

    assert [(a.type, a.address) for a in addresses] == [("ExternalIP", seed_node(1).internal_ip)]


def test_a_metadata_lookup_is_two_calls_once_the_flavor_is_known(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)
    provider_id = instances.instance_metadata(node=node("node-0001")).provider_id
    sid = provider_id.rsplit("/", 1)[1]

    mark = sim.mark()
    instances.instance_metadata(node=node("node-0001", provider_id=provider_id))
    calls = [(c.method, c.path) for c in sim.calls(since=mark)]

    assert calls == [
        ("GET", f"/compute/v2.1/servers/{sid}"),
        ("GET", f"/network/v2.0/ports?device_id={sid}"),
    ]


def test_nova_2_47_gives_the_flavor_name_without_a_flavor_call(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    sim.set_knobs(nova_max_microversion="2.47")
    instances = instances_of(make_cloud)

    mark = sim.mark()
    metadata = instances.instance_metadata(node=node("node-0001"))

    assert metadata.instance_type == "m1.medium"
    assert not [c for c in sim.calls(since=mark) if "/flavors/" in c.path]


def test_existence_and_shutdown_checks_are_one_call_each(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)
    target = node("x", provider_id=f"openstack:///{server_id(sim, 'node-0001')}")
    instances.instance_exists(node=target)  # authenticates and discovers once

    mark = sim.mark()
    instances.instance_exists(node=target)
    instances.instance_shutdown(node=target)

    assert [c.method for c in sim.calls(since=mark)] == ["GET", "GET"]
    assert not sim.writes(since=mark)


def test_access_ips_and_the_metadata_hostname_join_the_port_address(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)
    create_server(
        sim,
        "node-0042",
        metadata={"hostname": "n42.example"},
        access_ipv4="203.0.113.42",
        access_ipv6="2001:db8::42",
    )

    addresses = [
        (a.type, a.address)
        for a in instances.instance_metadata(node=node("node-0042")).node_addresses
    ]

    assert addresses[1:] == [
        ("ExternalIP", "203.0.113.42"),
        ("ExternalIP", "2001:db8::42"),
        ("Hostname", "n42.example"),
    ]
    assert addresses[0][0] == "InternalIP"


def test_ipv6_support_disabled_drops_the_ipv6_access_ip(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud, "[Networking]\nipv6-support-disabled = true\n")
    create_server(sim, "node-0043", access_ipv6="2001:db8::43")

    addresses = instances.instance_metadata(node=node("node-0043")).node_addresses

    assert [a.type for a in addresses] == ["InternalIP"]


# --- one listing for many nodes ----------------------------------------------------------------


def test_one_listing_places_nodes_by_provider_id_or_by_a_name_only_one_server_has(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)
    create_server(sim, "node-0001")  # a second server with that name
    sim.set_server_status("node-0002", "SHUTOFF")
    sim.delete_server("node-0003")
    nodes = [
        node("node-0000"),  # by name
        node("node-0001"),  # by name, ambiguous: left to its own lookup
        node("renamed", provider_id=f"openstack:///{server_id(sim, 'node-0002')}"),
        node("node-0003"),  # its server is gone
        node("elsewhere", provider_id=f"openstack://RegionTwo/{server_id(sim, 'node-0000')}"),
        node("odd", provider_id="aws:///i-123"),
    ]

    mark = sim.mark()
    listing = instances.instance_listing(nodes=nodes)

    assert listing.found == {"node-0000", "renamed"}
    assert listing.shutdown == {"renamed"}
    nova = [
        (c.method, c.path.split("?")[0]) for c in sim.calls(since=mark) if c.service == "compute"
    ]
    assert nova == [("GET", "/compute/v2.1/servers/detail")]


def test_a_listing_follows_novas_pages(sim: OpenStackSimHandle, make_cloud: MakeCloud) -> None:
    for index in range(4, 25):
        sim.add_server(index)
    sim.set_knobs(nova_page_limit=10)
    instances = instances_of(make_cloud)

    mark = sim.mark()
    listing = instances.instance_listing(nodes=[node(f"node-{i:04d}") for i in range(25)])

    assert len(listing.found) == 25
    assert len([c for c in sim.calls(since=mark) if "/servers/detail" in c.path]) == 3


def test_no_nodes_no_listing(sim: OpenStackSimHandle, make_cloud: MakeCloud) -> None:
    instances = instances_of(make_cloud)
    mark = sim.mark()

    assert instances.instance_listing(nodes=[]).found == frozenset()
    assert sim.calls(since=mark) == []


# --- metadata of many nodes at once ------------------------------------------------------------

MANY = 120
FLAVOR = 3  # the seeded servers' flavor (m1.medium)


@pytest.mark.parametrize("microversion", ["2.1", "2.47"])
@pytest.mark.parametrize("networking", ["", "[Networking]\npublic-network-name = private\n"])
def test_metadata_of_many_nodes_is_each_nodes_own_from_a_listing_and_a_port_call_per_50(
    sim: OpenStackSimHandle, make_cloud: MakeCloud, networking: str, microversion: str
) -> None:
    for index in range(4, MANY):
        sim.add_server(index)
    sim.set_knobs(nova_max_microversion=microversion)
    instances = instances_of(make_cloud, networking)
    nodes = [node(f"node-{i:04d}") for i in range(MANY - 1)]
    nodes.append(node("renamed", provider_id=f"openstack:///{server_id(sim, 'node-0119')}"))

    mark = sim.mark()
    many = instances.instances_metadata(nodes=nodes)

    # One page of servers, the flavor's name once (inside the servers from Nova 2.47 on),
    # ports of 50 servers a call; alone, each node costs a server lookup and a port list.
    flavor = [] if microversion == "2.47" else [("GET", f"/compute/v2.1/flavors/{FLAVOR}")]
    assert sorted(resource_calls(sim, mark)) == sorted(
        [("GET", "/compute/v2.1/servers/detail"), *flavor, *[("GET", "/network/v2.0/ports")] * 3]
    )
    assert set(many) == {n.name for n in nodes}
    mark = sim.mark()
    assert all(many[n.name] == instances.instance_metadata(node=n) for n in nodes)
    assert len(resource_calls(sim, mark)) == 2 * MANY


def test_metadata_of_many_nodes_leaves_out_what_the_listing_cannot_tell(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    instances = instances_of(make_cloud)
    create_server(sim, "node-0001")  # a second server with that name
    sim.delete_server("node-0003")
    nodes = [
        node("node-0000"),
        node("node-0001"),  # ambiguous: its own lookup says AmbiguousInstance
        node("node-0003"),  # gone: its own lookup says InstanceNotFound
        node("elsewhere", provider_id=f"openstack://RegionTwo/{server_id(sim, 'node-0002')}"),
        node("odd", provider_id="aws:///i-123"),
    ]

    many = instances.instances_metadata(nodes=nodes)

    assert set(many) == {"node-0000"}
    assert instances.instances_metadata(nodes=[]) == {}
