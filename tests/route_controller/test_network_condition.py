"""The nodes' NetworkUnavailable condition and FailedToCreateRoute events
(pyccm/workers/route/README.md#what-it-does)."""

from __future__ import annotations

import pytest

from pyccm.protocol.messages import ObjectRef, PatchNodeStatus
from pyccm.protocol.views import NodeCondition
from pyccm.provider.errors import CloudError
from tests.support.routes import Harness, conditions_of, events_of, make_node


def test_a_routed_node_gets_network_unavailable_false_route_created(harness: Harness) -> None:
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))

    actions = harness.reconcile()

    assert actions == (
        PatchNodeStatus(
            name="n1",
            conditions=(
                NodeCondition(
                    type="NetworkUnavailable",
                    status="False",
                    reason="RouteCreated",
                    message="RouteController created a route",
                    last_heartbeat_time="2026-03-01T12:00:00Z",
                    last_transition_time="2026-03-01T12:00:00Z",
                ),
            ),
        ),
    )


def test_the_condition_is_not_rewritten_once_it_is_right(harness: Harness) -> None:
    node = make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",))
    harness.put(node)
    harness.settle(node, harness.reconcile())

    assert harness.reconcile() == ()


def test_a_cni_condition_with_another_reason_is_overwritten(harness: Harness) -> None:
    cni = NodeCondition(type="NetworkUnavailable", status="False", reason="CalicoIsUp")
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",), conditions=(cni,)))

    actions = harness.reconcile()

    assert conditions_of(actions) == {"n1": ("False", "RouteCreated")}


def test_a_failed_create_warns_on_the_node_and_marks_its_network_unavailable(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))
    harness.put(make_node("n2", cidrs=("10.244.2.0/24",), ips=("10.0.0.12",)))
    harness.cloud.fail_next("routes_create", CloudError("router is busy", status=409))

    actions = harness.reconcile()

    [event] = events_of(actions)
    failed = event.regarding.name
    assert event.regarding == ObjectRef(kind="Node", name=failed, uid=f"uid-{failed}")
    assert (event.type, event.reason, event.component) == (
        "Warning",
        "FailedToCreateRoute",
        "route_controller",
    )
    cidr = "10.244.1.0/24" if failed == "n1" else "10.244.2.0/24"
    assert event.message.startswith(f"Could not create route uid-{failed} {cidr} for node {failed}")
    assert event.message.endswith(": router is busy")
    ok = "n2" if failed == "n1" else "n1"
    assert conditions_of(actions) == {
        failed: ("True", "NoRouteCreated"),
        ok: ("False", "RouteCreated"),
    }
    assert cidr not in harness.cloud.route_table()


def test_a_failed_create_is_retried_by_the_next_reconcile(harness: Harness) -> None:
    node = make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",))
    harness.put(node)
    harness.cloud.fail_next("routes_create", CloudError("router is busy", status=409))
    node = harness.settle(node, harness.reconcile())

    actions = harness.reconcile()

    assert harness.cloud.route_table() == {"10.244.1.0/24": "10.0.0.11"}
    assert conditions_of(actions) == {"n1": ("False", "RouteCreated")}


def test_a_node_without_an_internal_ip_cannot_be_routed(harness: Harness) -> None:
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",)))

    actions = harness.reconcile()

    [event] = events_of(actions)
    assert "no address found for host n1" in event.message
    assert conditions_of(actions) == {"n1": ("True", "NoRouteCreated")}


def test_one_failed_family_of_a_dual_stack_node_marks_it_unavailable(harness: Harness) -> None:
    # No IPv6 InternalIP: the IPv4 route is created, the IPv6 one cannot be.
    harness.put(make_node("n1", cidrs=("10.244.1.0/24", "fd00:10:244:1::/64"), ips=("10.0.0.11",)))

    actions = harness.reconcile()

    assert harness.cloud.route_table() == {"10.244.1.0/24": "10.0.0.11"}
    assert conditions_of(actions) == {"n1": ("True", "NoRouteCreated")}


def test_a_node_that_lost_its_pod_cidrs_loses_its_route_and_its_network(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))
    harness.reconcile()

    harness.put(make_node("n1", ips=("10.0.0.11",), version="2"))
    actions = harness.reconcile()

    assert harness.cloud.route_table() == {}
    assert conditions_of(actions) == {"n1": ("True", "NoRouteCreated")}


def test_a_failed_delete_is_logged_and_the_reconcile_goes_on(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))
    harness.put(make_node("n2", cidrs=("10.244.2.0/24",), ips=("10.0.0.12",)))
    harness.reconcile()
    harness.remove("n2")
    harness.put(make_node("n3", cidrs=("10.244.3.0/24",), ips=("10.0.0.13",)))
    harness.cloud.fail_next("routes_delete", CloudError("neutron is down", status=503))

    actions = harness.reconcile()

    assert harness.cloud.route_table() == {
        "10.244.1.0/24": "10.0.0.11",
        "10.244.2.0/24": "10.0.0.12",
        "10.244.3.0/24": "10.0.0.13",
    }
    assert conditions_of(actions)["n3"] == ("False", "RouteCreated")
    assert "could not delete route 10.244.2.0/24 10.244.2.0/24 after 0s: neutron is down" in (
        caplog.text
    )
    harness.reconcile()
    assert "10.244.2.0/24" not in harness.cloud.route_table()
