"""A load balancer that is PENDING_* never holds a sync: `RetryAfter` with a short delay
that grows while it stays pending, Octavia's 409 "immutable" included, and the next sync
carries on from the cloud's state."""

from __future__ import annotations

import pytest

from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack.loadbalancer.api import LOADBALANCERS, Api
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import ensure, nodes, one, service, vip_subnet, with_annotations, writes


def test_a_pending_load_balancer_is_retried_after_a_growing_delay_without_writes(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    lb_id = one(sim, "loadbalancer")["id"]
    sim.stick_load_balancer(lb_id)

    mark = sim.mark()
    delays = []
    for _ in range(3):
        with pytest.raises(RetryAfter) as caught:
            lbs.ensure(service=svc, nodes=nodes(3))
        delays.append(caught.value.delay)

    assert writes(sim, mark) == []
    assert delays[0] < delays[1] < delays[2] <= 30
    sim.release_load_balancer(lb_id)
    ensure(lbs, svc, nodes(3))
    assert len(sim.resources("member")) == 6


def test_a_sync_makes_one_octavia_write_and_the_next_one_finishes_the_work(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((80, 30080, "TCP"),))
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    # A new port needs two writes (listener, then its pool): the first leaves the load
    # balancer PENDING_UPDATE, so the second is not sent (it would only get a 409).
    sim.set_knobs(provisioning_delay_s=0.5)
    grown = service(ports=((80, 30080, "TCP"), (8080, 30081, "TCP")))
    grown = with_annotations(grown, svc.metadata.annotations)

    mark = sim.mark()
    with pytest.raises(RetryAfter):
        lbs.ensure(service=grown, nodes=nodes(2))

    statuses = [(c.method, c.status) for c in sim.writes(since=mark)]
    assert statuses == [("POST", 201)]
    sim.settle()
    sim.set_knobs(provisioning_delay_s=0.0)
    ensure(lbs, grown, nodes(2))
    assert len(sim.resources("listener")) == 2
    assert len(sim.resources("pool")) == 2


def test_octavias_409_while_busy_is_retry_after(sim: OpenStackSimHandle, api: Api) -> None:
    created = api.create(LOADBALANCERS, {"name": "busy", "vip_subnet_id": vip_subnet(sim)})
    sim.settle()
    sim.stick_load_balancer(created.id)

    mark = sim.mark()
    with pytest.raises(RetryAfter):
        api.update(LOADBALANCERS, created.id, {"tags": ["x"]}, lb_id=created.id)

    assert [(c.method, c.status) for c in sim.writes(since=mark)] == [("PUT", 409)]


def test_backend_updates_of_a_busy_load_balancer_are_retried(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    sim.stick_load_balancer(one(sim, "loadbalancer")["id"])

    mark = sim.mark()
    with pytest.raises(RetryAfter):
        lbs.update(service=svc, nodes=nodes(5))

    assert writes(sim, mark) == []


def test_a_service_is_not_given_a_second_load_balancer_while_the_first_is_deleting(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    ensure(lbs, svc, nodes(1))
    lb_id = one(sim, "loadbalancer")["id"]
    sim.set_knobs(provisioning_delay_s=5.0)
    with pytest.raises(RetryAfter):
        lbs.ensure_deleted(service=svc)

    mark = sim.mark()
    with pytest.raises(RetryAfter):
        lbs.ensure(service=svc, nodes=nodes(1))
    with pytest.raises(RetryAfter):
        lbs.ensure_deleted(service=svc)

    assert writes(sim, mark) == []
    assert [lb["id"] for lb in sim.resources("loadbalancer")] == [lb_id]
