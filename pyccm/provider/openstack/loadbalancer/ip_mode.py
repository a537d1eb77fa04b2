"""`ipMode` of a Service's `status.loadBalancer.ingress[]` (KEP-1860, the
`LoadBalancerIPMode` feature: beta and on by default in Kubernetes 1.30, GA in 1.32).

`VIP`, Kubernetes' default, lets kube-proxy bind the load balancer's address on every
node, so a pod that connects to it never leaves the node: it reaches a backend directly,
past the load balancer. That is harmless where the load balancer only forwards packets,
and wrong where a listener terminates the traffic and changes it on the way: the backends
then expect what only the load balancer adds (the PROXY protocol header, TLS taken off,
the X-Forwarded headers of an HTTP listener). `Proxy` tells kube-proxy to leave the
address alone, so in-cluster clients go through the load balancer like everyone else.
A cluster without the feature drops the field; an address given as a hostname has none.
"""

from __future__ import annotations

from pyccm.provider.openstack.loadbalancer.service_config import ServiceConfig

VIP = "VIP"
PROXY = "Proxy"


def terminates_traffic(cfg: ServiceConfig) -> bool:
    """The Service's listeners do more than forward its packets: PROXY protocol towards the
    members, TLS termination (`default-tls-container-ref`, from the annotation, the class
    or `[LoadBalancer]`: a TERMINATED_HTTPS listener), or an HTTP listener that inserts
    X-Forwarded headers. The one place that says so."""
    return bool(cfg.proxy or cfg.tls_ref or cfg.forwarded)


def ip_mode(cfg: ServiceConfig) -> str:
    return PROXY if terminates_traffic(cfg) else VIP
