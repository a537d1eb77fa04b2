"""The node address algorithm follows upstream's rules in upstream's order
(docs/upstream.md#node-addresses)."""

from __future__ import annotations

import ipaddress

from pyccm.provider.openstack.common.resources import FixedIp, Port, Server, ServerAddress
from pyccm.provider.openstack.config import NetworkingSettings
from pyccm.provider.openstack.instances.addresses import node_addresses


def port(*ips: str, status: str = "ACTIVE", network: str = "net") -> Port:
    return Port(
        id=f"p-{ips}",
        network_id=network,
        status=status,
        fixed_ips=[FixedIp(ip_address=ip) for ip in ips],
    )


def fixed(addr: str, kind: str = "fixed") -> ServerAddress:
    return ServerAddress(addr=addr, type=kind)


def run(
    server: Server,
    ports: list[Port] | None = None,
    subports: dict[str, list[str]] | None = None,
    **networking: object,
) -> list[tuple[str, str]]:
    result = node_addresses(
        server=server,
        ports=ports or [],
        subport_addresses=subports or {},
        networking=NetworkingSettings(**networking),  # type: ignore[arg-type]
    )
    return [(a.type, a.address) for a in result]


def test_only_active_ports_give_internal_ips_in_api_order() -> None:
    ports = [port("10.0.0.7", "10.0.0.8"), port("10.0.0.9", status="DOWN"), port("10.0.0.5")]

    assert run(Server(id="s"), ports) == [
        ("InternalIP", "10.0.0.7"),
        ("InternalIP", "10.0.0.8"),
        ("InternalIP", "10.0.0.5"),
    ]


def test_access_ips_then_the_metadata_hostname_follow_the_ports() -> None:
    server = Server(
        id="s", access_ipv4="203.0.113.4", access_ipv6="2001:db8::4", metadata={"hostname": "h1"}
    )

    assert run(server, [port("10.0.0.7")]) == [
        ("InternalIP", "10.0.0.7"),
        ("ExternalIP", "203.0.113.4"),
        ("ExternalIP", "2001:db8::4"),
        ("Hostname", "h1"),
    ]


def test_server_addresses_come_by_sorted_network_name_with_floating_as_external() -> None:
    server = Server(
        id="s",
        addresses={
            "zeta": [fixed("10.2.0.5")],
            "alpha": [fixed("10.1.0.5"), fixed("172.24.4.9", "floating")],
        },
    )

    assert run(server) == [
        ("InternalIP", "10.1.0.5"),
        ("ExternalIP", "172.24.4.9"),
        ("InternalIP", "10.2.0.5"),
    ]


def test_duplicates_are_dropped_on_type_and_address() -> None:
    server = Server(id="s", addresses={"net": [fixed("10.0.0.7")]})

    assert run(server, [port("10.0.0.7")]) == [("InternalIP", "10.0.0.7")]


def test_a_public_network_turns_its_addresses_external_and_removes_them_as_internal() -> None:
    server = Server(id="s", addresses={"pub": [fixed("192.0.2.10")], "priv": [fixed("10.0.0.7")]})
    ports = [port("192.0.2.10"), port("10.0.0.7")]

    assert run(server, ports, public_network_names=("pub",)) == [
        ("InternalIP", "10.0.0.7"),
        ("ExternalIP", "192.0.2.10"),
    ]


def test_internal_network_names_drop_addresses_of_other_networks_even_from_ports() -> None:
    server = Server(id="s", addresses={"other": [fixed("10.9.0.7")], "priv": [fixed("10.0.0.7")]})
    ports = [port("10.9.0.7"), port("10.0.0.7")]

    assert run(server, ports, internal_network_names=("priv",)) == [("InternalIP", "10.0.0.7")]


def test_trunk_subports_are_server_addresses_of_their_network() -> None:
    server = Server(id="s", addresses={"b-net": [fixed("10.0.0.7")]})

    assert run(server, subports={"a-vlan": ["10.50.0.7"], "b-net": ["10.0.1.7"]}) == [
        ("InternalIP", "10.50.0.7"),
        ("InternalIP", "10.0.0.7"),
        ("InternalIP", "10.0.1.7"),
    ]


def test_ipv6_disabled_drops_every_ipv6_address() -> None:
    server = Server(
        id="s", access_ipv6="2001:db8::4", addresses={"net": [fixed("fd00::7"), fixed("10.0.0.7")]}
    )
    ports = [port("fd00::8", "10.0.0.8")]

    assert run(server, ports, ipv6_support_disabled=True) == [
        ("InternalIP", "10.0.0.8"),
        ("InternalIP", "10.0.0.7"),
    ]


def test_address_sort_order_moves_matching_addresses_first_and_keeps_the_rest_stable() -> None:
    server = Server(
        id="s",
        metadata={"hostname": "h1"},
        addresses={
            "net": [fixed("10.0.0.9"), fixed("192.168.1.2"), fixed("10.0.0.3"), fixed("172.16.0.1")]
        },
    )
    order = (ipaddress.ip_network("192.168.0.0/16"), ipaddress.ip_network("10.0.0.0/8"))

    assert run(server, address_sort_order=order) == [
        ("InternalIP", "192.168.1.2"),
        ("InternalIP", "10.0.0.3"),
        ("InternalIP", "10.0.0.9"),
        ("Hostname", "h1"),
        ("InternalIP", "172.16.0.1"),
    ]
