"""Pure rules for a Node's addresses (upstream `node/helpers/address.go`)."""

from __future__ import annotations

import ipaddress

from pyccm.protocol.views import Node, NodeAddress

PROVIDED_NODE_IP = "alpha.kubernetes.io/provided-node-ip"


class ProvidedNodeIpMismatch(ValueError):
    """The kubelet's --node-ip is not one of the cloud's addresses."""


def provided_node_ips(node: Node) -> list[str]:
    raw = node.metadata.annotations.get(PROVIDED_NODE_IP, "")
    return [part.strip() for part in raw.split(",") if part.strip()]


def filter_by_provided_ips(node: Node, cloud: tuple[NodeAddress, ...]) -> tuple[NodeAddress, ...]:
    """Matching cloud addresses first, then those of types no provided IP matched.

    Raises `ProvidedNodeIpMismatch` when a provided IP is not a cloud address.
    """
    provided = provided_node_ips(node)
    if not provided:
        return cloud
    matched: list[NodeAddress] = []
    for ip in provided:
        hits = [a for a in cloud if _same_ip(a.address, ip)]
        if not hits:
            raise ProvidedNodeIpMismatch(
                f"the kubelet's provided node IP {ip} ({PROVIDED_NODE_IP}) is not one of the "
                f"server's addresses {[a.address for a in cloud]}"
            )
        matched.append(hits[0])
    matched_types = {a.type for a in matched}
    return (*matched, *(a for a in cloud if a.type not in matched_types))


def with_hostname(node: Node, cloud: tuple[NodeAddress, ...]) -> tuple[NodeAddress, ...]:
    """Keep the kubelet's Hostname addresses when the cloud reports none."""
    if any(a.type == "Hostname" for a in cloud):
        return cloud
    return (*cloud, *(a for a in node.status.addresses if a.type == "Hostname"))


def addresses_changed(old: tuple[NodeAddress, ...], new: tuple[NodeAddress, ...]) -> bool:
    """Upstream's change test: different length, or a (type, address) pair not in the old
    list (compared through a type → address map, so order-insensitive)."""
    if len(old) != len(new):
        return True
    by_type = {a.type: a.address for a in old}
    return any(by_type.get(a.type) != a.address for a in new)


def _same_ip(left: str, right: str) -> bool:
    try:
        return ipaddress.ip_address(left) == ipaddress.ip_address(right)
    except ValueError:
        return left == right
