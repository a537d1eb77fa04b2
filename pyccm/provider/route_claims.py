"""Which cluster routes which pod CIDR through a router: the router's `pyccm-routes` tags.

A router's `routes` entries (destination, next hop) cannot carry tags, so ownership is
recorded on the router: one Neutron tag per cluster CIDR that a cluster routes through it,
`pyccm-routes:<cluster-id>=<cidr>`, the CIDR's `/` written `_` (`10.244.0.0_16`,
`fd00:10:244::_56`). Neutron tags are strings of up to 255 characters, but a `/` cannot
travel in `PUT /v2.0/routers/{id}/tags/{tag}` and a `,` splits a `tags=` filter.

A route belongs to a claim when the first or the last address of its destination lies in
the claim's CIDR (upstream's `isResponsibleForRoute`, as `--cluster-cidr` is applied). A
route that another cluster's claim also covers is ambiguous: it may be theirs, so it is
never deleted (`claimed_by`). A router without any claim is upstream's: the CIDR rule
alone decides, as before (migration from upstream's CCM).

Pure functions, the rules of `interface.RouteClaims`: the OpenStack routes, `pyccm gc` and the
fake provider share them.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from pyccm.provider.errors import ConfigError

PREFIX = "pyccm-routes:"
# Neutron's MAX_TAG_LEN (neutron/extensions/tagging.py).
MAX_TAG_LENGTH = 255

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Claim:
    cluster_id: str
    network: Network

    @property
    def tag(self) -> str:
        return claim_tag(self.cluster_id, self.network)


def claim_tag(cluster_id: str, network: Network) -> str:
    """The router tag saying that `cluster_id` routes `network` through it."""
    tag = f"{PREFIX}{cluster_id}={network.compressed.replace('/', '_')}"
    if len(tag) > MAX_TAG_LENGTH:
        raise ConfigError(
            f"the router tag {tag[:40]}... would be {len(tag)} characters, over Neutron's"
            f" {MAX_TAG_LENGTH}: use a shorter --cluster-id"
        )
    return tag


def claims_for(cluster_id: str, cidrs: Iterable[str]) -> tuple[Claim, ...]:
    return tuple(Claim(cluster_id, ipaddress.ip_network(c, strict=False)) for c in cidrs)


@functools.lru_cache(maxsize=1024)
def parse_tag(tag: str) -> Claim | None:
    """The claim a tag states; None for another tag, or a `pyccm-routes` tag that does not
    parse (never a claim: it cannot make a route ambiguous nor ours)."""
    if not tag.startswith(PREFIX):
        return None
    cluster_id, sep, cidr = tag.removeprefix(PREFIX).rpartition("=")
    if not sep or not cluster_id:
        return None
    try:
        return Claim(cluster_id, ipaddress.ip_network(cidr.replace("_", "/"), strict=False))
    except ValueError:
        return None


def claims(tags: Iterable[str]) -> tuple[Claim, ...]:
    return tuple(claim for tag in tags if (claim := parse_tag(tag)) is not None)


@functools.lru_cache(maxsize=65_536)
def _ends(destination: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...]:
    try:
        network = ipaddress.ip_network(destination.strip(), strict=False)
    except ValueError:
        return ()
    return (network.network_address, network.broadcast_address)


def covers(claim: Claim, destination: str) -> bool:
    """Whether a route to `destination` lies in the claim (first or last address inside)."""
    return any(end in claim.network for end in _ends(destination))


def claimed_by(destination: str, found: Iterable[Claim], *, cluster_id: str) -> tuple[str, ...]:
    """The other clusters whose claims cover a route to `destination` (sorted, unique)."""
    return tuple(
        sorted(
            {c.cluster_id for c in found if c.cluster_id != cluster_id and covers(c, destination)}
        )
    )
