"""Upstream's service-controller metrics move as upstream's do (fake cloud, fake clock):
`cloudprovider_openstack_reconcile_*` per load-balancer operation, and
`service_controller_nodesync_latency_seconds` per node-sync pass."""

from __future__ import annotations

import msgspec
import pytest
from prometheus_client import REGISTRY

from pyccm.provider.errors import CloudError, RetryAfter
from pyccm.workers.runtime.controller import SyncFailed
from tests.support.services import Harness, make_node, make_service

KEY = "default/web"


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Reconciles:
    """The reconcile series of one operation, read before and after an action."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.before = self.read()

    def read(self) -> tuple[float, float, float, float]:
        op = {"operation": self.operation}
        return (
            value("cloudprovider_openstack_reconcile_total", **op),
            value("cloudprovider_openstack_reconcile_errors_total", **op),
            value("cloudprovider_openstack_reconcile_duration_seconds_count", **op),
            value("cloudprovider_openstack_reconcile_duration_seconds_sum", **op),
        )

    def moved(self) -> tuple[float, float, float, float]:
        """(total, errors, duration samples, duration seconds) added since construction."""
        now = self.read()
        return tuple(round(n - b, 6) for n, b in zip(now, self.before, strict=True))  # type: ignore[return-value]


class Latency:
    def __init__(self) -> None:
        self.before = self.read()

    @staticmethod
    def read() -> tuple[float, float]:
        name = "service_controller_nodesync_latency_seconds"
        return value(f"{name}_count"), value(f"{name}_sum")

    def moved(self) -> tuple[float, float]:
        count, total = self.read()
        return count - self.before[0], round(total - self.before[1], 6)


def test_an_ensure_counts_one_reconcile(h: Harness) -> None:
    ensure = Reconciles("loadbalancer_ensure")
    h.put(make_service())
    h.controller.sync(KEY)
    assert h.cloud.load_balancer(KEY) is not None
    assert ensure.moved() == (1, 0, 1, 0)  # the fake clock did not move


def test_an_ensure_cut_short_by_a_pending_load_balancer_is_one_reconcile_from_its_first_call(
    h: Harness,
) -> None:
    h.cloud.set_lb_provisioning(syncs=2)
    ensure = Reconciles("loadbalancer_ensure")
    h.put(make_service())
    for _ in range(2):
        with pytest.raises(RetryAfter):
            h.controller.sync(KEY)
        h.clock.advance(3.0)
    assert ensure.moved() == (0, 0, 0, 0)
    h.controller.sync(KEY)
    assert ensure.moved() == (1, 0, 1, 6.0)


def test_a_cloud_error_counts_a_failed_reconcile(h: Harness) -> None:
    h.cloud.fail_next("lb_ensure", CloudError("Octavia answered 500"))
    ensure = Reconciles("loadbalancer_ensure")
    h.put(make_service())
    with pytest.raises(SyncFailed):
        h.controller.sync(KEY)
    assert ensure.moved() == (1, 1, 1, 0)


def ensured(h: Harness) -> None:
    h.put(make_service())
    h.controller.sync(KEY)
    h.enqueued.clear()


def test_a_node_change_counts_an_update_and_one_node_sync_pass_until_the_update_ends(
    h: Harness,
) -> None:
    ensured(h)
    update = Reconciles("loadbalancer_update")
    latency = Latency()
    h.put(make_node("n3"))
    assert h.sweep() == [KEY]
    assert latency.moved() == (0, 0)  # the pass waits for the Service's update
    h.clock.advance(2.5)
    h.controller.sync(KEY)
    assert h.cloud.load_balancer(KEY).members == ("n1", "n2", "n3")  # type: ignore[union-attr]
    assert update.moved() == (1, 0, 1, 0)  # the update itself took no (fake) time
    assert latency.moved() == (1, 2.5)


def test_a_failed_update_ends_the_pass_and_counts_an_error(h: Harness) -> None:
    ensured(h)
    update = Reconciles("loadbalancer_update")
    latency = Latency()
    h.cloud.fail_next("lb_update", CloudError("Octavia answered 500"))
    h.put(make_node("n3"))
    assert h.sweep() == [KEY]
    with pytest.raises(SyncFailed):
        h.controller.sync(KEY)
    assert update.moved() == (1, 1, 1, 0)
    assert latency.moved() == (1, 0)


def test_a_sweep_that_finds_no_service_behind_is_a_pass_of_its_own(h: Harness) -> None:
    latency = Latency()
    h.put(make_node("n3"))
    assert h.sweep() == []  # no load balancer yet
    assert latency.moved() == (1, 0)


def test_a_delete_counts_one_reconcile(h: Harness) -> None:
    ensured(h)
    delete = Reconciles("loadbalancer_delete")
    service = h.replica.service(KEY)
    assert service is not None
    meta = msgspec.structs.replace(service.metadata, deletion_timestamp="2026-11-21T00:00:00Z")
    h.put(msgspec.structs.replace(service, metadata=meta))
    h.controller.sync(KEY)
    assert h.cloud.load_balancer(KEY) is None
    assert delete.moved() == (1, 0, 1, 0)
