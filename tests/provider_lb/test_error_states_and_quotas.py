"""A load balancer that lands in ERROR is deleted and recreated by the following syncs;
Octavia's quota refusal is a non-retryable error that creates nothing."""

from __future__ import annotations

import pytest

from pyccm.provider.errors import CloudError, RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import converge, nodes, one, service, with_annotations

LB_ID = "loadbalancer.openstack.org/load-balancer-id"


def test_a_load_balancer_in_error_is_replaced_by_a_working_one(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    sim.set_knobs(force_error_next_lbs=1)

    result = converge(lambda: lbs.ensure(service=service(), nodes=nodes(2)))

    assert sim.counters()["loadbalancer"] == {"created": 2, "updated": 0, "deleted": 1}
    lb = one(sim, "loadbalancer")
    assert lb["provisioning_status"] == "ACTIVE"
    assert one(sim, "floatingip")["port_id"] == lb["vip_port_id"]
    assert result.value.annotations_to_set[LB_ID] == lb["id"]
    # create -> (ERROR) delete -> create: three syncs told to come back.
    assert len(result.delays) == 3


def test_an_annotated_load_balancer_in_error_is_replaced_despite_its_id_annotation(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    # The id annotation names the load balancer this provider deletes: its absence then
    # allows the create that a missing id otherwise never does.
    sim.set_knobs(force_error_next_lbs=1)
    svc = service()
    with pytest.raises(RetryAfter):
        lbs.ensure(service=svc, nodes=nodes(2))
    broken = one(sim, "loadbalancer")["id"]
    svc = with_annotations(svc, {LB_ID: broken})

    result = converge(lambda: lbs.ensure(service=svc, nodes=nodes(2)))

    assert sim.counters()["loadbalancer"] == {"created": 2, "updated": 0, "deleted": 1}
    lb = one(sim, "loadbalancer")
    assert lb["id"] != broken
    assert lb["provisioning_status"] == "ACTIVE"
    assert result.value.annotations_to_set[LB_ID] == lb["id"]


def test_octavias_quota_refusal_is_not_retried_and_creates_nothing(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    sim.set_knobs(lb_quota=0)
    before = sim.inventory()

    with pytest.raises(CloudError) as caught:
        lbs.ensure(service=service(), nodes=nodes(1))

    assert caught.value.status == 403
    assert caught.value.retryable is False
    assert sim.inventory() == before
