"""The router claim on the fake cloud: a route left alone for another cluster's claim warns
on the Node whose podCIDR it is (throttled like the route-limit warnings), and a claim the
cloud refuses is retried with backoff while routing goes on."""

from __future__ import annotations

from prometheus_client import REGISTRY

from pyccm.workers.route.controller import RouteSettings
from pyccm_sim.fake_provider import FakeCloud
from tests.support.routes import CLUSTER_CIDRS, build, events_of, make_node

OURS = "11111111-1111-1111-1111-111111111111"
THEIRS = "22222222-2222-2222-2222-222222222222"


def test_a_moved_nodes_old_route_under_another_claim_stays_with_a_warning_on_the_node() -> None:
    harness = build(FakeCloud(cluster_id=OURS))
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))
    harness.reconcile()
    harness.cloud.tag_router(f"pyccm-routes:{THEIRS}=10.244.0.0_17")
    # The node's address changes: its old route must be replaced, but THEIRS covers it.
    # (The new route's create fails, so the fake's one-route-per-CIDR table keeps the old.)
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.99",), version="2"))
    harness.cloud.fail_next("routes_create", RuntimeError("refused"), times=2)

    first = events_of(harness.reconcile())
    assert REGISTRY.get_sample_value("pyccm_routes_claimed_by_other_clusters") == 1.0
    again = events_of(harness.reconcile())

    claimed = [e for e in first if e.reason == "RouteClaimedByAnotherCluster"]
    assert [(e.regarding.name, e.type) for e in claimed] == [("n1", "Warning")]
    assert THEIRS in claimed[0].message
    # Throttled: one warning per limit_warning_interval, though the route is still there.
    assert [e for e in again if e.reason == "RouteClaimedByAnotherCluster"] == []
    assert harness.cloud.route_table() == {"10.244.1.0/24": "10.0.0.11"}
    assert harness.cloud.calls_of("routes_delete") == []


def test_the_router_is_claimed_once_with_one_tag_per_cluster_cidr() -> None:
    harness = build(FakeCloud(cluster_id=OURS))
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))

    harness.reconcile()
    harness.reconcile()

    assert harness.cloud.router_tags() == [
        f"pyccm-routes:{OURS}=10.244.0.0_16",
        f"pyccm-routes:{OURS}=fd00:10:244::_56",
    ]
    assert len(harness.cloud.calls_of("routes_claim")) == 1


def test_a_refused_claim_is_retried_with_backoff_and_routing_goes_on() -> None:
    cloud = FakeCloud(cluster_id=OURS)
    harness = build(cloud, RouteSettings(cluster_cidrs=CLUSTER_CIDRS))
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))
    cloud.fail_next("routes_claim", RuntimeError("policy forbids tags"), times=2)
    failures = REGISTRY.get_sample_value("pyccm_router_claim_failures_total") or 0.0

    harness.reconcile()  # t=1: fails, next try after 1 s
    assert cloud.route_table() == {"10.244.1.0/24": "10.0.0.11"}
    harness.reconcile()  # t=2: fails again, next after 2 s
    harness.reconcile()  # t=3: backing off, no call
    assert len(cloud.calls_of("routes_claim")) == 2
    assert cloud.router_tags() == []
    harness.reconcile()  # t=4: succeeds

    assert len(cloud.calls_of("routes_claim")) == 3
    assert len(cloud.router_tags()) == 2
    assert REGISTRY.get_sample_value("pyccm_router_claim_failures_total") == failures + 2
