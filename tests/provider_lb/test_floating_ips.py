"""Floating IPs: the requested `loadBalancerIP`, the floating network and subnet choices,
internal Services, `keep-floatingip`, and never deleting an address pyccm did not make."""

from __future__ import annotations

from typing import Any

import pytest

from pyccm.provider.errors import CloudError
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, delete, ensure, nodes, one, service, with_annotations

INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
KEEP = "loadbalancer.openstack.org/keep-floatingip"


def user_fip(sim: OpenStackSimHandle, **fields: Any) -> dict[str, Any]:
    conn = sim.connection()
    try:
        fip = conn.network.create_ip(floating_network_id=sim.seeded.public_network_id, **fields)
        return {"id": fip.id, "address": fip.floating_ip_address}
    finally:
        conn.close()


def conf_without_floating_network(sim: OpenStackSimHandle) -> str:
    lines = sim.cloud_conf_path.read_text().splitlines()
    return "\n".join(line for line in lines if not line.startswith("floating-network-id"))


def test_a_requested_free_address_is_attached_and_survives_deletion(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    mine = user_fip(sim)
    svc = service(load_balancer_ip=mine["address"])

    outcome = ensure(lbs, svc, nodes(1))
    assert outcome.ingress[0].ip == mine["address"]
    assert one(sim, "floatingip")["port_id"] == one(sim, "loadbalancer")["vip_port_id"]

    delete(lbs, with_annotations(svc, outcome.annotations_to_set))
    survivor = one(sim, "floatingip")
    assert survivor["id"] == mine["id"]
    assert survivor["port_id"] is None


def test_a_requested_address_that_is_not_allocated_yet_is_allocated(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    outcome = ensure(lbs, service(load_balancer_ip="172.24.5.77"), nodes(1))

    assert outcome.ingress[0].ip == "172.24.5.77"
    assert one(sim, "floatingip")["floating_ip_address"] == "172.24.5.77"


def test_a_requested_address_bound_elsewhere_is_refused(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    taken = sim.add_floating_ip("node-0005")

    with pytest.raises(CloudError, match=f"floating IP {taken} is not available"):
        ensure(lbs, service(load_balancer_ip=taken), nodes(1))


def test_keep_floatingip_leaves_the_address_allocated_after_deletion(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(annotations={KEEP: "true"})
    outcome = ensure(lbs, svc, nodes(1))

    delete(lbs, with_annotations(svc, outcome.annotations_to_set))

    kept = one(sim, "floatingip")
    assert kept["floating_ip_address"] == outcome.ingress[0].ip
    assert sim.inventory()["loadbalancer"] == 0
    # The same Service, recreated, gets its old address back.
    again = ensure(lbs, service(), nodes(1))
    assert again.ingress == outcome.ingress
    assert sim.inventory()["floatingip"] == 1


def test_an_internal_service_is_reached_on_its_vip_without_a_floating_ip(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    outcome = ensure(lbs, service(annotations={INTERNAL: "true"}), nodes(1))

    assert outcome.ingress[0].ip == one(sim, "loadbalancer")["vip_address"]
    assert sim.inventory()["floatingip"] == 0


def test_internal_lb_in_cloud_conf_makes_every_service_internal(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs("[LoadBalancer]\ninternal-lb = true")

    ensure(lbs, service(annotations={INTERNAL: "false"}), nodes(1))

    assert sim.inventory()["floatingip"] == 0


def test_turning_a_service_internal_deletes_the_floating_ip_pyccm_made(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(1)).annotations_to_set)

    outcome = ensure(lbs, with_annotations(svc, {INTERNAL: "true"}), nodes(1))

    assert sim.inventory()["floatingip"] == 0
    assert outcome.ingress[0].ip == one(sim, "loadbalancer")["vip_address"]


def test_turning_a_service_internal_only_detaches_a_users_floating_ip(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    mine = user_fip(sim)
    svc = service(load_balancer_ip=mine["address"])
    svc = with_annotations(svc, ensure(lbs, svc, nodes(1)).annotations_to_set)

    ensure(lbs, with_annotations(svc, {INTERNAL: "true"}), nodes(1))

    assert one(sim, "floatingip")["port_id"] is None


def test_the_floating_network_is_found_among_external_networks_once_per_process(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs(conf=conf_without_floating_network(sim))

    ensure(lbs, service("a"), nodes(1))
    mark = sim.mark()
    ensure(lbs, service("b"), nodes(1))

    assert {f["floating_network_id"] for f in sim.resources("floatingip")} == {
        sim.seeded.public_network_id
    }
    assert not [c for c in sim.calls(since=mark) if "/networks" in c.path]


def test_no_floating_network_forces_the_service_internal_with_warnings(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs(conf=conf_without_floating_network(sim))
    # The external-network search fails on both syncs (create, then finish), each time on
    # all three attempts (a read answered 500 is repeated twice).
    sim.fail_next("network", 500, count=6, methods=("GET",))

    outcome = ensure(lbs, service(), nodes(1))

    reasons = [e.reason for e in outcome.events]
    assert reasons == ["LoadBalancerExternalNetworkSearchFailed", "LoadBalancerForcedInternal"]
    assert outcome.ingress[0].ip == one(sim, "loadbalancer")["vip_address"]
    assert sim.inventory()["floatingip"] == 0


@pytest.mark.parametrize(
    "annotation",
    [
        {"loadbalancer.openstack.org/floating-subnet-tags": "lb-pool"},
        {"loadbalancer.openstack.org/floating-subnet": "fip-*"},
        {"loadbalancer.openstack.org/floating-subnet": "~^fip-b$"},
        {"loadbalancer.openstack.org/floating-subnet": "!public-*"},
    ],
)
def test_the_floating_subnet_is_chosen_by_tags_or_name_pattern(
    sim: OpenStackSimHandle, lbs: LoadBalancers, annotation: dict[str, str]
) -> None:
    conn = sim.connection()
    subnet = conn.network.create_subnet(
        network_id=sim.seeded.public_network_id,
        name="fip-b",
        cidr="172.24.16.0/24",
        ip_version=4,
        tags=["lb-pool"],
    )
    conn.close()

    outcome = ensure(lbs, service(annotations=annotation), nodes(1))

    assert outcome.ingress[0].ip.startswith("172.24.16.")
    assert one(sim, "floatingip")["floating_ip_address"] == outcome.ingress[0].ip
    assert subnet.id


def test_a_floating_subnet_id_is_used_as_given(sim: OpenStackSimHandle, lbs: LoadBalancers) -> None:
    svc = service(
        annotations={"loadbalancer.openstack.org/floating-subnet-id": sim.seeded.public_subnet_id}
    )

    outcome = ensure(lbs, svc, nodes(1))

    assert outcome.ingress[0].ip.startswith("172.24.")
