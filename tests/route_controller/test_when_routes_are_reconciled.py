"""What triggers a reconcile, how often one may start, and what a failed listing does."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from prometheus_client import REGISTRY

from pyccm.protocol.messages import Topic
from pyccm.protocol.views import Node, NodeAddress, NodeCondition, NodeStatus
from pyccm.provider.errors import CloudError, RetryAfter
from pyccm.workers.route.controller import KEY
from tests.support.routes import Harness, make_node

NODE = make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",))


def heartbeat(node: Node, version: str) -> Node:
    """The kubelet's status update every few seconds: new resourceVersion, new condition times."""
    ready = NodeCondition(type="Ready", status="True", last_heartbeat_time=f"t{version}")
    status = NodeStatus(addresses=node.status.addresses, conditions=(ready,))
    meta = msgspec.structs.replace(node.metadata, resource_version=version)
    return Node(metadata=meta, spec=node.spec, status=status)


def keys(harness: Harness, old: Node | None, new: Node | None) -> list[str]:
    return list(harness.controller.keys_for(Topic.NODE, "n1", old, new))


def test_a_node_added_or_deleted_enqueues_the_one_key(harness: Harness) -> None:
    assert keys(harness, None, NODE) == [KEY]
    assert keys(harness, NODE, None) == [KEY]


def test_a_heartbeat_only_update_enqueues_nothing(harness: Harness) -> None:
    assert keys(harness, NODE, heartbeat(NODE, "2")) == []


def test_a_pod_cidr_or_address_change_enqueues_the_key(harness: Harness) -> None:
    new_cidr = make_node("n1", cidrs=("10.244.9.0/24",), ips=("10.0.0.11",), version="2")
    new_ip = make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.99",), version="2")
    more_ips = Node(
        metadata=NODE.metadata,
        spec=NODE.spec,
        status=NodeStatus(
            addresses=(*NODE.status.addresses, NodeAddress(type="ExternalIP", address="1.2.3.4"))
        ),
    )

    assert keys(harness, NODE, new_cidr) == [KEY]
    assert keys(harness, NODE, new_ip) == [KEY]
    assert keys(harness, NODE, more_ips) == [KEY]


def test_services_never_enqueue(harness: Harness) -> None:
    assert list(harness.controller.keys_for(Topic.SERVICE, "default/web", None, None)) == []


def test_the_periodic_reconcile_enqueues_the_key_every_period(harness: Harness) -> None:
    queued: list[str] = []
    [periodic] = harness.controller.periodics(queued.append)

    periodic.run()

    assert periodic.period == 10.0
    assert queued == [KEY]


def test_a_second_reconcile_within_a_second_is_put_off_for_the_rest_of_it(
    harness: Harness,
) -> None:
    harness.put(NODE)
    harness.controller.sync(KEY)
    harness.clock.advance(0.25)

    with pytest.raises(RetryAfter) as caught:
        harness.controller.sync(KEY)

    assert caught.value.delay == pytest.approx(0.75)
    assert harness.cloud.calls_of("routes_list") == [""]
    harness.clock.advance(0.75)
    harness.controller.sync(KEY)
    assert harness.cloud.calls_of("routes_list") == ["", ""]


def test_a_failed_listing_fails_the_sync_and_touches_nothing(harness: Harness) -> None:
    harness.put(NODE)
    harness.cloud.fail_next("routes_list", CloudError("neutron is down", status=503))

    with pytest.raises(CloudError):
        harness.reconcile()

    assert harness.cloud.route_table() == {}
    assert harness.cloud.calls_of("routes_create") == []


def syncs(trigger: str, outcome: str) -> float:
    labels = {"trigger": trigger, "outcome": outcome}
    return REGISTRY.get_sample_value("route_controller_route_sync_total", labels) or 0.0


def counted(harness: Harness, run: Callable[[], object]) -> dict[tuple[str, str], float]:
    """The reconciles `run` counted, by (trigger, outcome)."""
    labels = [(t, o) for t in ("node_change", "periodic") for o in ("changed", "noop", "error")]
    before = {label: syncs(*label) for label in labels}
    run()
    after = {label: syncs(*label) - before[label] for label in labels}
    return {label: count for label, count in after.items() if count}


def test_a_reconcile_a_node_change_asked_for_that_creates_a_route_counts_as_changed(
    harness: Harness,
) -> None:
    harness.put(NODE)
    keys(harness, None, NODE)
    assert counted(harness, harness.reconcile) == {("node_change", "changed"): 1}
    # Nothing left to do, and no node changed since.
    assert counted(harness, harness.reconcile) == {("periodic", "noop"): 1}


def test_a_periodic_reconcile_that_repairs_drift_counts_as_changed(harness: Harness) -> None:
    harness.put(NODE)
    harness.reconcile()
    routes = harness.cloud.routes()
    assert routes is not None
    for route in routes.list(nodes=[NODE]):
        routes.delete(route=route)
    assert counted(harness, harness.reconcile) == {("periodic", "changed"): 1}


def test_a_failed_reconcile_counts_as_an_error_and_its_retry_keeps_the_trigger(
    harness: Harness,
) -> None:
    harness.put(NODE)
    keys(harness, None, NODE)
    harness.cloud.fail_next("routes_list", CloudError("neutron is down", status=503))

    def fails() -> None:
        with pytest.raises(CloudError):
            harness.reconcile()

    assert counted(harness, fails) == {("node_change", "error"): 1}
    assert counted(harness, harness.reconcile) == {("node_change", "changed"): 1}


def test_a_put_off_sync_is_not_a_reconcile_and_keeps_the_trigger(harness: Harness) -> None:
    harness.put(NODE)
    harness.reconcile()
    moved = make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.99",), version="2")
    harness.put(moved)
    keys(harness, NODE, moved)

    def put_off() -> None:
        with pytest.raises(RetryAfter):
            harness.controller.sync(KEY)

    assert counted(harness, put_off) == {}
    assert counted(harness, harness.reconcile) == {("node_change", "changed"): 1}


def test_a_heartbeat_does_not_make_the_next_reconcile_a_node_change(harness: Harness) -> None:
    harness.put(NODE)
    harness.reconcile()
    keys(harness, NODE, heartbeat(NODE, "2"))
    assert counted(harness, harness.reconcile) == {("periodic", "noop"): 1}


def test_other_keys_are_ignored(harness: Harness) -> None:
    harness.put(NODE)

    assert harness.controller.sync("n1") == ()
    assert harness.cloud.calls == []
