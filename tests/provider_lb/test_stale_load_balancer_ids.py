"""A `load-balancer-id` annotation naming a load balancer that does not exist:
one with the Service's own name is used instead (the annotation pyccm wrote went
stale), otherwise the ensure fails and creates nothing; `get` and `ensure_deleted` find
nothing and succeed."""

from __future__ import annotations

import pytest

from pyccm.provider.errors import CloudError, RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import delete, ensure, nodes, one, service, with_annotations, writes

LB_ID = "loadbalancer.openstack.org/load-balancer-id"
# A well-formed id that no load balancer of the simulator has.
NOBODY = "5f0c3a52-8d6e-4b8f-9a51-3e2d1c0b9a87"


def test_a_load_balancer_deleted_by_hand_is_an_error_not_a_new_one(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    old_id = one(sim, "loadbalancer")["id"]
    conn = sim.connection()
    conn.load_balancer.delete_load_balancer(old_id, cascade=True)
    conn.close()
    sim.settle()
    mark = sim.mark()

    with pytest.raises(CloudError) as failed:
        lbs.ensure(service=svc, nodes=nodes(2))

    assert str(failed.value).startswith(
        f"annotation {LB_ID} names load balancer {old_id}, which does not exist; "
        "no load balancer is created or changed"
    )
    assert failed.value.retryable is False
    assert writes(sim, mark) == []
    assert sim.inventory()["loadbalancer"] == 0
    # The existence check and the deletion see nothing and succeed.
    assert lbs.get(service=svc) is None
    delete(lbs, svc)
    assert writes(sim, mark) == []


@pytest.mark.parametrize("by", ["name", "legacy name"])
def test_a_stale_id_gives_way_to_the_load_balancer_with_the_services_name(
    sim: OpenStackSimHandle, lbs: LoadBalancers, by: str
) -> None:
    svc = service(ports=((80, 30080, "TCP"),))
    ensure(lbs, svc, nodes(2))
    lb = one(sim, "loadbalancer")
    if by == "legacy name":
        # As an old release left it: named "a<uid>", nothing tagged.
        conn = sim.connection()
        conn.load_balancer.update_load_balancer(lb["id"], name="a0000defaultweb", tags=[])
        sim.settle()
        conn.load_balancer.update_listener(one(sim, "listener")["id"], tags=[])
        conn.close()
        sim.settle()
    stale = with_annotations(svc, {LB_ID: NOBODY})
    mark = sim.mark()

    outcome = ensure(lbs, stale, nodes(2))

    assert outcome.annotations_to_set[LB_ID] == lb["id"]
    assert ("POST", "lbaas/loadbalancers") not in writes(sim, mark)
    assert one(sim, "loadbalancer")["id"] == lb["id"]
    assert one(sim, "listener")["tags"] == ["kube_service_kubernetes_default_web"]


def test_a_load_balancer_still_being_deleted_exists_until_it_is_gone(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    """The service controller removes the finalizer when `get` says nothing is left: a load
    balancer PENDING_DELETE (whose delete may still end in ERROR) must still count."""
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    sim.set_knobs(provisioning_delay_s=3.0)
    with pytest.raises(RetryAfter):
        lbs.ensure_deleted(service=svc)
    assert one(sim, "loadbalancer")["provisioning_status"] == "PENDING_DELETE"

    assert lbs.get(service=svc) is not None

    sim.set_knobs(provisioning_delay_s=0.0)
    sim.settle()
    assert lbs.get(service=svc) is None
