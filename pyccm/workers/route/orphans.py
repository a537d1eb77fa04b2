"""Orphaned routes: routes this cluster claims on a router that no live Node accounts for
(`pyccm gc`: docs/features.md#pyccm-gc-orphaned-cloud-resources).

The provider lists the routes inside the CIDRs this cluster claims on each router
(`RouteOwnership.claimed_routers`). While the cluster lives, a route is accounted for when
its next hop is an address of a live Node or its destination is a live Node's podCIDR: the
route worker moves or removes those itself, so only the routes of Nodes that are gone are
left to collect. Once the cluster is gone, every route it claims is an orphan. A route
another cluster's claim also covers is never one: it may be theirs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyccm.protocol.views import Node
from pyccm.provider.interface import ClaimedRouter, OwnedRoute
from pyccm.workers.route.cidrs import canonical
from pyccm.workers.route.plan import pod_cidrs


@dataclass(frozen=True)
class LiveNodes:
    """What the live Nodes account for: their addresses and (canonical) podCIDRs."""

    addresses: frozenset[str]
    pod_cidrs: frozenset[str]
    # The cluster is gone (`pyccm gc` without a Kubernetes API): every route is an orphan.
    gone: bool = False

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> LiveNodes:
        nodes = tuple(nodes)
        return cls(
            addresses=frozenset(a.address for n in nodes for a in n.status.addresses),
            pod_cidrs=frozenset(canonical(c) for n in nodes for c in pod_cidrs(n)),
        )


NODES_GONE = LiveNodes(addresses=frozenset(), pod_cidrs=frozenset(), gone=True)


def accounted_for(route: OwnedRoute, live: LiveNodes) -> bool:
    if route.claimed_by:
        return True  # may be another cluster's: never collected
    if live.gone:
        return False
    return route.nexthop in live.addresses or canonical(route.destination) in live.pod_cidrs


def route_orphans(routers: Sequence[ClaimedRouter], live: LiveNodes) -> list[OwnedRoute]:
    """The routes of `routers` no live Node accounts for, router by router."""
    return [r for router in routers for r in router.routes if not accounted_for(r, live)]
