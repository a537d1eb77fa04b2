"""The one scenario both simulators seed, so the cluster and the cloud match.

Node `i` of a seeded cluster is the server `i` of the seeded cloud: same name, same
InternalIP on the tenant subnet, and a podCIDR carved from the cluster CIDR. The Kubernetes
simulator seeds Nodes from these facts and the OpenStack simulator seeds servers and ports
from them, without either importing the other.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

# The tenant subnet holds node ports; .0.1 is the router's interface, .0.2/.0.3 are DHCP.
TENANT_CIDR = "10.0.0.0/16"
TENANT_GATEWAY = "10.0.0.1"
FIRST_NODE_OFFSET = 10
# Pod CIDRs: one /24 per node (kube-controller-manager's default mask size); a /10 holds
# 16,384 of them, enough for the 5,000-node benchmarks.
CLUSTER_CIDR = "10.64.0.0/10"
# Floating IPs come from this documentation range on the external network.
EXTERNAL_CIDR = "172.24.4.0/22"
MAX_NODES = 256 * 256 - FIRST_NODE_OFFSET - 1
# A dual-stack cloud (`SeedSpec.dual_stack`) also gives the tenant network this IPv6
# subnet, and node `i` the address FIRST_NODE_OFFSET + i in it beside its IPv4 one.
TENANT_CIDR_V6 = "fd00:10::/64"
TENANT_GATEWAY_V6 = "fd00:10::1"
NODE_NAME_FORMAT = "node-{index:04d}"


@dataclass(frozen=True)
class SeedNode:
    """What both simulators know about node `index`."""

    index: int
    name: str
    internal_ip: str
    pod_cidr: str


def node_name(index: int) -> str:
    return NODE_NAME_FORMAT.format(index=index)


def node_internal_ip(index: int) -> str:
    if not 0 <= index < MAX_NODES:
        raise ValueError(f"node index {index} outside 0..{MAX_NODES - 1}")
    network = ipaddress.IPv4Network(TENANT_CIDR)
    return str(network.network_address + FIRST_NODE_OFFSET + index)


def node_internal_ipv6(index: int) -> str:
    """Node `index`'s address on the IPv6 tenant subnet of a dual-stack cloud."""
    if not 0 <= index < MAX_NODES:
        raise ValueError(f"node index {index} outside 0..{MAX_NODES - 1}")
    network = ipaddress.IPv6Network(TENANT_CIDR_V6)
    return str(network.network_address + FIRST_NODE_OFFSET + index)


def node_pod_cidr(index: int, cluster_cidr: str = CLUSTER_CIDR) -> str:
    network = ipaddress.IPv4Network(cluster_cidr)
    if network.prefixlen > 24 or index >= 2 ** (24 - network.prefixlen):
        raise ValueError(f"cluster CIDR {cluster_cidr} has no /24 number {index}")
    first = int(network.network_address) + (index << 8)
    return f"{ipaddress.IPv4Address(first)}/24"


def seed_node(index: int, cluster_cidr: str = CLUSTER_CIDR) -> SeedNode:
    return SeedNode(
        index=index,
        name=node_name(index),
        internal_ip=node_internal_ip(index),
        pod_cidr=node_pod_cidr(index, cluster_cidr),
    )


def seed_nodes(count: int, cluster_cidr: str = CLUSTER_CIDR) -> list[SeedNode]:
    return [seed_node(index, cluster_cidr) for index in range(count)]
