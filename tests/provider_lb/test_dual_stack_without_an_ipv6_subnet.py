"""A dual-stack Service whose VIP network has no IPv6 subnet (the session's IPv4-only
cloud): RequireDualStack is refused before anything is created; PreferDualStack is served
in IPv4 with a Warning saying why."""

from __future__ import annotations

import pytest

from pyccm.provider.errors import CloudError
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import ensure, nodes, one, service

FAMILIES = ("IPv4", "IPv6")


def test_require_dual_stack_without_an_ipv6_subnet_creates_nothing(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ip_families=FAMILIES, ip_family_policy="RequireDualStack")
    mark = sim.mark()

    with pytest.raises(CloudError, match=r"requires dual-stack .* has no IPv6 subnet") as raised:
        ensure(lbs, svc, nodes(2))

    assert not raised.value.retryable
    assert "no load balancer is created or changed" in str(raised.value)
    assert sim.writes(since=mark) == []
    assert sim.inventory()["loadbalancer"] == 0


def test_prefer_dual_stack_without_an_ipv6_subnet_serves_ipv4_with_a_warning(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ip_families=FAMILIES, ip_family_policy="PreferDualStack")

    outcome = ensure(lbs, svc, nodes(2))

    lb = one(sim, "loadbalancer")
    assert lb["name"] == "kube_service_kubernetes_default_web"
    assert [i.ip for i in outcome.ingress] == [one(sim, "floatingip")["floating_ip_address"]]
    (event,) = outcome.events
    assert (event.type, event.reason) == ("Warning", "LoadBalancerIPFamilyUnavailable")
    assert "IPv6 not served" in event.message
    assert "no IPv6 subnet" in event.message
