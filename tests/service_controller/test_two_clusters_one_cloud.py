"""Two clusters with the same `--cluster-name` and different cluster ids on one OpenStack
(kubernetes/cloud-provider-openstack#3102): each service controller converges its own Services, no
cloud write of one touches the other's load balancers or floating IPs, and the second gets a
`LoadBalancerOwnedByAnotherCluster` Warning for the Service whose load balancer the first owns.
"""

from __future__ import annotations

import pytest

from pyccm.protocol.messages import RecordEvent
from pyccm.provider.errors import RetryAfter
from pyccm.workers.runtime.controller import SyncFailed
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, nodes, service
from tests.support.services import Harness, harness

ONE = "11111111-1111-1111-1111-111111111111"
TWO = "22222222-2222-2222-2222-222222222222"


def converged(h: Harness, key: str) -> None:
    for _ in range(10):
        try:
            h.controller.sync(key)
            return
        except RetryAfter:
            continue
    raise AssertionError(f"{key} did not converge in 10 syncs")


def cluster(make_lbs: MakeLbs, sim: OpenStackSimHandle, cluster_id: str) -> Harness:
    h = harness(nodes=0, load_balancers=make_lbs(cluster_id=cluster_id))
    for node in nodes(3, sim=sim):
        h.put(node)
    return h


def owner_of(sim: OpenStackSimHandle, resource: dict[str, object]) -> str:
    tags = resource["tags"]
    assert isinstance(tags, list)
    return next(str(t) for t in tags if str(t).startswith("pyccm-cluster:"))


def test_two_clusters_of_one_name_keep_to_their_own_load_balancers(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    first, second = cluster(make_lbs, sim, ONE), cluster(make_lbs, sim, TWO)
    first.put(service("web"))
    converged(first, "default/web")
    first_lb = {lb["id"] for lb in sim.resources("loadbalancer")}
    first_fips = {f["id"] for f in sim.resources("floatingip")}

    mark = sim.mark()
    second.put(service("api", namespace="shop"))  # its own Service: converges
    second.put(service("web"))  # the same default/web: the first cluster's load balancer
    converged(second, "shop/api")
    with pytest.raises(SyncFailed) as refused:
        converged(second, "default/web")

    by_owner: dict[str, list[str]] = {}
    for lb in sim.resources("loadbalancer"):
        by_owner.setdefault(owner_of(sim, lb), []).append(lb["name"])
    assert by_owner == {
        f"pyccm-cluster:{ONE}": ["kube_service_kubernetes_default_web"],
        f"pyccm-cluster:{TWO}": ["kube_service_kubernetes_shop_api"],
    }
    # No write of the second cluster names a resource of the first.
    touched = [c.path for c in sim.writes(since=mark)]
    assert touched
    assert not [p for p in touched if any(i in p for i in first_lb | first_fips)]
    # The runner commits a failed sync's actions: the Warning names the owner.
    warnings = [a for a in refused.value.actions if isinstance(a, RecordEvent)]
    assert [w.reason for w in warnings] == ["LoadBalancerOwnedByAnotherCluster"]
    assert warnings[0].type == "Warning"
    assert warnings[0].regarding.name == "web"
    assert ONE in warnings[0].message
    web = second.replica.service("default/web")
    assert web is not None
    assert web.status.load_balancer.ingress == ()  # no status from someone else's LB
