"""A load balancer that lands in ERROR is deleted and recreated by the following syncs;
Octavia's quota refusal is a non-retryable error that creates nothing."""

from __future__ import annotations

import pytest

from provider.errors import CloudError
from provider.interface import LoadBalancers
from sim.openstack.testing import OpenStackSimHandle
from tests.provider_lb.conftest import converge, nodes, one, service


def test_a_load_balancer_in_error_is_replaced_by_a_working_one(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    sim.set_knobs(force_error_next_lbs=1)

    result = converge(lambda: lbs.ensure(service=service(), nodes=nodes(2)))

    assert sim.counters()["loadbalancer"] == {"created": 2, "updated": 0, "deleted": 1}
    lb = one(sim, "loadbalancer")
    assert lb["provisioning_status"] == "ACTIVE"
    assert one(sim, "floatingip")["port_id"] == lb["vip_port_id"]
    assert (
        result.value.annotations_to_set["loadbalancer.openstack.org/load-balancer-id"] == lb["id"]
    )
    # create -> (ERROR) delete -> create: three syncs told to come back.
    assert len(result.delays) == 3


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
