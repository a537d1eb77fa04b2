"""The service controller on the real Octavia provider and the OpenStack simulator: what a
whole sync costs in cloud calls, and that the drift resync writes only when the cloud drifted.
"""

from __future__ import annotations

from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm.workers.service.policy import FINALIZER
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, nodes, service, writes
from tests.support.services import Harness, harness

KEY = "default/web"


def converged(h: Harness) -> None:
    """Sync until the provider stops asking to be called again (the worker's requeues)."""
    for _ in range(10):
        try:
            h.controller.sync(KEY)
            return
        except RetryAfter:
            continue
    raise AssertionError("the Service did not converge in 10 syncs")


def on_simulator(lbs: LoadBalancers, sim: OpenStackSimHandle) -> Harness:
    h = harness(nodes=0, load_balancers=lbs)
    for node in nodes(3, sim=sim):
        h.put(node)
    h.put(service())
    converged(h)
    return h


def test_a_service_converges_to_one_load_balancer_with_a_floating_ip(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    h = on_simulator(make_lbs(), sim)
    (lb,) = sim.resources("loadbalancer")
    (fip,) = sim.resources("floatingip")
    assert fip["port_id"] == lb["vip_port_id"]
    final = h.replica.service(KEY)
    assert final is not None
    assert final.status.load_balancer.ingress[0].ip == fip["floating_ip_address"]
    assert FINALIZER in final.metadata.finalizers
    assert len(sim.resources("member")) == 2 * 3


def test_a_drift_resync_of_a_healthy_load_balancer_only_reads(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    h = on_simulator(make_lbs(), sim)
    mark = sim.mark()
    (resync,) = h.controller.periodics(lambda key: None)
    resync.run()
    h.controller.sync(KEY)
    assert writes(sim, mark) == []
    assert len(list(sim.calls(since=mark))) > 0


def test_a_drift_resync_puts_back_a_listener_deleted_behind_our_back(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    h = on_simulator(make_lbs(), sim)
    listener = sim.resources("listener")[0]
    sim.connection().load_balancer.delete_listener(listener["id"], ignore_missing=False)
    # Nothing in Kubernetes changed: without the resync, the next sync costs nothing.
    mark = sim.mark()
    h.controller.sync(KEY)
    assert list(sim.calls(since=mark)) == []
    (resync,) = h.controller.periodics(lambda key: None)
    resync.run()
    converged(h)
    ports = sorted(item["protocol_port"] for item in sim.resources("listener"))
    assert ports == [80, 443]
