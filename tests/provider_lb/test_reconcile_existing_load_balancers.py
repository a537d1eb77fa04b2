"""An existing load balancer is brought in line with its Service: listeners added, removed
and re-made on a protocol change, members and pools repaired after manual changes, and
`update` changes backends with one batch call per pool."""

from __future__ import annotations

import pytest

from pyccm.provider.errors import CloudError
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node
from tests.support.lb import converge, ensure, nodes, one, service, with_annotations, writes


def listener_keys(sim: OpenStackSimHandle) -> list[tuple[str, int]]:
    return sorted((li["protocol"], li["protocol_port"]) for li in sim.resources("listener"))


def test_ports_added_and_removed_become_listeners_added_and_removed(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((80, 30080, "TCP"), (443, 30443, "TCP")))
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    lb_id = one(sim, "loadbalancer")["id"]

    changed = service(ports=((443, 30443, "TCP"), (8443, 30843, "TCP")))
    ensure(lbs, with_annotations(changed, svc.metadata.annotations), nodes(2))

    assert listener_keys(sim) == [("TCP", 443), ("TCP", 8443)]
    assert len(sim.resources("pool")) == 2
    assert len(sim.resources("member")) == 4
    assert one(sim, "loadbalancer")["id"] == lb_id


def test_a_protocol_change_replaces_the_listener(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((53, 30053, "TCP"),))
    svc = with_annotations(svc, ensure(lbs, svc, nodes(1)).annotations_to_set)

    ensure(
        lbs,
        with_annotations(service(ports=((53, 30053, "UDP"),)), svc.metadata.annotations),
        nodes(1),
    )

    assert listener_keys(sim) == [("UDP", 53)]
    assert one(sim, "pool")["protocol"] == "UDP"


def test_a_member_removed_by_hand_is_restored_by_the_next_ensure(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((80, 30080, "TCP"),))
    svc = with_annotations(svc, ensure(lbs, svc, nodes(3)).annotations_to_set)
    pool = one(sim, "pool")
    conn = sim.connection()
    victim = sim.resources("member")[0]
    conn.load_balancer.delete_member(victim["id"], pool["id"])
    sim.settle()

    mark = sim.mark()
    ensure(lbs, svc, nodes(3))

    assert writes(sim, mark) == [("PUT", "lbaas/pools/{id}/members")]
    assert len(sim.resources("member")) == 3
    conn.close()


def test_a_changed_algorithm_is_put_back(sim: OpenStackSimHandle, lbs: LoadBalancers) -> None:
    svc = service(ports=((80, 30080, "TCP"),))
    svc = with_annotations(svc, ensure(lbs, svc, nodes(1)).annotations_to_set)
    conn = sim.connection()
    conn.load_balancer.update_pool(one(sim, "pool")["id"], lb_algorithm="SOURCE_IP")
    conn.close()
    sim.settle()

    ensure(lbs, svc, nodes(1))

    assert one(sim, "pool")["lb_algorithm"] == "ROUND_ROBIN"


def test_turning_on_proxy_protocol_remakes_the_pool_with_its_members(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((80, 30080, "TCP"),))
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)

    proxied = with_annotations(svc, {"loadbalancer.openstack.org/proxy-protocol": "true"})
    ensure(lbs, proxied, nodes(2))

    assert one(sim, "pool")["protocol"] == "PROXY"
    assert len(sim.resources("member")) == 2


def test_update_changes_the_members_of_every_pool_with_one_batch_call_each(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)

    mark = sim.mark()
    # One write per sync (the first leaves the load balancer PENDING_UPDATE): the second
    # pool's comes in the next sync.
    events = converge(lambda: lbs.update(service=svc, nodes=nodes(10, start=2))).value

    assert events == ()
    assert writes(sim, mark) == [("PUT", "lbaas/pools/{id}/members")] * 2
    names = {m["name"] for m in sim.resources("member")}
    assert names == {seed_node(i).name for i in range(2, 12)}
    assert len(sim.resources("member")) == 20


def test_update_without_changes_makes_no_writes(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(4)).annotations_to_set)

    mark = sim.mark()
    lbs.update(service=svc, nodes=nodes(4))

    assert writes(sim, mark) == []


def test_update_of_a_service_whose_ports_changed_asks_for_a_full_sync(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(1)).annotations_to_set)

    changed = service(ports=((80, 30080, "TCP"), (8080, 30088, "TCP")))
    changed = with_annotations(changed, svc.metadata.annotations)

    with pytest.raises(CloudError, match="no TCP listener on port 8080"):
        lbs.update(service=changed, nodes=nodes(1))


def test_a_monitor_timeout_above_its_delay_is_capped_with_a_warning(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(
        ports=((80, 30080, "TCP"),),
        annotations={
            "loadbalancer.openstack.org/enable-health-monitor": "true",
            "loadbalancer.openstack.org/health-monitor-delay": "4",
            "loadbalancer.openstack.org/health-monitor-timeout": "10",
        },
    )

    outcome = ensure(lbs, svc, nodes(1))

    monitor = one(sim, "healthmonitor")
    assert (monitor["delay"], monitor["timeout"]) == (4, 4)
    assert [e.reason for e in outcome.events] == ["LoadBalancerAnnotationInvalid"]
