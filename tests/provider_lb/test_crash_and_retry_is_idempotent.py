"""Every mutating call can fail or be cut short, and a retry (by the same provider or by a
freshly started one that remembers nothing) still ends with exactly one load balancer and
at most one floating IP per Service."""

from __future__ import annotations

import pytest

from pyccm.provider.errors import CloudError, ProviderError
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import (
    MakeLbs,
    converge,
    delete,
    ensure,
    nodes,
    one,
    service,
    with_annotations,
    writes,
)


@pytest.mark.parametrize(
    ("failing_service", "method"),
    [
        ("load-balancer", "POST"),  # the load balancer's create
        ("network", "POST"),  # the floating IP's create
    ],
)
@pytest.mark.parametrize("status", [500, 409])
def test_a_failed_write_is_repeated_by_the_next_sync_without_duplicates(
    sim: OpenStackSimHandle, lbs: LoadBalancers, failing_service: str, method: str, status: int
) -> None:
    sim.fail_next(failing_service, status, methods=(method,))

    with pytest.raises(CloudError):
        converge(lambda: lbs.ensure(service=service(), nodes=nodes(2)))
    ensure(lbs, service(), nodes(2))

    assert sim.inventory()["loadbalancer"] == 1
    assert sim.inventory()["floatingip"] == 1


def test_a_provider_restarted_after_the_create_finds_the_load_balancer_by_name(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    first = make_lbs()
    with pytest.raises(ProviderError):
        first.ensure(service=service(), nodes=nodes(2))  # created, then "crashed"

    ensure(make_lbs(), service(), nodes(2))
    ensure(make_lbs(), service(), nodes(2))

    assert sim.inventory()["loadbalancer"] == 1
    assert sim.inventory()["floatingip"] == 1
    assert sim.counters()["loadbalancer"]["created"] == 1


def test_a_floating_ip_that_lost_its_port_is_adopted_not_duplicated(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    first = ensure(lbs, svc, nodes(2))
    fip = one(sim, "floatingip")
    # The VIP port is gone (the load balancer was recreated): the address is detached.
    conn = sim.connection()
    conn.network.update_ip(fip["id"], port_id=None)

    again = ensure(lbs, svc, nodes(2))

    assert one(sim, "floatingip")["port_id"] == one(sim, "loadbalancer")["vip_port_id"]
    assert again.ingress == first.ingress
    conn.close()


def test_random_failures_on_every_call_still_converge_to_one_of_each(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    sim.set_knobs(error_rates={"load-balancer": {500: 0.3}, "network": {500: 0.3}}, retry_after_s=0)
    svc = service()
    outcome = None
    for _ in range(200):
        try:
            # A new provider each time: nothing survives a crash but the cloud itself.
            outcome = converge(lambda: make_lbs().ensure(service=svc, nodes=nodes(3))).value
            break
        except CloudError:
            continue
    assert outcome is not None
    sim.set_knobs(error_rates={})
    assert sum(c.status == 500 for c in sim.calls()) >= 3

    assert sim.inventory()["loadbalancer"] == 1
    assert sim.inventory()["floatingip"] == 1
    assert len(sim.resources("member")) == 6


def test_a_failed_delete_is_repeated_and_the_floating_ip_is_deleted_once(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    sim.fail_next("load-balancer", 500, methods=("DELETE",))

    with pytest.raises(CloudError):
        lbs.ensure_deleted(service=svc)
    mark = sim.mark()
    delete(lbs, svc)

    assert sim.inventory()["loadbalancer"] == 0
    assert sim.inventory()["floatingip"] == 0
    assert writes(sim, mark) == [("DELETE", "lbaas/loadbalancers/{id}")]
