"""`--cluster-cidr`, and which cloud routes that flag makes ours.

Upstream parses the flag when the route controller starts and kills the whole manager on an
empty or bad value. Here the parse raises `ConfigError` with one line naming the flag, so the
caller can refuse to start the route worker alone. The ownership rule is upstream's
`isResponsibleForRoute`: a route is ours when the first or the last address of its CIDR lies
inside a cluster CIDR, so routes of other clusters on a shared router are never touched.
"""

from __future__ import annotations

import functools
import ipaddress
import logging

from pyccm.provider.errors import ConfigError

log = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
FLAG = "--cluster-cidr"


def parse_cluster_cidrs(value: str) -> tuple[Network, ...]:
    """One CIDR, or two of different families (dual stack); ConfigError otherwise."""
    if not value.strip():
        raise ConfigError(f"{FLAG} is empty: the route controller needs the pod CIDR(s)")
    items = [item.strip() for item in value.split(",")]
    if len(items) > 2:
        raise ConfigError(
            f"{FLAG} {value!r}: at most two CIDRs (one IPv4, one IPv6), got {len(items)}"
        )
    networks = tuple(_parse_one(item, value=value) for item in items)
    if len(networks) == 2 and networks[0].version == networks[1].version:
        raise ConfigError(
            f"{FLAG} {value!r}: two CIDRs must be one IPv4 and one IPv6,"
            f" got two IPv{networks[0].version}"
        )
    return networks


def _parse_one(item: str, *, value: str) -> Network:
    # A bare address is a /32 to Python but not a CIDR to upstream (Go's ParseCIDR).
    if "/" not in item:
        raise ConfigError(f"{FLAG} {value!r}: {item!r} is not a CIDR (e.g. 10.244.0.0/16)")
    try:
        # Host bits may be set, as Go's ParseCIDR allows ("10.244.1.0/16" is 10.244.0.0/16).
        return ipaddress.ip_network(item, strict=False)
    except ValueError:
        raise ConfigError(
            f"{FLAG} {value!r}: {item!r} is not a CIDR (e.g. 10.244.0.0/16)"
        ) from None


# Every reconcile compares each node's CIDRs with the router's, and parsing is most of its
# cost (5,000 nodes: 0.3 of 0.45 s); the same strings come back every time, so remember them.
@functools.lru_cache(maxsize=65_536)
def _parse(cidr: str) -> Network | None:
    try:
        return ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError:
        return None


@functools.lru_cache(maxsize=65_536)
def canonical(cidr: str) -> str:
    """The CIDR in Python's canonical spelling, so `fd00:0::/64` matches `fd00::/64`; an
    unparsable value is returned as it is (it then only matches itself)."""
    network = _parse(cidr)
    return cidr if network is None else network.compressed


def owned(cidr: str, *, cluster_cidrs: tuple[Network, ...], route_name: str) -> bool:
    """Whether a route to `cidr` belongs to this cluster (upstream isResponsibleForRoute)."""
    answer = _owned(cidr, cluster_cidrs)
    if answer is None:
        log.error("ignoring route %s: unparsable CIDR %r", route_name, cidr)
        return False
    return answer


# Asked for every route of the router at every reconcile: remembered like `canonical`.
@functools.lru_cache(maxsize=65_536)
def _owned(cidr: str, cluster_cidrs: tuple[Network, ...]) -> bool | None:
    network = _parse(cidr)
    if network is None:
        return None
    ends = (network.network_address, network.broadcast_address)
    # `in` across families is False, never an error: an IPv6 route is not in an IPv4 CIDR.
    return any(end in cluster for cluster in cluster_cidrs for end in ends)
