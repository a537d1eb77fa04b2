"""Upstream's next release's load-balancer annotations on the real Octavia: the user's
tags on the load balancer, its listeners and pools beside pyccm's own, and the
X-Forwarded-Port / X-Forwarded-Proto headers on an HTTP listener. The provider's own code
against the real cloud; what it did is read back from the real Octavia."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
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
)
from pyccm.provider.errors import CloudError
from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack import create_cloud
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.scenario import seed_node
from tests.conformance.realcloud import RealCloud
from tests.conformance.test_beyond_upstream_on_real_openstack import (
    CLUSTER,
    HTTP_MONITOR,
    NAMESPACE,
    a_service,
    delete_and_wait,
    ipv4_nodes,
    lb_name,
    lbs,  # noqa: F401 (the fixture)
    listeners_of,
    monitors,
    pool_members,
    pools_of,
    the_load_balancer,
)
from tests.conformance.test_pagination_on_real_openstack import until_done
from tests.support.lb import octavia_flavor, octavia_zone, with_status

pytestmark = pytest.mark.conformance


def test_user_tags_go_beside_pyccms_own(real_cloud: RealCloud, lbs: LoadBalancers) -> None:  # noqa: F811
    service = a_service(
        "tagged",
        annotations={
            a.LOAD_BALANCER_TAGS: "env=prod, team=net",
            a.LISTENER_TAGS: "front",
            a.POOL_TAGS: "back,pyccm-cluster:spoof",
        },
    )

    outcome = until_done(lambda: lbs.ensure(service=service, nodes=ipv4_nodes()))

    conn = real_cloud.connection("ccm")
    lb = the_load_balancer(conn, lb_name(service))
    assert sorted(lb.tags) == sorted([lb_name(service), "env=prod", "team=net"])
    for listener in listeners_of(conn, lb):
        assert sorted(listener.tags) == sorted([lb_name(service), "front"])
    # The pool annotation held a spoofing tag: none of its tags were written.
    assert [p.tags for p in pools_of(conn, lb)] == [[], []]
    assert [e.reason for e in outcome.events] == [a.INVALID_ANNOTATION]
    delete_and_wait(real_cloud, lbs, service)


def test_forwarded_port_and_proto_headers(real_cloud: RealCloud, lbs: LoadBalancers) -> None:  # noqa: F811
    service = a_service(
        "forwarded", annotations={a.X_FORWARDED_PORT: "true", a.X_FORWARDED_PROTO: "true"}
    )

    until_done(lambda: lbs.ensure(service=service, nodes=ipv4_nodes()))

    conn = real_cloud.connection("ccm")
    lb = the_load_balancer(conn, lb_name(service))
    for listener in listeners_of(conn, lb):
        assert listener.protocol == "HTTP"
        assert listener.insert_headers == {"X-Forwarded-Port": "true", "X-Forwarded-Proto": "true"}
    delete_and_wait(real_cloud, lbs, service)


# --- externalTrafficPolicy: Cluster monitors check kube-proxy -----------------------------------

KUBE_PROXY_PORT = 10256
MONITORED = {a.ENABLE_HEALTH_MONITOR: "true"}


def tcp_and_udp(name: str, annotations: dict[str, str]) -> Service:
    """Two ports, TCP and UDP: a UDP pool takes an HTTP monitor from Octavia 2.16 on."""
    service = a_service(name, annotations=annotations)
    ports = (
        ServicePort(name="tcp", protocol="TCP", port=80, node_port=30080),
        ServicePort(name="udp", protocol="UDP", port=53, node_port=30053),
    )
    return msgspec.structs.replace(service, spec=msgspec.structs.replace(service.spec, ports=ports))


def test_cluster_services_monitors_check_kube_proxy(
    real_cloud: RealCloud,
    lbs: LoadBalancers,  # noqa: F811
) -> None:
    service = tcp_and_udp("kube-proxy", MONITORED)

    outcome = until_done(lambda: lbs.ensure(service=service, nodes=ipv4_nodes()))

    conn = real_cloud.connection("ccm")
    lb = the_load_balancer(conn, lb_name(service))
    assert monitors(conn, lb) == [HTTP_MONITOR] * 2
    subnet = real_cloud.seeded.subnet_id
    expected = sorted((f"10.0.17.{i}", subnet, KUBE_PROXY_PORT) for i in (1, 2))
    assert pool_members(conn, lb) == {80: expected, 53: expected}
    assert outcome.events == ()
    delete_and_wait(real_cloud, lbs, with_status(service, outcome))


def test_a_load_balancer_with_upstreams_monitors_keeps_them_without_a_write(
    real_cloud: RealCloud,
    lbs: LoadBalancers,  # noqa: F811
) -> None:
    # Upstream's shape: monitors of the port's protocol, members without a monitor port.
    upstreams = tcp_and_udp("port-monitors", MONITORED | {a.HEALTH_MONITOR_KUBE_PROXY: "false"})
    made = until_done(lambda: lbs.ensure(service=upstreams, nodes=ipv4_nodes()))
    conn = real_cloud.connection("ccm")
    lb = the_load_balancer(conn, lb_name(upstreams))
    assert [m[0] for m in monitors(conn, lb)] == ["TCP", "UDP-CONNECT"]

    # The same Service without the annotation (pyccm's default): nothing is written.
    service = with_status(tcp_and_udp("port-monitors", MONITORED), made)
    mark = real_cloud.mark()
    until_done(lambda: lbs.ensure(service=service, nodes=ipv4_nodes()))
    assert real_cloud.writes(since=mark) == []

    # `"true"` turns them into kube-proxy's, one write per sync.
    asked = with_status(
        tcp_and_udp("port-monitors", MONITORED | {a.HEALTH_MONITOR_KUBE_PROXY: "true"}), made
    )
    until_done(lambda: lbs.ensure(service=asked, nodes=ipv4_nodes()))
    assert monitors(conn, lb) == [HTTP_MONITOR] * 2
    ports = {m[2] for members in pool_members(conn, lb).values() for m in members}
    assert ports == {KUBE_PROXY_PORT}
    delete_and_wait(real_cloud, lbs, asked)


# --- members on the member subnet of a node with two interfaces --------------------------------

MEMBERS_CIDR, SECOND_ADDRESS = "10.30.0.0/24", "10.30.0.10"


@dataclass(frozen=True)
class SecondNic:
    """node-0000's second interface: a port on the subnet `subnet_id` of its own network."""

    subnet_id: str
    port_id: str
    first_port_id: str


@pytest.fixture
def second_nic(real_cloud: RealCloud) -> Iterator[SecondNic]:
    admin, seeded = real_cloud.connection("admin").network, real_cloud.seeded
    network = real_cloud.connection("ccm").network.create_network(name="members")
    try:
        subnet = real_cloud.connection("ccm").network.create_subnet(
            network_id=network.id, name="members-v4", ip_version=4, cidr=MEMBERS_CIDR
        )
        server = seeded.servers["node-0000"]
        port = admin.create_port(
            network_id=network.id,
            project_id=seeded.project_id,
            fixed_ips=[{"subnet_id": subnet.id, "ip_address": SECOND_ADDRESS}],
            device_owner="compute:nova",
            device_id=server,
            name="node-0000-members",
        )
        (first,) = admin.ports(device_id=server, network_id=seeded.network_id)
        yield SecondNic(subnet_id=subnet.id, port_id=port.id, first_port_id=first.id)
    finally:
        for port in admin.ports(network_id=network.id):
            admin.delete_port(port)
        admin.delete_network(network)  # its subnet with it


def lbs_with(
    real_cloud: RealCloud, path: Path, extra: str, sections: str = ""
) -> Iterator[LoadBalancers]:
    """The provider on the session's `cloud.conf` with `extra` lines in `[LoadBalancer]`
    and `sections` after it."""
    text = real_cloud.cloud_conf_path.read_text().split("[Route]")[0]
    path.write_text(text.replace("[LoadBalancer]\n", f"[LoadBalancer]\n{extra}\n") + sections)
    settings = ProviderSettings(
        cloud_config=path, cluster_name=CLUSTER, cloud_api_qps=1000.0, cloud_api_burst=1000
    )
    cloud = create_cloud(settings=settings, registry=CollectorRegistry(), environ={})
    found = cloud.load_balancers()
    assert found is not None
    yield found
    cloud.close()


@pytest.fixture
def lbs_with_groups(real_cloud: RealCloud, tmp_path: Path) -> Iterator[LoadBalancers]:
    yield from lbs_with(real_cloud, tmp_path / "cloud.conf", "manage-security-groups = true")


def seeded_node(real_cloud: RealCloud, index: int, *extra: str) -> Node:
    """Node `index` of the session's cloud (its server, its first address), with `extra`
    InternalIPs after that one."""
    seed = seed_node(index)
    server = real_cloud.seeded.servers[seed.name]
    return Node(
        metadata=OwnerMeta(name=seed.name, uid=f"uid-{seed.name}"),
        spec=NodeSpec(provider_id=f"openstack:///{server}"),
        status=NodeStatus(
            addresses=tuple(
                NodeAddress(type="InternalIP", address=address)
                for address in (seed.internal_ip, *extra)
            )
        ),
    )


def test_members_come_from_the_member_subnet_of_a_node_with_two_interfaces(
    real_cloud: RealCloud, lbs_with_groups: LoadBalancers, second_nic: SecondNic
) -> None:
    # node-0000 has an address on the member subnet (after its first one, which upstream
    # would take); node-0001 has none and is left out with a Warning.
    nodes = [seeded_node(real_cloud, 0, SECOND_ADDRESS), seeded_node(real_cloud, 1)]
    service = a_service("multi-nic", annotations={a.MEMBER_SUBNET_ID: second_nic.subnet_id})

    outcome = until_done(lambda: lbs_with_groups.ensure(service=service, nodes=nodes))

    conn = real_cloud.connection("ccm")
    lb = the_load_balancer(conn, lb_name(service))
    expected = [(SECOND_ADDRESS, second_nic.subnet_id, None)]
    assert pool_members(conn, lb) == {80: expected, 443: expected}
    assert [e.reason for e in outcome.events] == ["LoadBalancerNodeAddressMissing"]
    assert "node-0001" in outcome.events[0].message
    # The Service's group went on the port that holds the member address, not the other.
    network = real_cloud.connection("admin").network
    (group,) = network.security_groups(name=f"lb-sg-uid-multi-nic-{NAMESPACE}-multi-nic")
    assert group.id in network.get_port(second_nic.port_id).security_group_ids
    assert group.id not in network.get_port(second_nic.first_port_id).security_group_ids
    rules = {
        (r.protocol, r.port_range_min, r.remote_ip_prefix)
        for r in network.security_group_rules(security_group_id=group.id, direction="ingress")
    }
    assert rules == {("tcp", 30080, MEMBERS_CIDR), ("tcp", 30443, MEMBERS_CIDR)}
    delete_and_wait(real_cloud, lbs_with_groups, with_status(service, outcome))
    assert list(network.security_groups(name=group.name)) == []


# --- a provider, flavor and zone per class -----------------------------------------------------

UNKNOWN_FLAVOR = "3f0e8a34-0000-4000-8000-00000000b16f"


@dataclass(frozen=True)
class Catalogue:
    flavor_id: str
    zone: str


@pytest.fixture
def catalogue(real_cloud: RealCloud) -> Iterator[Catalogue]:
    """A flavor and an availability zone made by the admin (each on a profile of the
    `amphora` provider, which the stack's noop driver serves); removed at the end."""
    octavia = real_cloud.connection("admin").load_balancer
    flavor_id = octavia_flavor(real_cloud.connection("admin"), "next-big")
    zone = octavia_zone(real_cloud.connection("admin"), "next-zone")
    try:
        yield Catalogue(flavor_id=flavor_id, zone=zone)
    finally:
        flavor = octavia.get_flavor(flavor_id)
        octavia.delete_flavor(flavor_id)
        octavia.delete_flavor_profile(flavor.flavor_profile_id)
        profile = octavia.get_availability_zone(zone).availability_zone_profile_id
        octavia.delete_availability_zone(zone)
        octavia.delete_availability_zone_profile(profile)


@pytest.fixture
def lbs_with_classes(
    real_cloud: RealCloud, catalogue: Catalogue, tmp_path: Path
) -> Iterator[LoadBalancers]:
    classes = (
        f'[LoadBalancerClass "big"]\nlb-provider = amphora\nflavor-id = {catalogue.flavor_id}\n'
        f"availability-zone = {catalogue.zone}\n"
        f'[LoadBalancerClass "mismatch"]\nlb-provider = octavia\n'
        f"flavor-id = {catalogue.flavor_id}\n"
        f'[LoadBalancerClass "unknown"]\nflavor-id = {UNKNOWN_FLAVOR}\n'
    )
    yield from lbs_with(real_cloud, tmp_path / "cloud.conf", "", classes)


def test_the_class_chooses_provider_flavor_and_zone(
    real_cloud: RealCloud, lbs_with_classes: LoadBalancers, catalogue: Catalogue
) -> None:
    service = a_service("big", annotations={a.CLASS: "big"})

    outcome = until_done(lambda: lbs_with_classes.ensure(service=service, nodes=ipv4_nodes()))

    lb = the_load_balancer(real_cloud.connection("ccm"), lb_name(service))
    assert (lb.provider, lb.flavor_id, lb.availability_zone) == (
        "amphora",
        catalogue.flavor_id,
        catalogue.zone,
    )
    delete_and_wait(real_cloud, lbs_with_classes, with_status(service, outcome))


def test_octavia_refuses_a_class_flavor_or_zone_it_cannot_use(
    real_cloud: RealCloud, lbs_with_classes: LoadBalancers, catalogue: Catalogue
) -> None:
    refused = {
        # A provider other than the flavor profile's.
        "mismatch": ({a.CLASS: "mismatch"}, f"Flavor '{catalogue.flavor_id}' is not compatible "),
        "unknown": ({a.CLASS: "unknown"}, "Validation failure: Invalid flavor_id."),
        "nowhere": (
            {a.AVAILABILITY_ZONE: "nowhere"},
            "Validation failure: Invalid availability zone.",
        ),
    }
    mark = real_cloud.mark()
    for name, (given, answer) in refused.items():
        service = a_service(name, annotations=given)
        with pytest.raises(CloudError, match=re.escape(answer)):
            lbs_with_classes.ensure(service=service, nodes=ipv4_nodes())
    created = [c for c in real_cloud.writes(since=mark) if c.status < 300]
    assert created == []
