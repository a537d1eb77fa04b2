"""At the router's route limit (Neutron's router_route quota, formerly max_routes): the routes
that fit stay, each node left without its route gets a Warning naming the limit (not again
every reconcile), a metric says so, and the controller backs off instead of asking again at
every node change."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from pyccm.protocol.messages import Action
from pyccm.workers.route.controller import RouteSettings
from pyccm.workers.runtime.controller import SyncFailed
from pyccm_sim.fake_provider import FakeCloud
from tests.support.routes import CLUSTER_CIDRS, Harness, build, conditions_of, events_of, make_node

FIVE = range(1, 6)


def join(harness: Harness, indexes: range) -> None:
    for index in indexes:
        harness.put(
            make_node(f"n{index}", cidrs=(f"10.244.{index}.0/24",), ips=(f"10.0.0.{index}",))
        )


def refused(harness: Harness) -> tuple[Action, ...]:
    """A reconcile that must fail for the limit; its actions, settled into the replica."""
    with pytest.raises(SyncFailed) as failed:
        harness.reconcile()
    for node in harness.replica.nodes():
        harness.settle(node, failed.value.actions)
    return failed.value.actions


def gauge(name: str) -> float | None:
    return REGISTRY.get_sample_value(name)


@pytest.fixture
def full() -> Harness:
    """Five nodes and a router that holds three routes."""
    harness = build(FakeCloud())
    harness.cloud.set_route_limit(3)
    join(harness, FIVE)
    return harness


def test_the_routes_that_fit_stay_and_each_refused_node_is_warned_with_the_limit(
    full: Harness,
) -> None:
    actions = refused(full)

    assert len(full.cloud.route_table()) == 3
    warned = {event.regarding.name: event for event in events_of(actions)}
    assert set(warned) == {"n4", "n5"}
    assert warned["n4"].reason == "FailedToCreateRoute"
    assert warned["n4"].message.startswith(
        "Could not create route uid-n4 10.244.4.0/24 for node n4"
    )
    assert warned["n4"].message.endswith("The number of routes exceeds the maximum 3.")
    assert conditions_of(actions) == {
        "n1": ("False", "RouteCreated"),
        "n2": ("False", "RouteCreated"),
        "n3": ("False", "RouteCreated"),
        "n4": ("True", "NoRouteCreated"),
        "n5": ("True", "NoRouteCreated"),
    }
    assert gauge("pyccm_route_limit_reached") == 1
    assert gauge("pyccm_routes_over_limit") == 2


def test_node_changes_do_not_ask_the_full_router_again_before_the_retry_interval(
    full: Harness,
) -> None:
    refused(full)
    join(full, range(6, 8))  # two more nodes join a second later

    actions = refused(full)

    # No call: the creates waited. The new nodes are warned once, the old ones not again.
    assert full.cloud.calls_of("routes_create_many") == ["5 routes"]
    assert {e.regarding.name for e in events_of(actions)} == {"n6", "n7"}
    assert "holds its maximum of 3 routes" in events_of(actions)[0].message
    assert gauge("pyccm_routes_over_limit") == 4


def test_after_the_retry_interval_the_router_is_asked_again(full: Harness) -> None:
    refused(full)
    full.clock.advance(10.0)

    actions = refused(full)

    assert full.cloud.calls_of("routes_create_many") == ["5 routes", "2 routes"]
    assert events_of(actions) == []  # warned 11 s ago: not again yet


def test_a_delete_makes_room_at_once(full: Harness) -> None:
    refused(full)
    full.remove("n1")

    actions = refused(full)  # one of n4, n5 fits in n1's place

    assert full.cloud.calls_of("routes_delete_many") == ["1 routes"]
    assert full.cloud.calls_of("routes_create_many") == ["5 routes", "2 routes"]
    assert len(full.cloud.route_table()) == 3
    assert list(conditions_of(actions).values()).count(("False", "RouteCreated")) == 1


def test_once_the_limit_is_raised_every_node_is_routed_and_the_metric_clears(
    full: Harness,
) -> None:
    refused(full)
    full.cloud.set_route_limit(None)
    full.clock.advance(10.0)

    actions = full.reconcile()

    assert len(full.cloud.route_table()) == 5
    assert conditions_of(actions) == {
        "n4": ("False", "RouteCreated"),
        "n5": ("False", "RouteCreated"),
    }
    assert gauge("pyccm_route_limit_reached") == 0
    assert gauge("pyccm_routes_over_limit") == 0


def test_a_refused_node_is_warned_again_after_the_warning_interval() -> None:
    settings = RouteSettings(cluster_cidrs=CLUSTER_CIDRS, limit_warning_interval=60.0)
    harness = build(FakeCloud(), settings)
    harness.cloud.set_route_limit(3)
    join(harness, FIVE)
    refused(harness)
    harness.clock.advance(60.0)

    actions = refused(harness)

    assert {e.regarding.name for e in events_of(actions)} == {"n4", "n5"}
