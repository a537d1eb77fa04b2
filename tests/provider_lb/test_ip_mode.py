"""`ipMode` in the ingress the provider returns (KEP-1860): `Proxy` where the Service's
listeners terminate its traffic (PROXY protocol, TLS termination, HTTP with X-Forwarded
headers), so that kube-proxy does not take in-cluster clients past the load balancer;
`VIP`, Kubernetes' default, otherwise. Against the OpenStack simulator: the listener and
pool protocols Octavia got are checked beside the mode."""

from __future__ import annotations

import pytest

from pyccm.provider.interface import LoadBalancers
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, ensure, nodes, one, service, with_annotations

P = "loadbalancer.openstack.org/"
TLS_REF = "https://kv.example/v1/containers/0b8a4d2e-3f1c-4e5a-9b6d-7c8e9f0a1b2c"
TLS_CONF = f"[LoadBalancer]\ndefault-tls-container-ref = {TLS_REF}"


@pytest.mark.parametrize(
    "case",
    [
        ("", {}, "TCP", "TCP", "VIP"),
        ("", {P + "x-forwarded-for": "false"}, "TCP", "TCP", "VIP"),
        # A bad value is the default (false), with a Warning: the mode follows the listener.
        ("", {P + "x-forwarded-for": "maybe"}, "TCP", "TCP", "VIP"),
        ("", {P + "proxy-protocol": "v2"}, "TCP", "PROXYV2", "Proxy"),
        ("", {P + "x-forwarded-for": "true"}, "HTTP", "HTTP", "Proxy"),
        ("", {P + "default-tls-container-ref": TLS_REF}, "TERMINATED_HTTPS", "HTTP", "Proxy"),
        (TLS_CONF, {}, "TERMINATED_HTTPS", "HTTP", "Proxy"),
        ("", {P + "x-forwarded-port": "true"}, "HTTP", "HTTP", "Proxy"),
        ("", {P + "x-forwarded-proto": "true"}, "HTTP", "HTTP", "Proxy"),
    ],
    ids=[
        *("tcp", "xff-false", "xff-bad", "proxy", "xff", "tls-annotation", "tls-cloud-conf"),
        *("x-forwarded-port", "x-forwarded-proto"),
    ],
)
def test_a_listener_that_terminates_the_traffic_publishes_ip_mode_proxy(
    sim: OpenStackSimHandle,
    make_lbs: MakeLbs,
    case: tuple[str, dict[str, str], str, str, str],
) -> None:
    conf, annotations, listener, pool, mode = case
    svc = service(ports=((80, 30080, "TCP"),), annotations=annotations)

    outcome = ensure(make_lbs(conf), svc, nodes(1))

    assert (one(sim, "listener")["protocol"], one(sim, "pool")["protocol"]) == (listener, pool)
    (entry,) = outcome.ingress
    assert entry.ip
    assert entry.ip_mode == mode


def test_the_mode_follows_the_listener_when_termination_is_turned_off(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((80, 30080, "TCP"),), annotations={P + "x-forwarded-for": "true"})
    assert ensure(lbs, svc, nodes(1)).ingress[0].ip_mode == "Proxy"

    plain = with_annotations(svc, {P + "x-forwarded-for": "false"})
    outcome = ensure(lbs, plain, nodes(1))

    assert one(sim, "listener")["protocol"] == "TCP"
    assert outcome.ingress[0].ip_mode == "VIP"
