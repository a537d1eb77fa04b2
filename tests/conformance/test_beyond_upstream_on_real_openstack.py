"""Two of docs/features.md#beyond-upstream rows on the real services, where they had only met
the OpenStack simulator before:

* dual-stack Services (kubernetes/cloud-provider-openstack#1937): on a network of its own with an
  IPv4 and an IPv6 subnet (created here, removed at the end: the session's cloud stays IPv4-only for
  the other tests), a RequireDualStack Service gets ONE load balancer whose VIP port holds an
  address of each family (the real Octavia's `additional_vips`, API 2.26), pools with the nodes of
  both families, a floating IP on the IPv4 VIP only, both addresses in its ingress; deleting it
  leaves nothing. On the session's IPv4-only network it is refused before any write;
* `externalTrafficPolicy: Local` Services get an HTTP monitor on their
  `healthCheckNodePort` unasked (kubernetes/cloud-provider-openstack#2866), unless their annotation
  says "false".

The provider's own code (what the service worker runs) against the real cloud, as in
test_cluster_ownership_on_real_openstack.py; what it did is read back from the real
Octavia and Neutron, and its writes are counted from their access logs.
"""

from __future__ import annotations

import ipaddress
import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from pyccm.protocol.views import (
    Node,
    NodeAddress,
    NodeSpec,
    NodeStatus,
    OwnerMeta,
    Service,
    ServicePort,
    ServiceSpec,
)
from pyccm.provider.errors import CloudError
from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack import create_cloud
from pyccm.provider.openstack.common.features import parse_version_list
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm.provider.settings import ProviderSettings
from tests.conformance.realcloud import RealCloud, per_release
from tests.conformance.test_pagination_on_real_openstack import until_done
from tests.support.lb import with_status
from tests.support.waiting import wait_for

pytestmark = pytest.mark.conformance

CLUSTER = "beyond"
NAMESPACE = "beyond"
V4_CIDR, V6_CIDR = "10.20.0.0/24", "fd00:20::/64"
# (name, IPv4, IPv6): the third node has no IPv6 address, so no IPv6 member.
NODES = (
    ("dual-0", "10.20.0.10", "fd00:20::a"),
    ("dual-1", "10.20.0.11", "fd00:20::b"),
    ("dual-2", "10.20.0.12", ""),
)
PORTS = ((80, 30080), (443, 30443))
HEALTH_CHECK_PORT = 32100
HTTP_MONITOR = ("HTTP", "/healthz", "GET", "200")
GONE_TIMEOUT = 120.0


@dataclass(frozen=True)
class DualNetwork:
    network_id: str
    v4_subnet_id: str
    v6_subnet_id: str


@pytest.fixture
def lbs(real_cloud: RealCloud, tmp_path: Path) -> Iterator[LoadBalancers]:
    path = tmp_path / "cloud.conf"
    path.write_text(real_cloud.cloud_conf_path.read_text())
    provider_settings = ProviderSettings(
        cloud_config=path, cluster_name=CLUSTER, cloud_api_qps=1000.0, cloud_api_burst=1000
    )
    cloud = create_cloud(settings=provider_settings, registry=CollectorRegistry(), environ={})
    found = cloud.load_balancers()
    assert found is not None
    yield found
    cloud.close()


@pytest.fixture
def dual_network(real_cloud: RealCloud) -> Iterator[DualNetwork]:
    """The tenant's own dual-stack network, routed to `public` (a floating IP needs the
    IPv4 subnet behind a router with a gateway there); everything on it goes at the end."""
    network = real_cloud.connection("ccm").network
    created = network.create_network(name="beyond-dual")
    router = None
    try:
        v4 = network.create_subnet(
            network_id=created.id, name="beyond-dual-v4", ip_version=4, cidr=V4_CIDR
        )
        v6 = network.create_subnet(
            network_id=created.id, name="beyond-dual-v6", ip_version=6, cidr=V6_CIDR
        )
        router = network.create_router(
            name="beyond-dual-router",
            external_gateway_info={"network_id": real_cloud.seeded.external_network_id},
        )
        network.add_interface_to_router(router, subnet=v4.id)
        yield DualNetwork(network_id=created.id, v4_subnet_id=v4.id, v6_subnet_id=v6.id)
    finally:
        _remove_load_balancers_on(real_cloud, created.id)
        if router is not None:
            for port in network.ports(device_id=router.id, network_id=created.id):
                network.remove_interface_from_router(router, port_id=port.id)
            network.delete_router(router)
        network.delete_network(created)  # its subnets with it


def _remove_load_balancers_on(real_cloud: RealCloud, network_id: str) -> None:
    """What a failed test left on the network: load balancers (their VIP ports with them)
    and the floating IPs on those ports."""
    conn = real_cloud.connection("admin")
    for lb in conn.load_balancer.load_balancers(vip_network_id=network_id):
        for fip in conn.network.ips(port_id=lb.vip_port_id):
            conn.network.delete_ip(fip)
        if lb.provisioning_status in {"ACTIVE", "ERROR"}:
            conn.load_balancer.delete_load_balancer(lb, cascade=True)
    wait_for(
        lambda: not list(conn.load_balancer.load_balancers(vip_network_id=network_id)),
        timeout=GONE_TIMEOUT,
        what=f"no load balancer left on network {network_id}",
    )


# --- Kubernetes objects ----------------------------------------------------------------------


def dual_nodes() -> list[Node]:
    return [
        Node(
            metadata=OwnerMeta(name=name, uid=f"uid-{name}"),
            spec=NodeSpec(),
            status=NodeStatus(
                addresses=tuple(
                    NodeAddress(type="InternalIP", address=address)
                    for address in (v4, v6)
                    if address
                )
            ),
        )
        for name, v4, v6 in NODES
    ]


def a_service(name: str, *, annotations: dict[str, str] | None = None, **spec: Any) -> Service:
    return Service(
        metadata=OwnerMeta(
            name=name, namespace=NAMESPACE, uid=f"uid-{name}", annotations=annotations or {}
        ),
        spec=ServiceSpec(
            type="LoadBalancer",
            ports=tuple(
                ServicePort(name=f"p{port}", protocol="TCP", port=port, node_port=node_port)
                for port, node_port in PORTS
            ),
            **spec,
        ),
    )


def dual_service(
    network: DualNetwork | None, families: tuple[str, str] = ("IPv4", "IPv6")
) -> Service:
    """RequireDualStack; on `network` (its IPv4 subnet named, the IPv6 one found by pyccm)
    with its nodes there too, else on the session's IPv4-only `private` network."""
    on_network = {}
    if network is not None:
        on_network = {a.SUBNET_ID: network.v4_subnet_id, a.MEMBER_SUBNET_ID: network.v4_subnet_id}
    return a_service(
        "dual",
        annotations=on_network,
        ip_families=families,
        ip_family_policy="RequireDualStack",
    )


def lb_name(service: Service) -> str:
    return f"kube_service_{CLUSTER}_{NAMESPACE}_{service.metadata.name}"


# --- reading the real cloud ------------------------------------------------------------------


def octavia_version(real_cloud: RealCloud) -> tuple[int, int] | None:
    """The highest version in Octavia's own root document (`GET /`)."""
    root = f"http://127.0.0.1:{real_cloud.ports['octavia']}/"
    with urllib.request.urlopen(root, timeout=10) as reply:
        return parse_version_list(json.dumps(json.load(reply)).encode())


def the_load_balancer(conn: Any, name: str) -> Any:
    (lb,) = list(conn.load_balancer.load_balancers(name=name))
    return lb


def listeners_of(conn: Any, lb: Any) -> list[Any]:
    """The load balancer's own listeners, by the ids it lists. Not
    `listeners(loadbalancer_id=...)`: openstacksdk's Listener has no such query parameter
    and does not send it, and every listener of the project came back once other tests had
    left load balancers (its Pool has one)."""
    return [conn.load_balancer.get_listener(item["id"]) for item in lb.listeners]


def pools_of(conn: Any, lb: Any) -> list[Any]:
    """The load balancer's own pools, by the ids it lists."""
    return [conn.load_balancer.get_pool(item["id"]) for item in lb.pools]


def pool_members(conn: Any, lb: Any) -> dict[int, list[tuple[str, str | None, int | None]]]:
    """{listener port: sorted (address, subnet, monitor port) of its pool's members}."""
    found = {}
    for listener in listeners_of(conn, lb):
        members = conn.load_balancer.members(listener.default_pool_id)
        found[listener.protocol_port] = sorted(
            (m.address, m.subnet_id, m.monitor_port) for m in members
        )
    return found


def monitors(conn: Any, lb: Any) -> list[tuple[str, str, str, str]]:
    pools = {p.id for p in pools_of(conn, lb)}
    return sorted(
        (m.type, m.url_path, m.http_method, m.expected_codes)
        for m in conn.load_balancer.health_monitors()
        if {p["id"] for p in m.pools} & pools
    )


def family(address: str) -> int:
    return ipaddress.ip_address(address).version


def load_balancer_posts(real_cloud: RealCloud, since: int) -> list[str]:
    return [
        c.path
        for c in real_cloud.writes(since=since)
        if c.method == "POST" and c.path.rstrip("/").endswith("/lbaas/loadbalancers")
    ]


def delete_and_wait(real_cloud: RealCloud, lbs: LoadBalancers, service: Service) -> None:
    until_done(lambda: lbs.ensure_deleted(service=service))
    conn = real_cloud.connection("ccm")
    wait_for(
        lambda: not list(conn.load_balancer.load_balancers(name=lb_name(service))),
        timeout=GONE_TIMEOUT,
        what=f"{lb_name(service)} is gone",
    )


# --- dual-stack Services ---------------------------------------------------------------------


# The fields of a load balancer's `additional_vips` entry, per release
# (docs/openstack-releases.md, difference 4).
ADDITIONAL_VIP_FIELDS = per_release(
    {
        "2026.2": ["ip_address", "port_id", "subnet_id"],
        "2024.1": ["ip_address", "subnet_id"],
        "2025.1": ["ip_address", "port_id", "subnet_id"],
    }
)


def test_octavia_offers_additional_vips(real_cloud: RealCloud) -> None:
    # Octavia 19 (2026.2) and 16.1 (2025.1) offer API 2.30, Octavia 14 (2024.1) 2.28: all
    # have 2.26's `additional_vips`, so the dual-stack Services below get one load balancer.
    assert octavia_version(real_cloud) == per_release(
        {"2026.2": (2, 30), "2025.1": (2, 30), "2024.1": (2, 28)}
    )


@pytest.mark.parametrize(
    "families", [("IPv4", "IPv6"), ("IPv6", "IPv4")], ids=["v4-first", "v6-first"]
)
def test_require_dual_stack_gets_one_load_balancer_with_an_additional_vip(
    real_cloud: RealCloud,
    lbs: LoadBalancers,
    dual_network: DualNetwork,
    families: tuple[str, str],
) -> None:
    net = dual_network
    service, nodes = dual_service(net, families), dual_nodes()
    subnet = {4: net.v4_subnet_id, 6: net.v6_subnet_id}
    first, second = (int(f[-1]) for f in families)
    mark = real_cloud.mark()

    outcome = until_done(lambda: lbs.ensure(service=service, nodes=nodes))

    assert len(load_balancer_posts(real_cloud, mark)) == 1
    conn = real_cloud.connection("ccm")
    lb = the_load_balancer(conn, lb_name(service))
    assert (lb.vip_network_id, lb.vip_subnet_id) == (net.network_id, subnet[first])
    # The additional VIP is an address of the VIP port; Octavia 19 names the port in it,
    # Octavia 14 does not (pyccm reads neither: the VIP port's addresses are checked below).
    (extra,) = lb.additional_vips
    assert sorted(extra) == ADDITIONAL_VIP_FIELDS
    assert extra["subnet_id"] == subnet[second]
    assert extra.get("port_id", lb.vip_port_id) == lb.vip_port_id
    address = {
        family(lb.vip_address): lb.vip_address,
        family(extra["ip_address"]): extra["ip_address"],
    }
    assert sorted(address) == [4, 6]
    # One VIP port in Neutron, holding both addresses.
    port = conn.network.get_port(lb.vip_port_id)
    assert sorted((f["subnet_id"], f["ip_address"]) for f in port.fixed_ips) == sorted(
        [(subnet[4], address[4]), (subnet[6], address[6])]
    )
    # Each pool: every node's IPv4 address, and the IPv6 address of those that have one.
    expected = sorted(
        [(v4, subnet[4], None) for _, v4, _ in NODES]
        + [(v6, subnet[6], None) for _, _, v6 in NODES if v6]
    )
    assert pool_members(conn, lb) == {port: expected for port, _ in PORTS}
    # The listeners admit both families (Octavia checks each CIDR against the VIPs).
    for listener in listeners_of(conn, lb):
        assert sorted(listener.allowed_cidrs) == ["0.0.0.0/0", "::/0"]
    # A floating IP on the IPv4 VIP only; the IPv6 VIP is reached as it is.
    (fip,) = list(conn.network.ips(port_id=lb.vip_port_id))
    assert fip.fixed_ip_address == address[4]
    assert fip.floating_network_id == real_cloud.seeded.external_network_id
    public = {4: fip.floating_ip_address, 6: address[6]}
    assert [i.ip for i in outcome.ingress] == [public[first], public[second]]
    assert outcome.annotations_to_set[a.LOAD_BALANCER_ID] == lb.id
    assert outcome.events == ()

    served = with_status(service, outcome)
    mark = real_cloud.mark()
    again = until_done(lambda: lbs.ensure(service=served, nodes=nodes))
    assert again.ingress == outcome.ingress
    assert real_cloud.writes(since=mark) == []

    delete_and_wait(real_cloud, lbs, served)
    admin = real_cloud.connection("admin")
    assert list(admin.network.ips(port_id=lb.vip_port_id)) == []
    assert list(admin.network.ips(floating_ip_address=fip.floating_ip_address)) == []
    wait_for(
        lambda: not list(admin.network.ports(network_id=net.network_id, device_owner="Octavia")),
        timeout=GONE_TIMEOUT,
        what="the VIP port is gone",
    )


def test_require_dual_stack_without_an_ipv6_subnet_writes_nothing(
    real_cloud: RealCloud, lbs: LoadBalancers
) -> None:
    service = dual_service(None)  # the session's `private` network: IPv4 only
    nodes = [
        Node(
            metadata=OwnerMeta(name="v6less", uid="uid-v6less"),
            spec=NodeSpec(),
            status=NodeStatus(
                addresses=(
                    NodeAddress(type="InternalIP", address="10.0.16.200"),
                    NodeAddress(type="InternalIP", address="fd00:21::a"),
                )
            ),
        )
    ]
    mark = real_cloud.mark()

    with pytest.raises(CloudError, match=r"requires dual-stack .* has no IPv6 subnet") as raised:
        lbs.ensure(service=service, nodes=nodes)

    assert not raised.value.retryable
    assert real_cloud.writes(since=mark) == []
    assert (
        list(real_cloud.connection("ccm").load_balancer.load_balancers(name=lb_name(service))) == []
    )


def test_a_floating_ip_stands_for_the_ports_one_routed_ipv4_address(
    real_cloud: RealCloud, dual_network: DualNetwork
) -> None:
    """What pyccm's floating IP on a dual-stack VIP port relies on, and the refusals the
    simulator answers alike (tests/sim_openstack/test_floating_ips_on_dual_stack_ports.py)."""
    net, network = dual_network, real_cloud.connection("ccm").network
    public = real_cloud.seeded.external_network_id
    unrouted = network.create_subnet(
        network_id=net.network_id, ip_version=4, cidr="10.21.0.0/24", name="beyond-unrouted"
    )
    ports = {
        name: network.create_port(
            network_id=net.network_id, fixed_ips=[{"subnet_id": s} for s in subnets]
        )
        for name, subnets in {
            "dual": (net.v6_subnet_id, net.v4_subnet_id),
            "v6 only": (net.v6_subnet_id,),
            "two v4": (net.v4_subnet_id, unrouted.id),
            "unrouted": (unrouted.id,),
        }.items()
    }

    def associate(port: str, fixed: str | None = None) -> tuple[int, Any]:
        body = {"floating_network_id": public, "port_id": ports[port].id}
        if fixed is not None:
            body["fixed_ip_address"] = fixed
        reply = network.post("/floatingips", json={"floatingip": body})
        return reply.status_code, reply.json()

    try:
        (v6_address,) = [f["ip_address"] for f in ports["v6 only"].fixed_ips]
        status, created = associate("dual")
        assert status == 201
        (ipv4,) = [
            f["ip_address"] for f in ports["dual"].fixed_ips if f["subnet_id"] == net.v4_subnet_id
        ]
        assert created["floatingip"]["fixed_ip_address"] == ipv4
        network.delete_ip(created["floatingip"]["id"])
        answers = {
            "no IPv4": associate("v6 only"),
            "an IPv6 address": associate("v6 only", v6_address),
            "two IPv4": associate("two v4"),
            "unrouted": associate("unrouted"),
            "not an address": associate("two v4", "10.0.0.999"),
        }
    finally:
        for port in ports.values():
            network.delete_port(port)

    bad = "Bad floatingip request: "
    assert {
        case: (status, body["NeutronError"]["message"]) for case, (status, body) in answers.items()
    } == {
        "no IPv4": (
            400,
            f"{bad}Cannot add floating IP to port {ports['v6 only'].id} that has no fixed IPv4 "
            "addresses.",
        ),
        "an IPv6 address": (
            400,
            f"{bad}Cannot process floating IP association with {v6_address}, since that is "
            "not an IPv4 address.",
        ),
        "two IPv4": (
            400,
            f"{bad}Port {ports['two v4'].id} has multiple fixed IPv4 addresses.  Must provide "
            "a specific IPv4 address when assigning a floating IP.",
        ),
        "unrouted": (
            404,
            f"External network {public} is not reachable from subnet {unrouted.id}.  "
            f"Therefore, cannot associate Port {ports['unrouted'].id} with a Floating IP.",
        ),
        "not an address": (
            400,
            "Invalid input for fixed_ip_address. Reason: '10.0.0.999' is not a valid IP address.",
        ),
    }
    assert answers["unrouted"][1]["NeutronError"]["type"] == "ExternalGatewayForFloatingIPNotFound"
    assert list(network.ips(floating_network_id=public, port_id=ports["dual"].id)) == []


# --- externalTrafficPolicy: Local ------------------------------------------------------------


def local_service(name: str, annotations: dict[str, str] | None = None) -> Service:
    return a_service(
        name,
        annotations=annotations,
        external_traffic_policy="Local",
        health_check_node_port=HEALTH_CHECK_PORT,
    )


def ipv4_nodes() -> list[Node]:
    return [
        Node(
            metadata=OwnerMeta(name=f"local-{i}", uid=f"uid-local-{i}"),
            spec=NodeSpec(),
            status=NodeStatus(addresses=(NodeAddress(type="InternalIP", address=f"10.0.17.{i}"),)),
        )
        for i in (1, 2)
    ]


def test_a_local_service_gets_an_http_monitor_on_its_health_check_node_port(
    real_cloud: RealCloud, lbs: LoadBalancers
) -> None:
    service, nodes = local_service("local"), ipv4_nodes()

    outcome = until_done(lambda: lbs.ensure(service=service, nodes=nodes))

    conn = real_cloud.connection("ccm")
    lb = the_load_balancer(conn, lb_name(service))
    assert monitors(conn, lb) == [HTTP_MONITOR] * len(PORTS)
    subnet = real_cloud.seeded.subnet_id
    expected = sorted((f"10.0.17.{i}", subnet, HEALTH_CHECK_PORT) for i in (1, 2))
    assert pool_members(conn, lb) == {port: expected for port, _ in PORTS}
    assert [e.reason for e in outcome.events] == []

    # The Service's annotation turns it off: the monitors go, and the members' monitor port.
    off = with_status(local_service("local", {a.ENABLE_HEALTH_MONITOR: "false"}), outcome)
    turned_off = until_done(lambda: lbs.ensure(service=off, nodes=nodes))
    assert [e.reason for e in turned_off.events] == [a.NO_HEALTH_MONITOR]
    wait_for(lambda: monitors(conn, lb) == [], timeout=60, what="the monitors are gone")
    unmonitored = sorted((f"10.0.17.{i}", subnet, None) for i in (1, 2))
    assert pool_members(conn, lb) == {port: unmonitored for port, _ in PORTS}

    delete_and_wait(real_cloud, lbs, off)


def test_a_local_service_whose_annotation_says_false_gets_no_monitor(
    real_cloud: RealCloud, lbs: LoadBalancers
) -> None:
    service = local_service("local-off", {a.ENABLE_HEALTH_MONITOR: "false"})

    outcome = until_done(lambda: lbs.ensure(service=service, nodes=ipv4_nodes()))

    conn = real_cloud.connection("ccm")
    lb = the_load_balancer(conn, lb_name(service))
    assert monitors(conn, lb) == []
    assert {m[2] for members in pool_members(conn, lb).values() for m in members} == {None}
    assert [e.reason for e in outcome.events] == [a.NO_HEALTH_MONITOR]

    delete_and_wait(real_cloud, lbs, with_status(service, outcome))
