"""The node address algorithm, rule by rule in upstream's order (docs/upstream.md#node-addresses).

A pure function of the server, its ports, its trunk subports' addresses and
`[Networking]`, so every rule is unit-tested without a cloud. The order of the rules is
the product: kubelet, the LB member choice and the route next hop all read "the first
InternalIP", and operators depend on which address that is.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence

from pyccm.protocol.views import NodeAddress
from pyccm.provider.openstack.common.resources import Port, Server, ServerAddress
from pyccm.provider.openstack.config import NetworkingSettings

INTERNAL_IP = "InternalIP"
EXTERNAL_IP = "ExternalIP"
HOSTNAME = "Hostname"


def _is_ipv6(address: str) -> bool:
    # Upstream tests `net.ParseIP(a).To4() == nil`, which is also true for a string that
    # is no IP at all; such an address is treated as IPv6 here too.
    try:
        return ipaddress.ip_address(address).version == 6
    except ValueError:
        return True


class _Addresses:
    """An ordered list of node addresses, deduplicated on (type, address)."""

    def __init__(self, *, ipv6_disabled: bool) -> None:
        self.items: list[NodeAddress] = []
        self._ipv6_disabled = ipv6_disabled

    def add(self, kind: str, address: str, *, is_ip: bool = True) -> None:
        if not address or (is_ip and self._ipv6_disabled and _is_ipv6(address)):
            return
        candidate = NodeAddress(type=kind, address=address)
        if candidate not in self.items:
            self.items.append(candidate)

    def remove(self, address: str) -> None:
        """Drop `address` whatever its type."""
        self.items = [a for a in self.items if a.address != address]


def _merge_subports(
    addresses: Mapping[str, Sequence[ServerAddress]],
    subports: Mapping[str, Sequence[str]],
) -> dict[str, list[ServerAddress]]:
    merged = {network: list(entries) for network, entries in addresses.items()}
    for network, fixed in subports.items():
        merged.setdefault(network, []).extend(ServerAddress(addr=a, type="fixed") for a in fixed)
    return merged


def _apply_network_rules(
    out: _Addresses, networks: dict[str, list[ServerAddress]], opts: NetworkingSettings
) -> None:
    for network in sorted(networks):
        for entry in networks[network]:
            if entry.type == "floating":
                kind = EXTERNAL_IP
            elif network in opts.public_network_names:
                # A network listed as public: its address must not stay an InternalIP too.
                out.remove(entry.addr)
                kind = EXTERNAL_IP
            elif not opts.internal_network_names or network in opts.internal_network_names:
                kind = INTERNAL_IP
            else:
                out.remove(entry.addr)
                continue
            out.add(kind, entry.addr)


def _sort_key(address: NodeAddress, opts: NetworkingSettings) -> tuple[int, bytes]:
    try:
        ip = ipaddress.ip_address(address.address)
    except ValueError:
        return (0, b"")
    networks = opts.address_sort_order
    for index, network in enumerate(networks):
        if ip.version == network.version and ip in network:
            # Go compares 16-byte forms: IPv4 as ::ffff:a.b.c.d.
            packed = ip.packed if ip.version == 6 else bytes(10) + b"\xff\xff" + ip.packed
            return (-(len(networks) - index), packed)
    return (0, b"")


def node_addresses(
    *,
    server: Server,
    ports: Sequence[Port],
    subport_addresses: Mapping[str, Sequence[str]],
    networking: NetworkingSettings,
) -> tuple[NodeAddress, ...]:
    """Upstream's six steps. `subport_addresses` maps a trunk subport's network name to
    its fixed IPs."""
    out = _Addresses(ipv6_disabled=networking.ipv6_support_disabled)
    # 1. fixed IPs of ACTIVE ports, in API order
    for port in ports:
        if port.status == "ACTIVE":
            for fixed in port.fixed_ips:
                out.add(INTERNAL_IP, fixed.ip_address)
    # 2. access IPs
    out.add(EXTERNAL_IP, server.access_ipv4)
    out.add(EXTERNAL_IP, server.access_ipv6)
    # 3. the hostname from server metadata
    out.add(HOSTNAME, server.metadata.get("hostname", ""), is_ip=False)
    # 4 + 5. server addresses and trunk subports, by sorted network name, with the filters
    _apply_network_rules(out, _merge_subports(server.addresses, subport_addresses), networking)
    # 6. address-sort-order (stable: unmatched addresses keep their relative order)
    if networking.address_sort_order:
        out.items.sort(key=lambda a: _sort_key(a, networking))
    return tuple(out.items)
