"""A TCP Service gets one fully populated load balancer with a floating IP, is found again,
costs no writes once in place, and is deleted with the floating IP pyccm made."""

from __future__ import annotations

from pyccm.protocol.views import LoadBalancerIngress
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node
from tests.support.lb import converge, delete, ensure, nodes, one, service, with_annotations, writes

LB_NAME = "kube_service_kubernetes_default_web"
LB_ID = "loadbalancer.openstack.org/load-balancer-id"
LB_ADDRESS = "loadbalancer.openstack.org/load-balancer-address"


def test_a_new_service_gets_one_fully_populated_load_balancer_and_a_floating_ip(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    outcome = ensure(lbs, service(), nodes(3))

    lb = one(sim, "loadbalancer")
    assert lb["name"] == LB_NAME
    assert lb["description"] == "Kubernetes external service default/web from cluster kubernetes"
    assert lb["tags"] == [LB_NAME]
    assert lb["vip_subnet_id"] == sim.seeded.private_subnet_id
    listeners = sorted(sim.resources("listener"), key=lambda li: li["protocol_port"])
    assert [(li["name"], li["protocol"], li["protocol_port"]) for li in listeners] == [
        (f"listener_0_{LB_NAME}", "TCP", 80),
        (f"listener_1_{LB_NAME}", "TCP", 443),
    ]
    assert all(li["tags"] == [LB_NAME] for li in listeners)
    pools = {p["name"]: p for p in sim.resources("pool")}
    assert set(pools) == {f"pool_0_{LB_NAME}", f"pool_1_{LB_NAME}"}
    members = {(m["name"], m["address"], m["protocol_port"]) for m in sim.resources("member")}
    assert members == {
        (seed_node(i).name, seed_node(i).internal_ip, port)
        for i in range(3)
        for port in (30080, 30443)
    }
    fip = one(sim, "floatingip")
    assert fip["port_id"] == lb["vip_port_id"]
    assert fip["floating_network_id"] == sim.seeded.public_network_id
    assert fip["description"] == (
        "Floating IP for Kubernetes external service default/web from cluster kubernetes"
    )
    address = fip["floating_ip_address"]
    assert outcome.ingress == (LoadBalancerIngress(ip=address, ip_mode="VIP"),)
    assert outcome.annotations_to_set == {LB_ID: lb["id"], LB_ADDRESS: address}
    assert outcome.events == ()


def test_creation_is_one_post_with_the_whole_tree_then_one_floating_ip(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    mark = sim.mark()
    result = converge(lambda: lbs.ensure(service=service(), nodes=nodes(2)))

    assert writes(sim, mark) == [("POST", "lbaas/loadbalancers"), ("POST", "floatingips")]
    # The sync after the create was told to come back instead of waiting for ACTIVE.
    assert len(result.delays) == 1
    assert 0 < result.delays[0] <= 2


def test_a_second_ensure_of_an_unchanged_service_makes_no_write_calls(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    outcome = ensure(lbs, svc, nodes(3))
    svc = with_annotations(svc, outcome.annotations_to_set)

    mark = sim.mark()
    again = lbs.ensure(service=svc, nodes=nodes(3))

    assert writes(sim, mark) == []
    assert again == outcome


def test_get_finds_the_load_balancer_and_its_floating_ip_and_none_before(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    assert lbs.get(service=svc) is None

    outcome = ensure(lbs, svc, nodes(1))

    assert lbs.get(service=svc) == outcome.ingress
    assert lbs.get(service=with_annotations(svc, outcome.annotations_to_set)) == outcome.ingress


def test_deletion_removes_the_load_balancer_and_the_floating_ip_pyccm_made(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)

    delete(lbs, svc)

    inventory = sim.inventory()
    assert inventory["loadbalancer"] == 0
    assert inventory["floatingip"] == 0
    assert inventory["listener"] == inventory["pool"] == inventory["member"] == 0
    assert lbs.get(service=svc) is None


def test_deleting_a_service_without_a_load_balancer_succeeds_without_writes(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    mark = sim.mark()

    assert lbs.ensure_deleted(service=service()) == ()

    assert writes(sim, mark) == []
