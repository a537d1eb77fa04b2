"""A load balancer whose children were verified stays verified only while its
`updated_at` does not move: a no-op re-ensure then reads the load balancer and its floating
IP only, and anything changed behind pyccm's back (which moves `updated_at`) is read and
repaired. Also: after deleting a Service's load balancer, `get` does not search by name."""

from __future__ import annotations

import time

from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack.loadbalancer.resources import LoadBalancer
from pyccm.provider.openstack.loadbalancer.verified import SETTLED, Verified
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import (
    cloud_calls,
    delete,
    ensure,
    nodes,
    one,
    reads,
    service,
    with_annotations,
)

ONE_PORT = ((80, 30080, "TCP"),)


def verified(sim: OpenStackSimHandle, lbs: LoadBalancers) -> object:
    """A converged Service whose load balancer has been verified (a second after it last
    changed, then one full re-ensure)."""
    svc = service(ports=ONE_PORT)
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    ensure(lbs, svc, nodes(2))
    time.sleep(SETTLED)
    ensure(lbs, svc, nodes(2))
    return svc


def test_a_no_op_re_ensure_of_a_verified_load_balancer_reads_it_and_its_floating_ip(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = verified(sim, lbs)

    mark = sim.mark()
    ensure(lbs, svc, nodes(2))  # type: ignore[arg-type]

    assert reads(sim, mark) == ["lbaas/loadbalancers/{id}", "floatingips"]
    assert sim.writes(since=mark) == []


def test_a_pool_changed_behind_our_back_after_verification_is_read_and_put_back(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = verified(sim, lbs)
    conn = sim.connection()
    conn.load_balancer.update_pool(one(sim, "pool")["id"], lb_algorithm="SOURCE_IP")
    conn.close()
    sim.settle()

    ensure(lbs, svc, nodes(2))  # type: ignore[arg-type]

    assert one(sim, "pool")["lb_algorithm"] == "ROUND_ROBIN"


def test_a_member_removed_behind_our_back_after_verification_is_put_back(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = verified(sim, lbs)
    conn = sim.connection()
    victim = sim.resources("member")[0]
    conn.load_balancer.delete_member(victim["id"], one(sim, "pool")["id"])
    conn.close()
    sim.settle()

    ensure(lbs, svc, nodes(2))  # type: ignore[arg-type]

    assert len(sim.resources("member")) == 2


def test_other_node_sets_are_not_taken_for_verified(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = verified(sim, lbs)

    ensure(lbs, svc, nodes(3))  # type: ignore[arg-type]

    assert len(sim.resources("member")) == 3


def test_get_after_deleting_the_load_balancer_does_not_search_by_name(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=ONE_PORT)
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    delete(lbs, svc)

    mark = sim.mark()
    assert lbs.get(service=svc) is None

    calls = cloud_calls(sim, mark)
    assert [(c.method, c.status) for c in calls] == [("GET", 404)]


# --- the one-second rule, on a clock of our own ---------------------------------------------


def test_a_verification_counts_only_a_second_after_the_load_balancer_last_changed() -> None:
    now = [100.0]
    book = Verified(clock=lambda: now[0])
    lb = LoadBalancer(id="lb", provisioning_status="ACTIVE", updated_at="2026-01-01T00:00:07Z")
    key = ("lb", "kube_service_x")
    book.observe(lb)

    # Verified within the second it changed: a change in that same second would leave
    # updated_at as it is, so this verification cannot be trusted later.
    book.record(key, lb, "specs", started=100.5)
    assert not book.unchanged(key, lb, "specs")

    now[0] = 101.5
    book.observe(lb)  # same updated_at: still seen since 100.0
    book.record(key, lb, "specs", started=101.5)
    assert book.unchanged(key, lb, "specs")
    assert not book.unchanged(key, lb, "other specs")
    moved = LoadBalancer(id="lb", provisioning_status="ACTIVE", updated_at="2026-01-01T00:00:09Z")
    assert not book.unchanged(key, moved, "specs")
