"""This cluster's routes on every router that carries its claims (`pyccm gc`:
docs/features.md#pyccm-gc-orphaned-cloud-resources).

The routers are found by their `pyccm-routes:<cluster-id>=...` tags (`provider.route_claims`), not
by `[Route] router-id`: a cluster that moved to another router, or whose cloud.conf is
gone with it, still has its leftovers found. A route is this cluster's when one of its
claims on that router covers the destination; one that another cluster's claim covers as
well is listed with `claimed_by` and never removed. Nothing on a router without this
cluster's claim is ever listed.

Every write reads the router again first: a claim removed, or another cluster's claim
added, since the listing turns the route into a refusal, not a deletion. Removal goes
through `OpenStackRoutes` (one `remove_extraroutes` per router, split only by Neutron's
body limit; the next hops' address pairs follow).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import msgspec

from pyccm.provider.errors import CloudError
from pyccm.provider.interface import (
    ClaimedRouter,
    OwnedRoute,
    OwnedRouteFailure,
    Route,
)
from pyccm.provider.openstack.common.resources import Router, RouterEnvelope
from pyccm.provider.openstack.routes.router import OpenStackRoutes, remove_router_tag
from pyccm.provider.openstack.transport.client import OpenStackClient
from pyccm.provider.route_claims import Claim, claimed_by, claims, covers

log = logging.getLogger(__name__)


class _TaggedRouter(msgspec.Struct, frozen=True):
    id: str
    name: str = ""
    tags: list[str] = []


class OpenStackRouteOwnership:
    def __init__(
        self, *, client: OpenStackClient, cluster_id: str, atomic: bool, address_pairs: bool
    ) -> None:
        if not cluster_id:
            raise CloudError("route ownership needs a cluster id", retryable=False)
        self._client = client
        self._id = cluster_id
        self._atomic = atomic
        self._address_pairs = address_pairs

    def claimed_routers(self) -> tuple[ClaimedRouter, ...]:
        # The project's routers are few; a tag filter needs whole tags, and the CIDR part
        # of a claim is not known here, so the tags are matched on this side.
        listed = self._client.list_all(
            _TaggedRouter,
            "network",
            "/routers",
            key="routers",
            request="router_list",
            params={"fields": ["id", "name", "tags"]},
        )
        found = []
        for tagged in listed:
            if any(c.cluster_id == self._id for c in claims(tagged.tags)):
                found.append(self._claimed(self._router(tagged.id)))
        return tuple(found)

    def delete_routes(
        self, router_id: str, routes: Sequence[OwnedRoute]
    ) -> tuple[OwnedRouteFailure, ...]:
        router = self._router(router_id)
        current = {(r.destination, r.nexthop): r for r in self._claimed(router).routes}
        failures: list[OwnedRouteFailure] = []
        doomed: list[OwnedRoute] = []
        present = {(e.destination, e.nexthop) for e in router.routes}
        for route in routes:
            key = (route.destination, route.nexthop)
            if key not in present:
                continue  # gone already
            now = current.get(key)
            if now is None:
                failures.append(
                    OwnedRouteFailure(
                        route=route,
                        error=f"router {router_id} no longer carries this cluster's claim"
                        f" of {route.destination}: left alone",
                    )
                )
            elif now.claimed_by:
                failures.append(
                    OwnedRouteFailure(
                        route=route,
                        error=f"cluster {', '.join(now.claimed_by)} also claims"
                        f" {route.destination} on router {router_id}: left alone",
                    )
                )
            else:
                doomed.append(route)
        failures.extend(self._remove(router_id, doomed))
        return tuple(failures)

    def release(self, router_id: str) -> tuple[str, ...]:
        router = self._router(router_id)
        left = [r for r in self._claimed(router).routes if not r.claimed_by]
        if left:
            raise CloudError(
                f"router {router_id} still has {len(left)} route(s) of this cluster: its"
                " claim stays",
                retryable=False,
            )
        tags = tuple(c.tag for c in self._own(router))
        for tag in tags:
            remove_router_tag(self._client, router_id, tag)
        return tags

    # --- helpers ---------------------------------------------------------------------------------
    def _router(self, router_id: str) -> Router:
        return self._client.call_json(
            RouterEnvelope, "network", "GET", f"/routers/{router_id}", request="router_get"
        ).router

    def _own(self, router: Router) -> list[Claim]:
        return [c for c in claims(router.tags) if c.cluster_id == self._id]

    def _claimed(self, router: Router) -> ClaimedRouter:
        every = claims(router.tags)
        own = [c for c in every if c.cluster_id == self._id]
        routes = tuple(
            OwnedRoute(
                router_id=router.id,
                destination=entry.destination,
                nexthop=entry.nexthop,
                claimed_by=claimed_by(entry.destination, every, cluster_id=self._id),
            )
            for entry in router.routes
            if any(covers(c, entry.destination) for c in own)
        )
        return ClaimedRouter(
            id=router.id,
            name=router.name,
            cidrs=tuple(c.network.compressed for c in own),
            routes=routes,
        )

    def _remove(self, router_id: str, routes: Sequence[OwnedRoute]) -> list[OwnedRouteFailure]:
        if not routes:
            return []
        writer = OpenStackRoutes(
            client=self._client,
            router_id=router_id,
            atomic=self._atomic,
            address_pairs=self._address_pairs,
            cluster_id=self._id,
        )
        # As the route worker removes a route whose node is gone: a blackhole, its next hop
        # taken as it is.
        by_route = {
            Route(
                name=r.destination,
                target_node=r.nexthop,
                destination_cidr=r.destination,
                blackhole=True,
            ): r
            for r in routes
        }
        failed = writer.delete_many(routes=list(by_route))
        for failure in failed:
            log.warning(
                "could not remove route %s via %s from router %s: %s",
                failure.route.destination_cidr,
                failure.route.target_node,
                router_id,
                failure.error,
            )
        return [OwnedRouteFailure(route=by_route[f.route], error=f.error) for f in failed]
