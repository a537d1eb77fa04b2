"""The health monitors of an `externalTrafficPolicy: Cluster` Service check kube-proxy, as
KEP-3836 defines them (and cloud-provider-aws does): HTTP GET `/healthz` on port 10256 of
each node (the members' `monitor_port`), so a node whose kube-proxy is down or draining
stops getting traffic. `health-monitor-kube-proxy: "false"`, or `monitor-kube-proxy =
false` in `[LoadBalancer]` or the Service's class, keeps upstream's monitors of the port's
protocol. A load balancer that already has such monitors (upstream's) keeps them unless the
Service's annotation says `"true"`, so a takeover writes no monitor."""

from __future__ import annotations

from typing import Any

from pyccm.protocol.views import Service
from pyccm.provider.interface import LoadBalancers, ProviderEvent
from pyccm.provider.openstack.common.features import OctaviaFeatures
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import (
    MakeLbs,
    converge,
    ensure,
    nodes,
    service,
    with_annotations,
    writes,
)

ON = "[LoadBalancer]\ncreate-monitor = true"
SG = ON + "\nmanage-security-groups = true"
KUBE_PROXY = ("HTTP", "/healthz", "GET", "200")


def monitors(sim: OpenStackSimHandle) -> list[tuple[Any, ...]]:
    return sorted(
        (m["type"], m["url_path"], m["http_method"], m["expected_codes"])
        for m in sim.resources("healthmonitor")
    )


def monitor_ports(sim: OpenStackSimHandle) -> set[Any]:
    return {m["monitor_port"] for m in sim.resources("member")}


def warnings(events: tuple[ProviderEvent, ...], reason: str) -> list[ProviderEvent]:
    return [e for e in events if e.reason == reason and e.type == "Warning"]


def two_ports(annotations: dict[str, str] | None = None) -> Service:
    return service(ports=((80, 30080, "TCP"), (53, 30053, "UDP")), annotations=annotations)


def test_a_cluster_service_monitors_kube_proxy_on_every_member(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    outcome = ensure(make_lbs(ON), two_ports(), nodes(3))

    # The UDP port too: Octavia takes HTTP monitors on UDP pools from 2.16 (this is 2.27).
    assert monitors(sim) == [KUBE_PROXY] * 2
    assert monitor_ports(sim) == {10256}
    assert len(sim.resources("member")) == 2 * 3
    assert outcome.events == ()


def test_the_annotation_the_class_and_cloud_conf_turn_it_off(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    conf = ON + '\nmonitor-kube-proxy = false\n[LoadBalancerClass "kp"]\nmonitor-kube-proxy = true'
    lbs = make_lbs(conf)

    ensure(lbs, service("plain", ports=((80, 30080, "TCP"),)), nodes(1))
    ensure(lbs, service("kp", ports=((80, 30081, "TCP"),), annotations={a.CLASS: "kp"}), nodes(1))
    own = {a.CLASS: "kp", a.HEALTH_MONITOR_KUBE_PROXY: "false"}
    ensure(lbs, service("own", ports=((80, 30082, "TCP"),), annotations=own), nodes(1))

    by_lb = {
        m["name"].rsplit("_", 1)[1]: (m["type"], m["url_path"])
        for m in sim.resources("healthmonitor")
    }
    assert by_lb == {"plain": ("TCP", None), "kp": ("HTTP", "/healthz"), "own": ("TCP", None)}
    ports = {m["protocol_port"]: m["monitor_port"] for m in sim.resources("member")}
    assert ports == {30080: None, 30081: 10256, 30082: None}


def test_local_services_keep_their_health_check_node_port(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    svc = service(external_traffic_policy="Local", health_check_node_port=32000)

    ensure(make_lbs(ON), svc, nodes(2))

    assert monitor_ports(sim) == {32000}


def test_managed_security_groups_open_kube_proxys_port_to_the_member_subnet(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    svc = service(ports=((80, 30080, "TCP"),))
    svc = with_annotations(svc, ensure(make_lbs(SG), svc, nodes(2)).annotations_to_set)

    def ports_open() -> set[tuple[Any, ...]]:
        return {
            (r["protocol"], r["port_range_min"], r["remote_ip_prefix"])
            for r in sim.resources("security_group_rule")
            if r["direction"] == "ingress"
        }

    assert ports_open() == {("tcp", 10256, "10.0.0.0/16"), ("tcp", 30080, "10.0.0.0/16")}
    # Off again: the monitor checks the port, the rule goes, the members lose monitor_port.
    ensure(make_lbs(SG), with_annotations(svc, {a.HEALTH_MONITOR_KUBE_PROXY: "false"}), nodes(2))
    assert ports_open() == {("tcp", 30080, "10.0.0.0/16")}
    assert monitors(sim) == [("TCP", None, None, None)]
    assert monitor_ports(sim) == {None}


def test_a_load_balancer_with_port_monitors_keeps_them_and_a_takeover_writes_nothing(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    # Upstream's shape: TCP / UDP-CONNECT monitors, members without a monitor port (made
    # here by a pyccm with the option off).
    svc = two_ports()
    off = make_lbs(ON + "\nmonitor-kube-proxy = false")
    svc = with_annotations(svc, ensure(off, svc, nodes(2)).annotations_to_set)
    assert sorted(m["type"] for m in sim.resources("healthmonitor")) == ["TCP", "UDP-CONNECT"]

    mark = sim.mark()
    outcome = ensure(make_lbs(ON), svc, nodes(2))

    assert writes(sim, mark) == []
    assert outcome.events == ()
    # A port added later gets the kind the load balancer has.
    three = service(
        ports=((80, 30080, "TCP"), (53, 30053, "UDP"), (443, 30443, "TCP")),
        annotations=svc.metadata.annotations,
    )
    ensure(make_lbs(ON), three, nodes(2))
    assert sorted(m["type"] for m in sim.resources("healthmonitor")) == [
        "TCP",
        "TCP",
        "UDP-CONNECT",
    ]
    assert monitor_ports(sim) == {None}


def test_the_annotation_true_turns_port_monitors_into_kube_proxy_ones(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    svc = two_ports()
    off = make_lbs(ON + "\nmonitor-kube-proxy = false")
    svc = with_annotations(svc, ensure(off, svc, nodes(2)).annotations_to_set)

    asked = with_annotations(svc, {a.HEALTH_MONITOR_KUBE_PROXY: "true"})
    lbs = make_lbs(ON)
    outcome = converge(lambda: lbs.ensure(service=asked, nodes=nodes(2)), max_syncs=20).value

    assert monitors(sim) == [KUBE_PROXY] * 2
    assert monitor_ports(sim) == {10256}
    assert outcome.events == ()
    # Without the annotation again, the load balancer keeps the kind it now has.
    mark = sim.mark()
    ensure(make_lbs(ON), svc, nodes(2))
    assert writes(sim, mark) == []


def test_ovn_keeps_port_monitors_and_says_so_when_asked(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    conf = ON + '\n[LoadBalancerClass "fast"]\nlb-provider = ovn'
    ovn = {a.CLASS: "fast", a.LB_METHOD: "SOURCE_IP_PORT"}
    lbs = make_lbs(conf)

    quiet = ensure(lbs, service("quiet", ports=((80, 30080, "TCP"),), annotations=ovn), nodes(1))
    asked = ovn | {a.HEALTH_MONITOR_KUBE_PROXY: "true"}
    loud = ensure(lbs, service("loud", ports=((80, 30081, "TCP"),), annotations=asked), nodes(1))

    assert monitors(sim) == [("TCP", None, None, None)] * 2
    assert monitor_ports(sim) == {None}
    assert warnings(quiet.events, a.KUBE_PROXY_MONITOR_UNAVAILABLE) == []
    (warning,) = warnings(loud.events, a.KUBE_PROXY_MONITOR_UNAVAILABLE)
    assert warning.message == (
        f"annotation {a.HEALTH_MONITOR_KUBE_PROXY}=true ignored: a monitor of kube-proxy's "
        "port needs Octavia API 2.0 (members' monitor_port) and a provider other than ovn; "
        "this Octavia offers API 2.27, with the ovn provider; the monitors check the "
        "Service's ports"
    )


def test_a_udp_port_below_octavia_2_16_keeps_udp_connect(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    sim.set_knobs(octavia_version="2.15")

    outcome = ensure(make_lbs(ON), two_ports({a.HEALTH_MONITOR_KUBE_PROXY: "true"}), nodes(2))

    assert sorted(m["type"] for m in sim.resources("healthmonitor")) == ["TCP", "UDP-CONNECT"]
    assert monitor_ports(sim) == {None}
    (warning,) = warnings(outcome.events, a.KUBE_PROXY_MONITOR_UNAVAILABLE)
    assert "needs Octavia API 2.16 (HTTP monitors on UDP pools)" in warning.message


def test_a_bad_value_warns_and_keeps_the_default(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    svc = service(ports=((80, 30080, "TCP"),), annotations={a.HEALTH_MONITOR_KUBE_PROXY: "no"})

    outcome = ensure(make_lbs(ON), svc, nodes(2))

    assert monitors(sim) == [KUBE_PROXY]
    assert [e.reason for e in outcome.events] == [a.INVALID_ANNOTATION]
    assert a.HEALTH_MONITOR_KUBE_PROXY in outcome.events[0].message


def test_no_monitor_unless_monitors_are_asked_for(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    ensure(lbs, service(ports=((80, 30080, "TCP"),)), nodes(2))

    assert sim.inventory()["healthmonitor"] == 0
    assert monitor_ports(sim) == {None}


def test_the_gate_is_every_readable_octavia_v2_without_ovn() -> None:
    assert OctaviaFeatures(version=(2, 0)).member_monitor_port
    assert not OctaviaFeatures(version=None).member_monitor_port
    assert not OctaviaFeatures(version=(2, 30), lb_provider="ovn").member_monitor_port
