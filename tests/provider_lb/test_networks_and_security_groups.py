"""Where the load balancer lives and what guards its members: IPv6 VIPs, the VIP subnet
found from the first node, the serial-call mode, child-by-child deletion, and per-Service
security groups on the member ports."""

from __future__ import annotations

from typing import Any

import msgspec

from pyccm.protocol.views import Node, NodeAddress, NodeStatus
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, delete, ensure, nodes, one, service, with_annotations, writes

P = "loadbalancer.openstack.org/"
INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"


def v6_nodes(count: int) -> list[Node]:
    return [
        msgspec.structs.replace(
            node,
            status=NodeStatus(
                addresses=(
                    *node.status.addresses,
                    NodeAddress(type="InternalIP", address=f"fd00:1::{index + 10:x}"),
                )
            ),
        )
        for index, node in enumerate(nodes(count))
    ]


def test_an_ipv6_service_is_reached_on_its_vip_without_a_floating_ip(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    conn = sim.connection()
    subnet = conn.network.create_subnet(
        network_id=sim.seeded.private_network_id, name="v6", cidr="fd00:1::/64", ip_version=6
    )
    conn.close()
    svc = service(
        ports=((80, 30080, "TCP"),),
        ip_families=("IPv6", "IPv4"),
        annotations={P + "subnet-id": subnet.id, P + "member-subnet-id": subnet.id},
    )

    outcome = ensure(lbs, svc, v6_nodes(2))

    lb = one(sim, "loadbalancer")
    assert lb["vip_address"].startswith("fd00:1::")
    assert outcome.ingress[0].ip == lb["vip_address"]
    assert sim.inventory()["floatingip"] == 0
    assert [e.reason for e in outcome.events] == ["LoadBalancerFloatingIPSkipped"]
    assert one(sim, "listener")["allowed_cidrs"] == ["::/0"]
    assert sorted(m["address"] for m in sim.resources("member")) == ["fd00:1::a", "fd00:1::b"]


def test_without_a_configured_subnet_the_first_nodes_subnet_is_used(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lines = sim.cloud_conf_path.read_text().splitlines()
    lbs = make_lbs(conf="\n".join(x for x in lines if not x.startswith("subnet-id")))

    ensure(lbs, service(), nodes(2, sim=sim))

    assert one(sim, "loadbalancer")["vip_subnet_id"] == sim.seeded.private_subnet_id
    assert {m["subnet_id"] for m in sim.resources("member")} == {sim.seeded.private_subnet_id}


def test_a_network_by_annotation_gets_the_vip_on_its_own_subnet_not_the_configured_one(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    # cloud.conf's subnet-id is the nodes' subnet; the annotation puts the VIP elsewhere.
    conn = sim.connection()
    try:
        network = conn.network.create_network(name="vip-net")
        subnet = conn.network.create_subnet(
            network_id=network.id, ip_version=4, cidr="192.168.50.0/24", name="vip-subnet"
        )
    finally:
        conn.close()
    lbs = make_lbs()
    svc = with_annotations(service(), {P + "network-id": network.id, INTERNAL: "true"})

    outcome = ensure(lbs, svc, nodes(2, sim=sim))

    lb = one(sim, "loadbalancer")
    assert (lb["vip_network_id"], lb["vip_subnet_id"]) == (network.id, subnet.id)
    assert outcome.ingress[0].ip.startswith("192.168.50.")
    # The members stay on the configured subnet, where the nodes are.
    assert {m["subnet_id"] for m in sim.resources("member")} == {sim.seeded.private_subnet_id}
    delete(lbs, with_annotations(svc, outcome.annotations_to_set))


def test_serial_mode_creates_one_object_per_call_and_never_uses_the_batch_update(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    sim.set_knobs(batch_members=False)
    lbs = make_lbs("[LoadBalancer]\nprovider-requires-serial-api-calls = true")
    svc = service(ports=((80, 30080, "TCP"),))

    mark = sim.mark()
    ensure(lbs, svc, nodes(3))

    assert writes(sim, mark) == [
        ("POST", "lbaas/loadbalancers"),
        ("POST", "lbaas/listeners"),
        ("POST", "lbaas/pools"),
        ("POST", "lbaas/pools/{id}/members"),
        ("POST", "lbaas/pools/{id}/members"),
        ("POST", "lbaas/pools/{id}/members"),
        ("POST", "floatingips"),
    ]
    assert len(sim.resources("member")) == 3
    mark = sim.mark()
    ensure(lbs, svc, nodes(2))
    assert writes(sim, mark) == [("DELETE", "lbaas/pools/{id}/members/{id}")]


def test_without_cascade_delete_children_go_first(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs("[LoadBalancer]\ncascade-delete = false")
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(1)).annotations_to_set)

    mark = sim.mark()
    delete(lbs, svc)

    assert sim.inventory()["loadbalancer"] == 0
    assert [(m, path.split("/")[-2]) for m, path in writes(sim, mark)] == [
        ("DELETE", "floatingips"),
        ("DELETE", "pools"),
        ("DELETE", "listeners"),
        ("DELETE", "pools"),
        ("DELETE", "listeners"),
        ("DELETE", "loadbalancers"),
    ]


def ports_of(sim: OpenStackSimHandle, group_id: str) -> list[dict[str, Any]]:
    return [p for p in sim.resources("port") if group_id in p["security_groups"]]


def test_managed_security_groups_open_the_node_ports_on_member_ports(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs("[LoadBalancer]\nmanage-security-groups = true")
    svc = service(health_check_node_port=32100, external_traffic_policy="Local")

    outcome = ensure(lbs, svc, nodes(3, sim=sim))

    (group,) = [g for g in sim.resources("security_group") if g["name"].startswith("lb-sg-")]
    assert group["name"] == "lb-sg-0000-default-web-default-web"
    rules = {
        (r["protocol"], r["port_range_min"], r["remote_ip_prefix"])
        for r in sim.resources("security_group_rule")
        if r["security_group_id"] == group["id"] and r["direction"] == "ingress"
    }
    assert rules == {
        ("tcp", 30080, "10.0.0.0/16"),
        ("tcp", 30443, "10.0.0.0/16"),
        ("tcp", 32100, "10.0.0.0/16"),
    }
    assert len(ports_of(sim, group["id"])) == 3
    mark = sim.mark()
    lbs.ensure(service=with_annotations(svc, outcome.annotations_to_set), nodes=nodes(3, sim=sim))
    assert writes(sim, mark) == []

    delete(lbs, with_annotations(svc, outcome.annotations_to_set))
    assert not [g for g in sim.resources("security_group") if g["id"] == group["id"]]
    assert ports_of(sim, group["id"]) == []


def test_with_ovn_the_source_ranges_are_enforced_by_the_security_group(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    # ovn has no allowed_cidrs but keeps client addresses: each source range becomes the remote
    # prefix of the node-port rules (docs/upstream.md#security-groups), so the Service is created.
    ovn = "lb-provider = ovn\nlb-method = SOURCE_IP_PORT\nmanage-security-groups = true"
    lbs = make_lbs(f"[LoadBalancer]\n{ovn}")
    svc = service(
        ports=((80, 30080, "TCP"),),
        load_balancer_source_ranges=("192.0.2.0/24", "198.51.100.0/24"),
    )

    ensure(lbs, svc, nodes(2, sim=sim))

    (group,) = [g for g in sim.resources("security_group") if g["name"].startswith("lb-sg-")]
    rules = {
        (r["port_range_min"], r["remote_ip_prefix"])
        for r in sim.resources("security_group_rule")
        if r["security_group_id"] == group["id"] and r["direction"] == "ingress"
    }
    assert rules == {(30080, "192.0.2.0/24"), (30080, "198.51.100.0/24")}
    assert one(sim, "listener").get("allowed_cidrs") is None
