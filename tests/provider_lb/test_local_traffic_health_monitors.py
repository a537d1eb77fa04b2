"""An `externalTrafficPolicy: Local` Service gets an HTTP health monitor on its
`healthCheckNodePort` without asking (kubernetes/cloud-provider-openstack#2866: upstream's monitors
are opt-in, so its load balancer keeps sending traffic to nodes without a local endpoint). Only the
Service's own annotation `enable-health-monitor: "false"` turns it off, and then a Warning says what
that costs; `[LoadBalancer] create-monitor` (false by default) is not such a choice."""

from __future__ import annotations

from typing import Any

from pyccm.protocol.views import Service
from pyccm.provider.interface import LoadBalancers, ProviderEvent
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, ensure, nodes, service, with_annotations, with_spec

HEALTH_CHECK_PORT = 32000


def local_service(annotations: dict[str, str] | None = None) -> Service:
    return service(
        annotations=annotations,
        external_traffic_policy="Local",
        health_check_node_port=HEALTH_CHECK_PORT,
    )


def monitors(sim: OpenStackSimHandle) -> list[tuple[str, Any, Any, Any]]:
    return sorted(
        (m["type"], m["url_path"], m["http_method"], m["expected_codes"])
        for m in sim.resources("healthmonitor")
    )


def warnings(events: tuple[ProviderEvent, ...], reason: str) -> list[ProviderEvent]:
    return [e for e in events if e.reason == reason and e.type == "Warning"]


def test_a_local_service_gets_http_monitors_on_its_health_check_port_unasked(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    outcome = ensure(lbs, local_service(), nodes(2))

    assert monitors(sim) == [("HTTP", "/healthz", "GET", "200")] * 2
    assert {m["monitor_port"] for m in sim.resources("member")} == {HEALTH_CHECK_PORT}
    assert len(sim.resources("member")) == 2 * 2
    assert warnings(outcome.events, a.NO_HEALTH_MONITOR) == []


def test_a_local_service_that_turns_its_monitor_off_gets_none_and_one_warning(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = local_service({a.ENABLE_HEALTH_MONITOR: "false"})

    outcome = ensure(lbs, svc, nodes(2))

    assert sim.inventory()["healthmonitor"] == 0
    assert {m["monitor_port"] for m in sim.resources("member")} == {None}
    # Two ports, two pools: still one Warning.
    (warning,) = warnings(outcome.events, a.NO_HEALTH_MONITOR)
    assert "traffic will reach nodes without local endpoints" in warning.message
    assert a.ENABLE_HEALTH_MONITOR in warning.message


def test_the_annotation_turns_an_existing_monitor_off_and_on_again(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = local_service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    assert sim.inventory()["healthmonitor"] == 2

    off = ensure(lbs, with_annotations(svc, {a.ENABLE_HEALTH_MONITOR: "false"}), nodes(2))
    assert sim.inventory()["healthmonitor"] == 0
    assert len(warnings(off.events, a.NO_HEALTH_MONITOR)) == 1

    on = ensure(lbs, with_annotations(svc, {a.ENABLE_HEALTH_MONITOR: "true"}), nodes(2))
    assert monitors(sim) == [("HTTP", "/healthz", "GET", "200")] * 2
    assert warnings(on.events, a.NO_HEALTH_MONITOR) == []


def test_create_monitor_false_in_cloud_conf_does_not_turn_a_local_monitor_off(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs("[LoadBalancer]\ncreate-monitor = false")

    outcome = ensure(lbs, local_service(), nodes(2))

    assert monitors(sim) == [("HTTP", "/healthz", "GET", "200")] * 2
    assert warnings(outcome.events, a.NO_HEALTH_MONITOR) == []


def test_an_invalid_annotation_keeps_the_local_monitor(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    outcome = ensure(lbs, local_service({a.ENABLE_HEALTH_MONITOR: "no"}), nodes(2))

    assert monitors(sim) == [("HTTP", "/healthz", "GET", "200")] * 2
    assert [e.reason for e in outcome.events] == [a.INVALID_ANNOTATION]


def test_a_cluster_policy_service_still_gets_no_monitor_unless_asked(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    assert sim.inventory()["healthmonitor"] == 0

    # Local, then back to Cluster (the API drops the health-check port with it).
    local = with_spec(
        svc, external_traffic_policy="Local", health_check_node_port=HEALTH_CHECK_PORT
    )
    ensure(lbs, local, nodes(2))
    assert sim.inventory()["healthmonitor"] == 2
    outcome = ensure(lbs, svc, nodes(2))

    assert sim.inventory()["healthmonitor"] == 0
    assert {m["monitor_port"] for m in sim.resources("member")} == {None}
    assert outcome.events == ()
