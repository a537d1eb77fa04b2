"""Service annotations and spec fields become Octavia settings (docs/reference/annotations.md); bad
values fall back to the default with a Warning event; features follow Octavia's API version."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pyccm.protocol.views import LoadBalancerIngress
from pyccm.provider.errors import CloudError
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import (
    MakeLbs,
    ensure,
    nodes,
    octavia_flavor,
    octavia_zone,
    one,
    service,
    with_annotations,
    writes,
)

P = "loadbalancer.openstack.org/"


def by_port(sim: OpenStackSimHandle, kind: str) -> list[dict[str, Any]]:
    return sorted(sim.resources(kind), key=lambda row: row["name"])


def test_listener_settings_follow_the_annotations(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(
        ports=((80, 30080, "TCP"),),
        annotations={
            P + "connection-limit": "1000",
            P + "timeout-client-data": "1111",
            P + "timeout-member-connect": "2222",
            P + "timeout-member-data": "3333",
            P + "timeout-tcp-inspect": "44",
            P + "lb-method": "LEAST_CONNECTIONS",
        },
        load_balancer_source_ranges=("10.1.0.0/16", "192.168.7.0/24"),
        session_affinity="ClientIP",
    )

    ensure(lbs, svc, nodes(1))

    listener = one(sim, "listener")
    assert listener["connection_limit"] == 1000
    assert (
        listener["timeout_client_data"],
        listener["timeout_member_connect"],
        listener["timeout_member_data"],
        listener["timeout_tcp_inspect"],
    ) == (1111, 2222, 3333, 44)
    assert sorted(listener["allowed_cidrs"]) == ["10.1.0.0/16", "192.168.7.0/24"]
    pool = one(sim, "pool")
    assert pool["lb_algorithm"] == "LEAST_CONNECTIONS"
    assert pool["session_persistence"]["type"] == "SOURCE_IP"


def test_bad_annotation_values_fall_back_to_the_default_with_a_warning(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(
        ports=((80, 30080, "TCP"),),
        annotations={
            P + "connection-limit": "lots",
            P + "enable-health-monitor": "yes",
            P + "lb-method": "FASTEST",
            P + "proxy-protocol": "v3",
        },
        load_balancer_source_ranges=("10.0.0.0/33",),
    )

    outcome = ensure(lbs, svc, nodes(1))

    listener = one(sim, "listener")
    assert listener["connection_limit"] == -1
    assert listener["allowed_cidrs"] == ["0.0.0.0/0"]
    assert one(sim, "pool")["lb_algorithm"] == "ROUND_ROBIN"
    assert one(sim, "pool")["protocol"] == "TCP"
    assert sim.inventory()["healthmonitor"] == 0
    assert all(e.type == "Warning" for e in outcome.events)
    warned = {e.message.split("=")[0] for e in outcome.events}
    assert warned == {
        "annotation loadbalancer.openstack.org/lb-method",
        "annotation loadbalancer.openstack.org/proxy-protocol",
        "annotation loadbalancer.openstack.org/connection-limit",
        "annotation loadbalancer.openstack.org/enable-health-monitor",
        "spec.loadBalancerSourceRanges: '10.0.0.0/33' is not a CIDR; dropped",
    }
    assert [e.reason for e in outcome.events].count("LoadBalancerAnnotationInvalid") == 4


@pytest.mark.parametrize(
    ("value", "pool_protocol"), [("true", "PROXY"), ("v1", "PROXY"), ("v2", "PROXYV2")]
)
def test_proxy_protocol_sets_the_pool_protocol_and_ip_mode_proxy(
    sim: OpenStackSimHandle, lbs: LoadBalancers, value: str, pool_protocol: str
) -> None:
    svc = service(ports=((80, 30080, "TCP"),), annotations={P + "proxy-protocol": value})

    outcome = ensure(lbs, svc, nodes(1))

    assert one(sim, "pool")["protocol"] == pool_protocol
    assert outcome.ingress[0].ip_mode == "Proxy"


def test_proxy_protocol_with_ingress_hostnames_publishes_a_hostname(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs(
        "[LoadBalancer]\nenable-ingress-hostname = true\ningress-hostname-suffix = example.net"
    )
    svc = service(ports=((80, 30080, "TCP"),), annotations={P + "proxy-protocol": "true"})

    outcome = ensure(lbs, svc, nodes(1))

    address = one(sim, "floatingip")["floating_ip_address"]
    assert outcome.ingress == (LoadBalancerIngress(hostname=f"{address}.example.net"),)


def test_the_hostname_annotation_is_published_as_is(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(annotations={P + "hostname": "web.example.org"})

    outcome = ensure(lbs, svc, nodes(1))

    assert outcome.ingress == (LoadBalancerIngress(hostname="web.example.org"),)


def test_x_forwarded_for_makes_http_listeners_that_insert_the_header(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((80, 30080, "TCP"),), annotations={P + "x-forwarded-for": "true"})

    ensure(lbs, svc, nodes(1))

    listener = one(sim, "listener")
    assert listener["protocol"] == "HTTP"
    assert listener["insert_headers"] == {"X-Forwarded-For": "true"}
    assert one(sim, "pool")["protocol"] == "HTTP"


def test_health_monitors_follow_the_port_protocol_and_can_be_toggled(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    # The Service's ports are checked, not kube-proxy's (test_kube_proxy_health_monitors.py).
    on = {
        P + "enable-health-monitor": "true",
        P + "health-monitor-delay": "7",
        P + "health-monitor-kube-proxy": "false",
    }
    svc = service(ports=((80, 30080, "TCP"), (53, 30053, "UDP")), annotations=on)
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)

    monitors = by_port(sim, "healthmonitor")
    assert [(m["name"].split("_")[1], m["type"], m["delay"]) for m in monitors] == [
        ("0", "TCP", 7),
        ("1", "UDP-CONNECT", 7),
    ]
    ensure(lbs, with_annotations(svc, {P + "enable-health-monitor": "false"}), nodes(2))
    assert sim.inventory()["healthmonitor"] == 0
    ensure(lbs, with_annotations(svc, {P + "health-monitor-delay": "9"}), nodes(2))
    assert [m["delay"] for m in sim.resources("healthmonitor")] == [9, 9]


def test_local_traffic_policy_uses_http_monitors_on_the_health_check_port(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs("[LoadBalancer]\ncreate-monitor = true")
    svc = service(
        ports=((80, 30080, "TCP"),), external_traffic_policy="Local", health_check_node_port=32000
    )

    ensure(lbs, svc, nodes(2))

    monitor = one(sim, "healthmonitor")
    assert (monitor["type"], monitor["url_path"], monitor["http_method"]) == (
        "HTTP",
        "/healthz",
        "GET",
    )
    assert {m["monitor_port"] for m in sim.resources("member")} == {32000}


def test_the_node_selector_chooses_the_members(sim: OpenStackSimHandle, lbs: LoadBalancers) -> None:
    import msgspec

    labelled = [
        msgspec.structs.replace(
            n,
            metadata=msgspec.structs.replace(
                n.metadata, labels={"pool": "edge"} if i % 2 else {"pool": "core"}
            ),
        )
        for i, n in enumerate(nodes(6))
    ]
    svc = service(ports=((80, 30080, "TCP"),), annotations={P + "node-selector": "pool=edge"})

    ensure(lbs, svc, labelled)

    assert sorted(m["name"] for m in sim.resources("member")) == [
        "node-0001",
        "node-0003",
        "node-0005",
    ]


def test_no_node_ports_means_no_members(sim: OpenStackSimHandle, lbs: LoadBalancers) -> None:
    ensure(lbs, service(ports=((80, 0, "TCP"),)), nodes(3))

    assert sim.inventory()["member"] == 0
    assert sim.inventory()["pool"] == 1


@pytest.mark.parametrize(
    ("version", "tags", "acl"), [("2.4", False, False), ("2.11", True, False), ("2.27", True, True)]
)
def test_features_follow_the_octavia_api_version(
    sim: OpenStackSimHandle, make_lbs: MakeLbs, version: str, tags: bool, acl: bool
) -> None:
    sim.set_knobs(octavia_version=version)
    ranges = ("10.1.0.0/16",) if acl else ()
    svc = service(ports=((80, 30080, "TCP"),), load_balancer_source_ranges=ranges)

    ensure(make_lbs(), svc, nodes(1))

    assert bool(one(sim, "loadbalancer").get("tags")) == tags
    assert one(sim, "listener").get("allowed_cidrs") == (["10.1.0.0/16"] if acl else None)
    # And once in place, the old API's load balancer is left alone too.
    mark = sim.mark()
    make_lbs().ensure(service=svc, nodes=nodes(1))
    assert writes(sim, mark) == []


def test_availability_zone_and_flavor_are_sent_when_octavia_knows_them(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    flavor = octavia_flavor(sim.connection(), "small")
    zone = octavia_zone(sim.connection(), "az-2")
    svc = service(
        ports=((80, 30080, "TCP"),),
        annotations={P + "availability-zone": zone, P + "flavor-id": flavor},
    )

    ensure(make_lbs(), svc, nodes(1))

    lb = one(sim, "loadbalancer")
    assert (lb["availability_zone"], lb["flavor_id"]) == ("az-2", flavor)


def test_a_flavor_or_zone_octavia_does_not_know_fails_the_sync_and_creates_nothing(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    unknown = {
        P + "flavor-id": "3f0e8a34-0000-4000-8000-00000000b16f",
        P + "availability-zone": "az-nowhere",
    }
    for annotation, answer in (
        (P + "flavor-id", "Validation failure: Invalid flavor_id."),
        (P + "availability-zone", "Validation failure: Invalid availability zone."),
    ):
        svc = service(ports=((80, 30080, "TCP"),), annotations={annotation: unknown[annotation]})
        with pytest.raises(CloudError, match=re.escape(answer)):
            ensure(make_lbs(), svc, nodes(1))
    assert sim.inventory()["loadbalancer"] == 0


def test_an_availability_zone_on_an_old_octavia_is_ignored_with_a_warning(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    sim.set_knobs(octavia_version="2.13")
    svc = service(ports=((80, 30080, "TCP"),), annotations={P + "availability-zone": "az-2"})

    outcome = ensure(make_lbs(), svc, nodes(1))

    assert one(sim, "loadbalancer")["availability_zone"] is None
    assert [e.reason for e in outcome.events] == ["LoadBalancerAvailabilityZonesIgnored"]


def test_an_unknown_load_balancer_class_is_refused(lbs: LoadBalancers) -> None:
    from pyccm.provider.errors import CloudError

    svc = service(annotations={P + "class": "nope"})

    with pytest.raises(CloudError, match="unknown") as caught:
        lbs.ensure(service=svc, nodes=nodes(1))
    assert caught.value.retryable is False


def test_a_load_balancer_class_chooses_the_floating_subnet(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    conn = sim.connection()
    subnet = conn.network.create_subnet(
        network_id=sim.seeded.public_network_id,
        name="dmz",
        cidr="198.51.100.0/24",
        ip_version=4,
    )
    conn.close()
    lbs = make_lbs(f'[LoadBalancerClass "dmz"]\nfloating-subnet-id = {subnet.id}')

    outcome = ensure(lbs, service(annotations={P + "class": "dmz"}), nodes(1))

    assert outcome.ingress[0].ip.startswith("198.51.100.")


@pytest.mark.parametrize("version", ["2.11", "2.4"])
def test_source_ranges_an_octavia_cannot_enforce_fail_the_sync_and_create_nothing(
    sim: OpenStackSimHandle, make_lbs: MakeLbs, version: str
) -> None:
    # Upstream warns and creates the load balancer open to everyone.
    sim.set_knobs(octavia_version=version)
    svc = service(ports=((80, 30080, "TCP"),), load_balancer_source_ranges=("10.1.0.0/16",))
    mark = sim.mark()

    with pytest.raises(CloudError, match="restricts its source ranges") as failed:
        make_lbs().ensure(service=svc, nodes=nodes(1))

    assert failed.value.retryable is False
    assert writes(sim, mark) == []
    assert sim.inventory()["loadbalancer"] == 0


def test_an_sctp_port_on_an_octavia_below_2_23_fails_the_sync_and_creates_nothing(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    # Upstream sends the SCTP listener anyway and Octavia answers 400 on every sync.
    sim.set_knobs(octavia_version="2.22")
    svc = service(ports=((80, 30080, "TCP"), (3868, 31868, "SCTP")))
    mark = sim.mark()

    with pytest.raises(CloudError) as failed:
        make_lbs().ensure(service=svc, nodes=nodes(1))

    assert str(failed.value) == (
        "SCTP port 3868 needs Octavia API 2.23 (SCTP listeners and pools); this Octavia "
        "offers API 2.22; no load balancer is created or changed"
    )
    assert failed.value.retryable is False
    assert writes(sim, mark) == []
    assert sim.inventory()["loadbalancer"] == 0


def test_an_sctp_port_on_octavia_2_23_gets_sctp_listener_pool_and_monitor(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    sim.set_knobs(octavia_version="2.23")
    svc = service(
        ports=((3868, 31868, "SCTP"),),
        annotations={P + "enable-health-monitor": "true", P + "health-monitor-kube-proxy": "false"},
    )

    ensure(make_lbs(), svc, nodes(2))

    assert one(sim, "listener")["protocol"] == "SCTP"
    assert one(sim, "pool")["protocol"] == "SCTP"
    assert one(sim, "healthmonitor")["type"] == "SCTP"
    assert sim.inventory()["member"] == 2


TLS_REF = "https://kv.example/v1/containers/0b8a4d2e-3f1c-4e5a-9b6d-7c8e9f0a1b2c"


@pytest.mark.parametrize(
    ("conf", "annotations", "refused"),
    [
        ("", {P + "x-forwarded-for": "true"}, f"{P}x-forwarded-for cannot apply to UDP port 53"),
        ("", {P + "proxy-protocol": "v2"}, f"{P}proxy-protocol cannot apply to UDP port 53"),
        (
            f"[LoadBalancer]\ndefault-tls-container-ref = {TLS_REF}",
            {},
            "[LoadBalancer] default-tls-container-ref cannot apply to UDP port 53",
        ),
    ],
)
def test_http_tls_or_proxy_on_a_udp_port_fails_the_sync_and_creates_nothing(
    sim: OpenStackSimHandle, make_lbs: MakeLbs, conf: str, annotations: dict[str, str], refused: str
) -> None:
    # Upstream makes the UDP port's listener HTTP (served over TCP, so the port is lost) or
    # puts a PROXY pool on the UDP listener, which Octavia refuses on every sync.
    svc = service(ports=((80, 30080, "TCP"), (53, 30053, "UDP")), annotations=annotations)
    mark = sim.mark()

    with pytest.raises(CloudError) as failed:
        make_lbs(conf).ensure(service=svc, nodes=nodes(1))

    assert str(failed.value).startswith(f"{refused}: its listener would be ")
    assert str(failed.value).endswith("; no load balancer is created or changed")
    assert failed.value.retryable is False
    assert writes(sim, mark) == []
    assert sim.inventory()["loadbalancer"] == 0


def test_a_tls_ref_on_an_sctp_port_is_refused_by_name(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(
        ports=((3868, 31868, "SCTP"),), annotations={P + "default-tls-container-ref": TLS_REF}
    )

    with pytest.raises(CloudError) as failed:
        lbs.ensure(service=svc, nodes=nodes(1))

    assert str(failed.value) == (
        f"{P}default-tls-container-ref cannot apply to SCTP port 3868: its listener would be "
        "TERMINATED_HTTPS and its pool HTTP; Octavia serves SCTP only with SCTP listeners and "
        "pools; no load balancer is created or changed"
    )
    assert sim.inventory()["loadbalancer"] == 0


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        ("hostname", "Not A Hostname!"),
        ("node-selector", "role==web,,!"),
        ("availability-zone", "z" * 300),
    ],
)
def test_unusable_values_get_a_warning_and_are_not_used(
    sim: OpenStackSimHandle, lbs: LoadBalancers, annotation: str, value: str
) -> None:
    # These were silently used (a hostname written into the status
    # unchecked) or silently ignored.
    svc = service(ports=((80, 30080, "TCP"),), annotations={P + annotation: value})

    outcome = ensure(lbs, svc, nodes(3))

    warnings = [e for e in outcome.events if e.reason == "LoadBalancerAnnotationInvalid"]
    assert len(warnings) == 1
    assert P + annotation in warnings[0].message
    assert outcome.ingress[0].hostname == ""  # the VIP's floating IP, not the bad hostname
    assert outcome.ingress[0].ip
    assert sim.inventory()["member"] == 3  # the bad selector selected nothing away
    assert not one(sim, "loadbalancer").get("availability_zone")


def test_a_load_balancer_id_that_cannot_name_one_is_an_error_not_a_new_load_balancer(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(annotations={P + "load-balancer-id": "not-a-uuid"})
    mark = sim.mark()

    with pytest.raises(CloudError, match="is not a load balancer id") as failed:
        lbs.ensure(service=svc, nodes=nodes(2))

    assert failed.value.retryable is False
    assert writes(sim, mark) == []
    assert sim.inventory()["loadbalancer"] == 0
