"""Which address of a node with several interfaces becomes its pool member: with
`member-subnet-id` configured, the node's address in that subnet's CIDR (upstream takes the
first InternalIP wherever it is, so Octavia gets a member outside the member subnet); else
the address type `node-address-type` chooses (upstream's proposal: `ExternalIP`), or
upstream's order. A node with no such address is left out and named in a Warning."""

from __future__ import annotations

from typing import Any

from pyccm.protocol.views import Node
from pyccm.provider.interface import LoadBalancers, ProviderEvent
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm.provider.openstack.loadbalancer.octavia import MEMBER_ADDRESS_MISSING
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, ensure, nodes, service, with_annotations
from tests.support.nodes import node

STORAGE_CIDR = "172.30.0.0/24"


def storage_subnet(sim: OpenStackSimHandle) -> str:
    """A second subnet, which the nodes' second interfaces are on."""
    conn = sim.connection()
    network = conn.network.create_network(name="storage")
    subnet = conn.network.create_subnet(
        network_id=network.id, name="storage", cidr=STORAGE_CIDR, ip_version=4
    )
    conn.close()
    return str(subnet.id)


def two_nic_nodes(count: int, *, last_on_storage: bool = True) -> list[Node]:
    """The scenario's nodes with a second InternalIP (first in the list) on the storage
    subnet, and an ExternalIP; the last one without the storage address if asked."""
    result = []
    for index, seeded in enumerate(nodes(count)):
        primary = seeded.status.addresses[0].address
        bare = index == count - 1 and not last_on_storage
        internal = (primary,) if bare else (f"172.30.0.{10 + index}", primary)
        result.append(
            node(
                seeded.name,
                internal_ips=internal,
                addresses=(("ExternalIP", f"203.0.113.{10 + index}"),),
            )
        )
    return result


def members(sim: OpenStackSimHandle) -> list[tuple[str, Any]]:
    return sorted((m["address"], m["subnet_id"]) for m in sim.resources("member"))


def missing(events: tuple[ProviderEvent, ...]) -> list[str]:
    return [e.message for e in events if e.reason == MEMBER_ADDRESS_MISSING]


def test_members_are_the_nodes_addresses_in_the_member_subnet(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    subnet = storage_subnet(sim)
    svc = service(ports=((80, 30080, "TCP"),), annotations={a.MEMBER_SUBNET_ID: subnet})

    outcome = ensure(lbs, svc, two_nic_nodes(3, last_on_storage=False))

    assert members(sim) == [("172.30.0.10", subnet), ("172.30.0.11", subnet)]
    (message,) = missing(outcome.events)
    assert "1 node(s) have no IPv4 InternalIP or ExternalIP address in the member subnet" in message
    assert STORAGE_CIDR in message
    assert message.endswith(
        f"{two_nic_nodes(3)[2].name} ({a.NODE_ADDRESS_TYPE}, {a.MEMBER_SUBNET_ID})"
    )


def test_the_member_subnet_of_cloud_conf_chooses_too(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    subnet = storage_subnet(sim)
    lbs = make_lbs(f"[LoadBalancer]\nmember-subnet-id = {subnet}")

    ensure(lbs, service(ports=((80, 30080, "TCP"),)), two_nic_nodes(2))

    assert [address for address, _ in members(sim)] == ["172.30.0.10", "172.30.0.11"]


def test_without_a_member_subnet_upstreams_order_stays(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    outcome = ensure(lbs, service(ports=((80, 30080, "TCP"),)), two_nic_nodes(2))

    # The first InternalIP, as upstream: no Warning.
    assert [address for address, _ in members(sim)] == ["172.30.0.10", "172.30.0.11"]
    assert missing(outcome.events) == []


def test_node_address_type_external_ip_takes_only_external_addresses(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    plain = nodes(1, start=5)[0]
    svc = service(ports=((80, 30080, "TCP"),), annotations={a.NODE_ADDRESS_TYPE: "ExternalIP"})

    outcome = ensure(lbs, svc, [*two_nic_nodes(2), plain])

    assert [address for address, _ in members(sim)] == ["203.0.113.10", "203.0.113.11"]
    # The node without an ExternalIP is left out, not given its InternalIP.
    (message,) = missing(outcome.events)
    assert "have no IPv4 ExternalIP address and are not members" in message


def test_a_bad_node_address_type_warns_and_keeps_upstreams_order(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((80, 30080, "TCP"),), annotations={a.NODE_ADDRESS_TYPE: "externalip"})

    outcome = ensure(lbs, svc, two_nic_nodes(2))

    assert [address for address, _ in members(sim)] == ["172.30.0.10", "172.30.0.11"]
    (event,) = [e for e in outcome.events if e.reason == a.INVALID_ANNOTATION]
    assert event.message.startswith(f"annotation {a.NODE_ADDRESS_TYPE}='externalip'")


def test_changing_the_choice_moves_the_members(sim: OpenStackSimHandle, lbs: LoadBalancers) -> None:
    svc = service(ports=((80, 30080, "TCP"),))
    svc = with_annotations(svc, ensure(lbs, svc, two_nic_nodes(2)).annotations_to_set)

    ensure(lbs, with_annotations(svc, {a.NODE_ADDRESS_TYPE: "ExternalIP"}), two_nic_nodes(2))

    assert [address for address, _ in members(sim)] == ["203.0.113.10", "203.0.113.11"]
