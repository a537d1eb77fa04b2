"""Dual-stack Services (kubernetes/cloud-provider-openstack#1937) on a cloud whose tenant network
has an IPv4 and an IPv6 subnet: one load balancer with an additional VIP where Octavia has them (API
2.26), else one per family; members of each family; both addresses in the status; nothing left after
deletion; an IPv6-only Service on an IPv4 `subnet-id` still gets an IPv6 VIP."""

from __future__ import annotations

import ipaddress
from typing import Any

import msgspec
import pytest

from pyccm.protocol.views import (
    Node,
    NodeAddress,
    NodeStatus,
    Service,
)
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import node_internal_ipv6
from tests.support.lb import (
    MakeLbs,
    converge,
    delete,
    ensure,
    nodes,
    service,
    with_spec,
    with_status,
)
from tests.support.openstack import DUAL_STACK_SEED

CLUSTER_ID = "11111111-2222-3333-4444-555555555555"
NAME = "kube_service_kubernetes_default_web"
DUAL = {"ip_families": ("IPv4", "IPv6"), "ip_family_policy": "PreferDualStack"}


@pytest.fixture
def openstack_seed() -> dict[str, Any]:
    """Not the session's IPv4-only simulator: this module's tenant network is dual-stack."""
    return DUAL_STACK_SEED


def dual_nodes(count: int = 3, *, v4_only: tuple[int, ...] = (2,)) -> list[Node]:
    """Nodes with an IPv4 and an IPv6 InternalIP, except `v4_only` (IPv4 alone)."""
    result = []
    for index, node in enumerate(nodes(count)):
        extra = () if index in v4_only else (NodeAddress("InternalIP", node_internal_ipv6(index)),)
        status = NodeStatus(addresses=(*node.status.addresses, *extra))
        result.append(msgspec.structs.replace(node, status=status))
    return result


def dual_service(**spec: Any) -> Service:
    return service(ports=((80, 30080, "TCP"),), **(DUAL | spec))


def lbs_at(make_lbs: MakeLbs, sim: OpenStackSimHandle, version: str) -> LoadBalancers:
    sim.set_knobs(octavia_version=version)
    lbs: LoadBalancers = make_lbs(cluster_id=CLUSTER_ID)
    return lbs


def by_name(sim: OpenStackSimHandle) -> dict[str, dict[str, Any]]:
    return {lb["name"]: lb for lb in sim.resources("loadbalancer")}


def members_of(sim: OpenStackSimHandle, lb: dict[str, Any]) -> list[tuple[str, str]]:
    """(address, subnet) of the members in the pools of `lb`, read through the API."""
    conn = sim.connection()
    try:
        return sorted(
            (m.address, m.subnet_id)
            for pool in conn.load_balancer.pools(loadbalancer_id=lb["id"])
            for m in conn.load_balancer.members(pool.id)
        )
    finally:
        conn.close()


def family(address: str) -> int:
    return ipaddress.ip_address(address).version


def assert_nothing_left(sim: OpenStackSimHandle) -> None:
    assert sim.resources("loadbalancer") == []
    assert sim.resources("floatingip") == []
    assert [p for p in sim.resources("port") if p["device_owner"] == "Octavia"] == []


def test_below_octavia_2_26_each_family_gets_its_own_load_balancer(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = lbs_at(make_lbs, sim, "2.25")
    v6_subnet = sim.seeded.private_subnet_v6_id

    outcome = ensure(lbs, dual_service(), dual_nodes())

    found = by_name(sim)
    assert sorted(found) == [NAME, NAME + "_ipv6"]
    v4, v6 = found[NAME], found[NAME + "_ipv6"]
    assert family(v4["vip_address"]) == 4
    assert v6["vip_subnet_id"] == v6_subnet
    # Both tagged alike: the Service's own name and this cluster's id.
    assert v4["tags"] == [NAME, f"pyccm-cluster:{CLUSTER_ID}"]
    assert v6["tags"] == [NAME + "_ipv6", f"pyccm-cluster:{CLUSTER_ID}"]
    # node-0002 has no IPv6 address: left out of the IPv6 pool only.
    assert [a for a, _ in members_of(sim, v4)] == ["10.0.0.10", "10.0.0.11", "10.0.0.12"]
    assert members_of(sim, v6) == [("fd00:10::a", v6_subnet), ("fd00:10::b", v6_subnet)]
    # One floating IP, for the IPv4 VIP; the IPv6 VIP is reached as it is.
    (fip,) = sim.resources("floatingip")
    assert fip["port_id"] == v4["vip_port_id"]
    assert [i.ip for i in outcome.ingress] == [fip["floating_ip_address"], v6["vip_address"]]
    assert outcome.annotations_to_set["loadbalancer.openstack.org/load-balancer-id"] == v4["id"]
    assert outcome.events == ()
    (listener,) = [x for x in sim.resources("listener") if x["name"].endswith("_ipv6")]
    assert listener["allowed_cidrs"] == ["::/0"]

    delete(lbs, with_status(dual_service(), outcome))
    assert_nothing_left(sim)


def test_from_octavia_2_26_one_load_balancer_has_an_additional_ipv6_vip(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = lbs_at(make_lbs, sim, "2.26")
    v4_subnet, v6_subnet = sim.seeded.private_subnet_id, sim.seeded.private_subnet_v6_id

    outcome = ensure(lbs, dual_service(), dual_nodes())

    (lb,) = sim.resources("loadbalancer")
    assert lb["name"] == NAME
    assert lb["vip_subnet_id"] == v4_subnet
    (extra,) = lb["additional_vips"]
    assert extra["subnet_id"] == v6_subnet
    assert family(extra["ip_address"]) == 6
    assert members_of(sim, lb) == [
        ("10.0.0.10", v4_subnet),
        ("10.0.0.11", v4_subnet),
        ("10.0.0.12", v4_subnet),
        ("fd00:10::a", v6_subnet),
        ("fd00:10::b", v6_subnet),
    ]
    (fip,) = sim.resources("floatingip")
    assert [i.ip for i in outcome.ingress] == [fip["floating_ip_address"], extra["ip_address"]]
    (listener,) = sim.resources("listener")
    assert sorted(listener["allowed_cidrs"]) == ["0.0.0.0/0", "::/0"]

    # A re-ensure changes nothing; deletion leaves nothing.
    mark = sim.mark()
    again = ensure(lbs, with_status(dual_service(), outcome), dual_nodes())
    assert again.ingress == outcome.ingress
    assert sim.writes(since=mark) == []
    delete(lbs, with_status(dual_service(), outcome))
    assert_nothing_left(sim)


@pytest.mark.parametrize("version", ["2.25", "2.26"])
def test_a_node_joining_reaches_the_pools_of_both_families(
    sim: OpenStackSimHandle, make_lbs: MakeLbs, version: str
) -> None:
    lbs = lbs_at(make_lbs, sim, version)
    svc = with_status(dual_service(), ensure(lbs, dual_service(), dual_nodes(2)))

    converge(lambda: lbs.update(service=svc, nodes=dual_nodes(4, v4_only=())))

    addresses = sorted(m["address"] for m in sim.resources("member"))
    assert addresses == sorted(
        [f"10.0.0.{10 + i}" for i in range(4)] + [node_internal_ipv6(i) for i in range(4)]
    )


def test_ipv6_first_keeps_upstreams_name_for_the_ipv6_load_balancer(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = lbs_at(make_lbs, sim, "2.25")

    outcome = ensure(lbs, dual_service(ip_families=("IPv6", "IPv4")), dual_nodes())

    found = by_name(sim)
    assert family(found[NAME]["vip_address"]) == 6
    assert family(found[NAME + "_ipv4"]["vip_address"]) == 4
    (fip,) = sim.resources("floatingip")
    assert fip["port_id"] == found[NAME + "_ipv4"]["vip_port_id"]
    assert [i.ip for i in outcome.ingress] == [
        found[NAME]["vip_address"],
        fip["floating_ip_address"],
    ]


def test_an_ipv6_only_service_gets_an_ipv6_vip_even_with_an_ipv4_subnet_id(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = lbs_at(make_lbs, sim, "2.27")

    outcome = ensure(
        lbs, dual_service(ip_families=("IPv6",), ip_family_policy="SingleStack"), dual_nodes()
    )

    (lb,) = sim.resources("loadbalancer")
    assert lb["vip_subnet_id"] == sim.seeded.private_subnet_v6_id
    assert lb["additional_vips"] == []
    assert [i.ip for i in outcome.ingress] == [lb["vip_address"]]
    assert sim.resources("floatingip") == []
    assert sorted(a for a, _ in members_of(sim, lb)) == ["fd00:10::a", "fd00:10::b"]


def test_a_service_made_single_stack_loses_its_second_load_balancer(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = lbs_at(make_lbs, sim, "2.25")
    svc = with_status(dual_service(), ensure(lbs, dual_service(), dual_nodes()))

    single = with_spec(svc, ip_families=("IPv4",), ip_family_policy="SingleStack")
    outcome = ensure(lbs, single, dual_nodes())

    assert sorted(by_name(sim)) == [NAME]
    assert [family(i.ip) for i in outcome.ingress] == [4]


def test_a_load_balancer_made_without_additional_vips_gets_an_ipv6_sibling(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    """Octavia cannot add a VIP to an existing load balancer: a Service that turns
    dual-stack keeps its IPv4 one, and IPv6 gets its own."""
    lbs = lbs_at(make_lbs, sim, "2.27")
    single = dual_service(ip_families=("IPv4",), ip_family_policy="SingleStack")
    first = with_status(single, ensure(lbs, single, dual_nodes()))
    (before,) = sim.resources("loadbalancer")

    outcome = ensure(lbs, with_spec(first, **DUAL), dual_nodes())

    found = by_name(sim)
    assert sorted(found) == [NAME, NAME + "_ipv6"]
    assert found[NAME]["id"] == before["id"]
    assert [family(i.ip) for i in outcome.ingress] == [4, 6]
    assert sorted(a for a, _ in members_of(sim, found[NAME])) == [
        "10.0.0.10",
        "10.0.0.11",
        "10.0.0.12",
    ]


def test_the_second_load_balancer_is_accounted_for_by_its_service(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    """`pyccm gc` and the orphan scan must not take `<name>_ipv6` for an orphan."""
    lbs = lbs_at(make_lbs, sim, "2.25")
    ensure(lbs, dual_service(), dual_nodes())

    owned = {r.name: r.services for r in lbs.owned() if r.kind == "load balancer"}

    assert owned == {NAME: ("default/web",), NAME + "_ipv6": ("default/web",)}


@pytest.mark.parametrize("version", ["2.25", "2.26"])
def test_a_managed_security_group_opens_the_node_ports_to_both_families(
    sim: OpenStackSimHandle, make_lbs: MakeLbs, version: str
) -> None:
    sim.set_knobs(octavia_version=version)
    lbs = make_lbs("[LoadBalancer]\nmanage-security-groups = true", cluster_id=CLUSTER_ID)
    svc = dual_service(health_check_node_port=32100, external_traffic_policy="Local")
    with_ids = {n.metadata.name: n.spec for n in nodes(3, sim=sim)}
    members = [msgspec.structs.replace(n, spec=with_ids[n.metadata.name]) for n in dual_nodes()]

    outcome = ensure(lbs, svc, members)

    (group,) = [g for g in sim.resources("security_group") if g["name"].startswith("lb-sg-")]
    rules = {
        (r["ethertype"], r["protocol"], r["port_range_min"], r["remote_ip_prefix"])
        for r in sim.resources("security_group_rule")
        if r["security_group_id"] == group["id"] and r["direction"] == "ingress"
    }
    # Each family's node ports open to its member subnet (10.0.0.0/16, fd00:10::/64).
    assert rules == {
        (ethertype, "tcp", port, cidr)
        for ethertype, cidr in (("IPv4", "10.0.0.0/16"), ("IPv6", "fd00:10::/64"))
        for port in (30080, 32100)
    }
    # Every node's port has the group, node-0002 (IPv4 only) included.
    holders = {
        ip["ip_address"]
        for p in sim.resources("port")
        if group["id"] in p["security_groups"]
        for ip in p["fixed_ips"]
    }
    assert {"10.0.0.10", "10.0.0.11", "10.0.0.12", "fd00:10::a", "fd00:10::b"} <= holders

    mark = sim.mark()
    ensure(lbs, with_status(svc, outcome), members)
    assert sim.writes(since=mark) == []
    delete(lbs, with_status(svc, outcome))
    assert [g for g in sim.resources("security_group") if g["id"] == group["id"]] == []
    assert_nothing_left(sim)
