"""A dual-stack Service with IPv6 first, on one load balancer (Octavia 2.26): its VIP is the
IPv6 one and its additional VIP the IPv4 one, which gets the floating IP, as the IPv4 load
balancer of a per-family pair does. It used to get none (and a LoadBalancerFloatingIPSkipped
Warning): the real Neutron and Octavia showed it (conformance tier,
test_beyond_upstream_on_real_openstack.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.provider_lb.test_dual_stack_services import (
    assert_nothing_left,
    dual_nodes,
    dual_service,
    lbs_at,
)
from tests.support.lb import MakeLbs, delete, ensure, with_status
from tests.support.openstack import DUAL_STACK_SEED

IPV6_FIRST = ("IPv6", "IPv4")


@pytest.fixture
def openstack_seed() -> dict[str, Any]:
    """This module's tenant network is dual-stack too."""
    return DUAL_STACK_SEED


def test_the_ipv4_additional_vip_gets_the_floating_ip(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = lbs_at(make_lbs, sim, "2.26")
    svc = dual_service(ip_families=IPV6_FIRST, ip_family_policy="RequireDualStack")

    outcome = ensure(lbs, svc, dual_nodes())

    (lb,) = sim.resources("loadbalancer")
    assert lb["vip_subnet_id"] == sim.seeded.private_subnet_v6_id
    (extra,) = lb["additional_vips"]
    assert extra["subnet_id"] == sim.seeded.private_subnet_id
    (fip,) = sim.resources("floatingip")
    assert (fip["port_id"], fip["fixed_ip_address"]) == (lb["vip_port_id"], extra["ip_address"])
    assert [i.ip for i in outcome.ingress] == [lb["vip_address"], fip["floating_ip_address"]]
    assert outcome.events == ()

    mark = sim.mark()
    served = with_status(svc, outcome)
    assert ensure(lbs, served, dual_nodes()).ingress == outcome.ingress
    assert sim.writes(since=mark) == []
    delete(lbs, served)
    assert_nothing_left(sim)


def test_an_internal_one_is_reached_on_both_vips(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = lbs_at(make_lbs, sim, "2.26")
    svc = dual_service(
        ip_families=IPV6_FIRST,
        annotations={"service.beta.kubernetes.io/openstack-internal-load-balancer": "true"},
    )

    outcome = ensure(lbs, svc, dual_nodes())

    (lb,) = sim.resources("loadbalancer")
    (extra,) = lb["additional_vips"]
    assert [i.ip for i in outcome.ingress] == [lb["vip_address"], extra["ip_address"]]
    assert sim.resources("floatingip") == []
    assert outcome.events == ()
