"""What triggers a reconcile, how often one may start, and what a failed listing does."""

from __future__ import annotations

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


def test_every_reconcile_counts_in_upstreams_metric(harness: Harness) -> None:
    def count() -> float:
        return REGISTRY.get_sample_value("route_controller_route_sync_total") or 0.0

    before = count()
    harness.reconcile()
    harness.cloud.fail_next("routes_list", CloudError("neutron is down", status=503))
    with pytest.raises(CloudError):
        harness.reconcile()
    with pytest.raises(RetryAfter):
        harness.controller.sync(KEY)  # put off: not a reconcile

    assert count() - before == 2


def test_other_keys_are_ignored(harness: Harness) -> None:
    harness.put(NODE)

    assert harness.controller.sync("n1") == ()
    assert harness.cloud.calls == []
