"""A burst of node changes costs each load balancer one member update: the node sweep waits
until the changes have stopped for `NODE_QUIET` (never more than `NODE_BURST_MAX` after
the first), queues nothing more while it waits, and then enqueues every Service once.
A node's addresses are part of what its members depend on."""

from __future__ import annotations

import msgspec
import pytest

from protocol.messages import Topic
from protocol.views import NodeAddress, NodeStatus
from provider.errors import RetryAfter
from tests.service_controller.conftest import Harness, harness, make_node, make_service
from workers.service.controller import NODE_BURST_MAX, NODE_QUIET, SWEEP

SERVICES = 20


def converged_cluster() -> Harness:
    h = harness(nodes=0)
    for index in range(100):
        h.put(make_node(f"n{index:03d}"))
    h.sweep()
    for index in range(SERVICES):
        h.put(make_service(f"s{index}"))
        h.controller.sync(f"default/s{index}")
    h.enqueued.clear()
    h.cloud.calls.clear()
    return h


def test_100_nodes_joining_and_100_leaving_cost_one_update_per_service() -> None:
    h = converged_cluster()

    for index in range(100):
        h.put(make_node(f"new{index:03d}"))
        h.replica.apply(Topic.NODE, f"n{index:03d}", None)  # deleted
        h.clock.advance(0.005)

    # One sweep key for the whole burst (it waits for the burst to end)...
    assert h.enqueued == [SWEEP]
    with pytest.raises(RetryAfter) as early:
        h.controller.sync(SWEEP)
    assert 0 < early.value.delay <= NODE_QUIET
    # ...then every Service once, and one member update each.
    keys = h.sweep()
    assert sorted(keys) == sorted(f"default/s{i}" for i in range(SERVICES))
    for key in keys:
        h.controller.sync(key)
    assert h.cloud_calls() == ["lb_update"] * SERVICES
    lb = h.cloud.load_balancer("default/s0")
    assert lb is not None
    assert lb.members == tuple(f"new{i:03d}" for i in range(100))


def test_steady_churn_is_swept_at_the_latest_after_the_longest_wait() -> None:
    h = converged_cluster()
    h.put(make_node("late000"))
    waited = 0.0
    while waited < NODE_BURST_MAX:
        h.clock.advance(NODE_QUIET / 2)
        waited += NODE_QUIET / 2
        h.put(make_node(f"late{int(waited * 10):03d}"))

    h.enqueued.clear()
    h.controller.sync(SWEEP)

    assert len(h.enqueued) == SERVICES


def test_a_change_after_the_sweep_began_queues_another_sweep() -> None:
    h = converged_cluster()
    h.put(make_node("a"))
    assert h.sweep()  # this sweep is done
    h.enqueued.clear()

    h.put(make_node("b"))

    assert h.enqueued == [SWEEP]


def test_new_addresses_of_a_node_update_the_members() -> None:
    h = converged_cluster()
    status = NodeStatus(addresses=(NodeAddress(type="InternalIP", address="10.9.9.9"),))
    moved = msgspec.structs.replace(make_node("n001", version="2"), status=status)

    h.put(moved)

    assert h.enqueued == [SWEEP]
    for key in h.sweep():
        h.controller.sync(key)
    assert h.cloud_calls() == ["lb_update"] * SERVICES
