"""A burst of node changes costs each load balancer one member update: the node sweep waits
until the changes have stopped for `NODE_QUIET` (never more than `NODE_BURST_MAX` after
the first), queues nothing more while it waits, and then enqueues every Service once.
A node's addresses are part of what its members depend on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec
import pytest

from pyccm.protocol.messages import Ack, Action, Topic
from pyccm.protocol.views import LoadBalancerIngress, Node, NodeAddress, NodeStatus, Service
from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import (
    LoadBalancerOutcome,
    LoadBalancerPlan,
    LoadBalancers,
    NodeSelector,
    OwnedResource,
    ProviderEvent,
)
from pyccm.workers.service.sweep import NODE_BURST_MAX, NODE_QUIET, SWEEP
from pyccm_sim.fake_provider import FakeCloud
from tests.support.services import Harness, harness, make_node, make_service

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


@dataclass
class JoinDuringEnsure:
    """The fake cloud's load balancers; during the first ensure, `during()` runs."""

    inner: LoadBalancers
    during: Callable[[], None] = lambda: None

    def get(self, *, service: Service) -> tuple[LoadBalancerIngress, ...] | None:
        return self.inner.get(service=service)

    def ensure(self, *, service: Service, nodes: Sequence[Node]) -> LoadBalancerOutcome:
        during, self.during = self.during, lambda: None
        during()
        return self.inner.ensure(service=service, nodes=nodes)

    def update(self, *, service: Service, nodes: Sequence[Node]) -> tuple[ProviderEvent, ...]:
        return self.inner.update(service=service, nodes=nodes)

    def ensure_deleted(self, *, service: Service) -> tuple[ProviderEvent, ...]:
        return self.inner.ensure_deleted(service=service)

    def node_selector(self, *, service: Service) -> NodeSelector:
        return self.inner.node_selector(service=service)

    def plan(self, *, service: Service, nodes: Sequence[Node]) -> LoadBalancerPlan:
        return self.inner.plan(service=service, nodes=nodes)

    def owned(self) -> tuple[OwnedResource, ...]:
        return self.inner.owned()

    def delete_owned(self, resource: OwnedResource) -> None:
        self.inner.delete_owned(resource)


def test_a_sync_that_finished_with_an_older_node_set_after_the_sweep_enqueues_itself() -> None:
    cloud = FakeCloud()
    lbs = JoinDuringEnsure(inner=cloud.load_balancers())  # type: ignore[arg-type]
    h = harness(nodes=1, load_balancers=lbs)
    h.put(make_service("web"))

    def a_node_joins_and_the_sweep_runs() -> None:
        h.put(make_node("n2"))
        # It passes the Service by: its first sync has not finished.
        assert h.sweep() == []
        h.enqueued.clear()

    # What the Service's sync enqueues after its last write (the writes' own echoes are
    # enqueued by the harness while they are applied).
    after_writes: list[int] = []
    commit = h.commit

    def commit_and_mark(key: str, actions: tuple[Action, ...]) -> Ack:
        ack = commit(key, actions)
        after_writes.append(len(h.enqueued))
        return ack

    h.commit = commit_and_mark  # type: ignore[method-assign]
    # The Service's first ensure started with {n1}.
    lbs.during = a_node_joins_and_the_sweep_runs
    h.controller.sync("default/web")

    assert h.enqueued[after_writes[-1] :] == ["default/web"]
    h.controller.sync("default/web")
    lb = cloud.load_balancer("default/web")
    assert lb is not None
    assert lb.members == ("n1", "n2")
