"""Neutron ports, subnets, floating IPs and extensions through openstacksdk."""

from __future__ import annotations

from typing import Any

import pytest
from openstack import exceptions as sdk_exceptions

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node


def _node_port(conn: Any, index: int) -> Any:
    (server,) = conn.compute.servers(details=True, name=f"^{seed_node(index).name}$")
    (port,) = conn.network.ports(device_id=server.id)
    return port


def test_extensions_list_the_ccm_aliases_and_toggles_hide_them(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    before = {e.alias for e in conn.network.extensions()}
    sim.set_knobs(disabled_extensions={"extraroute-atomic", "allowed-address-pairs"})
    after = {e.alias for e in conn.network.extensions()}

    assert {"extraroute", "extraroute-atomic", "allowed-address-pairs", "router"} <= before
    assert "extraroute-atomic" not in after
    assert "allowed-address-pairs" not in after
    assert "extraroute" in after


def test_ports_filter_by_fixed_ip_and_network(sim: OpenStackSimHandle, conn: Any) -> None:
    address = seed_node(4).internal_ip

    found = list(
        conn.network.ports(
            fixed_ips=[f"ip_address={address}"], network_id=sim.seeded.private_network_id
        )
    )
    elsewhere = list(
        conn.network.ports(
            fixed_ips=[f"ip_address={address}"], network_id=sim.seeded.public_network_id
        )
    )

    assert [p.fixed_ips[0]["ip_address"] for p in found] == [address]
    assert elsewhere == []


def test_allowed_address_pairs_update_is_stored(conn: Any) -> None:
    port = _node_port(conn, 0)

    conn.network.update_port(port, allowed_address_pairs=[{"ip_address": "10.64.0.0/24"}])

    pairs = conn.network.get_port(port.id).allowed_address_pairs
    assert [p["ip_address"] for p in pairs] == ["10.64.0.0/24"]
    assert pairs[0]["mac_address"] == port.mac_address


def test_allowed_address_pairs_are_refused_without_port_security(
    conn: Any, sim: OpenStackSimHandle
) -> None:
    port = conn.network.create_port(
        network_id=sim.seeded.private_network_id, port_security_enabled=False
    )

    with pytest.raises(sdk_exceptions.ConflictException):
        conn.network.update_port(port, allowed_address_pairs=[{"ip_address": "10.64.1.0/24"}])


def test_security_groups_on_ports_and_filter_by_group(conn: Any) -> None:
    group = conn.network.create_security_group(name="lb-sg-test")
    port = _node_port(conn, 0)

    conn.network.update_port(port, security_groups=[*port.security_group_ids, group.id])
    members = [p.id for p in conn.network.ports(security_groups=[group.id])]
    with pytest.raises(sdk_exceptions.ConflictException):
        conn.network.delete_security_group(group)

    assert members == [port.id]


def test_port_tag_can_be_deleted(conn: Any) -> None:
    port = _node_port(conn, 0)
    conn.network.add_tag(port, "legacy-sg")

    conn.network.remove_tag(port, "legacy-sg")

    assert conn.network.get_port(port.id).tags == []


def test_subnet_tag_filters(sim: OpenStackSimHandle, conn: Any) -> None:
    net = sim.seeded.public_network_id
    conn.network.create_subnet(
        network_id=net, cidr="172.25.0.0/24", ip_version=4, name="fip-a", tags=["ccm", "a"]
    )
    conn.network.create_subnet(
        network_id=net, cidr="172.25.1.0/24", ip_version=4, name="fip-b", tags=["ccm", "b"]
    )

    def names(**filters: Any) -> list[str]:
        return sorted(s.name for s in conn.network.subnets(network_id=net, **filters))

    assert names(tags=["ccm", "a"]) == ["fip-a"]
    assert names(any_tags=["a", "b"]) == ["fip-a", "fip-b"]
    assert names(not_tags=["ccm", "a"]) == ["fip-b", "public-subnet"]
    assert names(not_any_tags=["a", "b"]) == ["public-subnet"]


def test_floating_ip_lifecycle_associate_disassociate_delete(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    port = _node_port(conn, 0)
    fip = conn.network.create_ip(
        floating_network_id=sim.seeded.public_network_id,
        description="Floating IP for Kubernetes external service ns/svc",
    )

    conn.network.update_ip(fip, port_id=port.id)
    attached = list(conn.network.ips(port_id=port.id))
    by_address = list(conn.network.ips(floating_ip_address=fip.floating_ip_address))
    conn.network.update_ip(fip, port_id=None)
    detached = conn.network.get_ip(fip.id)
    conn.network.delete_ip(fip)

    assert [(f.id, f.fixed_ip_address, f.status) for f in attached] == [
        (fip.id, seed_node(0).internal_ip, "ACTIVE")
    ]
    assert [f.id for f in by_address] == [fip.id]
    assert (detached.port_id, detached.fixed_ip_address, detached.status) == (None, None, "DOWN")
    assert list(conn.network.ips(floating_ip_address=fip.floating_ip_address)) == []


def test_floating_ip_address_in_use_is_409_and_bad_network_is_404(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    taken = conn.network.create_ip(floating_network_id=sim.seeded.public_network_id)

    with pytest.raises(sdk_exceptions.ConflictException):
        conn.network.create_ip(
            floating_network_id=sim.seeded.public_network_id,
            floating_ip_address=taken.floating_ip_address,
        )
    with pytest.raises(sdk_exceptions.NotFoundException):
        conn.network.create_ip(floating_network_id="00000000-0000-4000-8000-000000000000")


def test_floating_ip_pool_exhaustion_is_409(sim: OpenStackSimHandle, conn: Any) -> None:
    net = conn.network.create_network(name="tiny-ext", is_router_external=True)
    conn.network.create_subnet(
        network_id=net.id, cidr="192.0.2.0/30", ip_version=4, gateway_ip="192.0.2.1"
    )

    conn.network.create_ip(floating_network_id=net.id)
    with pytest.raises(sdk_exceptions.ConflictException, match="No more IP addresses"):
        conn.network.create_ip(floating_network_id=net.id)


def test_deleting_a_port_disassociates_its_floating_ip(sim: OpenStackSimHandle, conn: Any) -> None:
    port = conn.network.create_port(network_id=sim.seeded.private_network_id)
    fip = conn.network.create_ip(floating_network_id=sim.seeded.public_network_id, port_id=port.id)

    conn.network.delete_port(port)

    assert conn.network.get_ip(fip.id).port_id is None
