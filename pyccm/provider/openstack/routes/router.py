"""Pod-network routes on a Neutron router (docs/upstream.md#routes), in batches.

* With `extraroute-atomic`, routes are added and removed with the atomic
  `add_extraroutes` / `remove_extraroutes` calls; without it, the router's whole `routes`
  list is read and written back under a lock, so two callers never lose each other's
  update (upstream's process-wide mutex; one route worker per cluster makes the lock
  process-wide enough).
* With `allowed-address-pairs`, the next hop's port gets the pod CIDR as an allowed address
  pair (unless port security is off); a failure there undoes that route's change.
* The next hop is the target node's first InternalIP of the destination's family; a route
  whose next hop no node owns is reported as a blackhole.

Upstream makes one router update per route, and its per-route lookups of the next hop's
port cost a query per router network; routing 5,000 nodes took 5,000 `add_extraroutes`,
each slower than the last as Neutron re-validates the whole list. Here a batch is:

1. **one router update per ~1,500 routes**: the routes go in as few `add_extraroutes`
   (`remove_extraroutes`) calls as Neutron's request body limit allows (oslo.middleware's
   `max_request_body_size`, 114,688 bytes by default; a route entry is ~60 bytes). A 413
   (a smaller limit) or a 400 (one bad route refuses the whole call) splits the call in
   halves, down to the offending route, so one bad node never blocks the others;
2. **the router's route limit**: Neutron refuses a call that would leave the router more
   routes than it may hold. Since Neutron 29 (2026.2) that is the `router_route` quota (30 by
   default; 409 `OverQuota`, "Quota exceeded for resources: ['router_route']."), before it
   the `max_routes` option (400 `RoutesExhausted`, "... exceeds the maximum 30."). The
   routes that still fit are added (the limit is read from the message, else from the
   project's quota, else found by halving the call), the rest fail with the limit named,
   and no further call is made for them in this batch;
3. **the ports in one lookup**: the next hops' ports are found with one (paged) listing of
   the router networks' ports, only the fields read, or with one `fixed_ips` query per next
   hop when there are only a few; only the ports whose pairs change are written, up to
   `PORT_UPDATES_IN_FLIGHT` at once (Neutron has no bulk port update). Each port is written
   once per batch even when it is the next hop of several routes (dual stack).

The port updates run on daemon threads (`common.concurrency`). Deleting a route whose node
port is already gone succeeds instead of rolling the route back forever.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from pyccm.protocol.views import Node
from pyccm.provider.errors import CloudError, CloudNotFound, ProviderError
from pyccm.provider.interface import Route, RouteFailure
from pyccm.provider.openstack.common.concurrency import concurrently
from pyccm.provider.openstack.common.ports import list_ports
from pyccm.provider.openstack.common.resources import (
    AddressPair,
    Port,
    Router,
    RouterEnvelope,
    RouterRoute,
)
from pyccm.provider.openstack.transport.client import OpenStackClient
from pyccm.provider.route_claims import claimed_by, claims, claims_for

log = logging.getLogger(__name__)

T = TypeVar("T")
# Inside OpenStackRoutes, `list` is the Routes method: these name the built-in list's types.
_Entries = list[RouterRoute]
_Routes = list[Route]
_Ports = list[Port]
_Failed = list[tuple[Route, ProviderError]]

# oslo.middleware's default `max_request_body_size`, Neutron's limit on a request body.
MAX_BODY_BYTES = 114_688
_ENVELOPE_BYTES = len(msgspec.json.encode({"router": {"routes": []}}))
# Up to this many next hops are looked up with one `fixed_ips` query each (a node join
# costs one small query); more, and one listing of the router networks' ports is cheaper.
LOOKUPS_ONE_BY_ONE = 8
# Port updates in flight at once: enough to keep a 500 qps client budget busy at 20-100 ms
# per call, well under the client's 100 pooled connections per host.
PORT_UPDATES_IN_FLIGHT = 50
# The port fields the pairs logic reads: a listing of thousands of ports stays small.
PORT_FIELDS = ("id", "network_id", "fixed_ips", "allowed_address_pairs", "port_security_enabled")
# Neutron before 29, `max_routes`: RoutesExhausted (neutron-lib
# `exceptions/extraroute.py`), HTTP 400, "Unable to complete operation for <router>. The
# number of routes exceeds the maximum <max_routes>."
_ROUTES_EXHAUSTED = re.compile(r"number of routes exceeds the maximum\s*(\d*)")
# Neutron 29 on, the `router_route` quota (`QUOTAS.limit_check(router_route=N)` in
# `db/extraroute_db.py`): OverQuota, HTTP 409, "Quota exceeded for resources: ['router_route']."
_ROUTE_QUOTA = re.compile(r"Quota exceeded for resources:.*\brouter_route\b")


class RouteLimitReached(CloudError):
    """The router holds as many routes as it may; `limit` is its maximum (0 if unknown)."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message, status=400, retryable=True)
        self.limit = limit


def next_hop(route: Route) -> str:
    """The target node's first InternalIP of the destination's family."""
    family = ipaddress.ip_network(route.destination_cidr, strict=False).version
    for address in route.target_node_addresses:
        if address.type != "InternalIP":
            continue
        try:
            if ipaddress.ip_address(address.address).version == family:
                return address.address
        except ValueError:
            continue
    raise CloudError(f"no address found for host {route.target_node}", retryable=True)


def _body(routes: Iterable[RouterRoute]) -> dict[str, dict[str, list[dict[str, str]]]]:
    return {
        "router": {"routes": [{"destination": r.destination, "nexthop": r.nexthop} for r in routes]}
    }


def _entry_bytes(entry: RouterRoute) -> int:
    # As the client encodes it (msgspec's compact JSON), plus the "," between entries.
    return (
        len(msgspec.json.encode({"destination": entry.destination, "nexthop": entry.nexthop})) + 1
    )


def chunks(
    entries: Sequence[RouterRoute], *, limit: int = MAX_BODY_BYTES
) -> list[list[RouterRoute]]:
    """`entries` cut into router calls whose bodies stay under `limit` bytes."""
    out: list[list[RouterRoute]] = []
    current: list[RouterRoute] = []
    size = _ENVELOPE_BYTES
    for entry in entries:
        grown = size + _entry_bytes(entry)
        if current and grown > limit:
            out.append(current)
            current, grown = [], _ENVELOPE_BYTES + _entry_bytes(entry)
        current.append(entry)
        size = grown
    if current:
        out.append(current)
    return out


def limit_refusal(error: ProviderError) -> bool:
    """Whether `error` is the router refusing routes for its limit (either wording)."""
    if not isinstance(error, CloudError):
        return False
    if error.status == 400:
        return _ROUTES_EXHAUSTED.search(str(error)) is not None
    return error.status == 409 and _ROUTE_QUOTA.search(str(error)) is not None


def stated_limit(error: ProviderError) -> int | None:
    """The limit a refusal names (`max_routes`'s message does; the quota's does not)."""
    match = _ROUTES_EXHAUSTED.search(str(error))
    return int(match.group(1)) if match is not None and match.group(1) else None


class _RouterOwner(msgspec.Struct, frozen=True):
    project_id: str = ""
    routes: list[RouterRoute] = []


class _RouterOwnerEnvelope(msgspec.Struct, frozen=True):
    router: _RouterOwner


class _RouteQuota(msgspec.Struct, frozen=True):
    router_route: int = -1


class _QuotaEnvelope(msgspec.Struct, frozen=True):
    quota: _RouteQuota


def _splits(error: ProviderError) -> bool:
    """Whether a refused call may succeed in halves: a body over the cloud's limit, or a
    400 that one bad route in the call explains."""
    return isinstance(error, CloudError) and error.status in (400, 413)


@dataclass
class _Batch:
    """What happened to each router entry of one batch."""

    done: list[RouterRoute] = field(default_factory=list)
    failed: dict[RouterRoute, ProviderError] = field(default_factory=dict)
    # Set once the router refused for its limit: the batch's later adds fail without a call.
    full: RouteLimitReached | None = None

    def fail(self, entries: Iterable[RouterRoute], error: ProviderError) -> None:
        for entry in entries:
            self.failed.setdefault(entry, error)


class OpenStackRoutes:
    def __init__(
        self,
        *,
        client: OpenStackClient,
        router_id: str,
        atomic: bool,
        address_pairs: bool,
        max_body_bytes: int = MAX_BODY_BYTES,
        cluster_id: str = "",
    ) -> None:
        self._client = client
        # Whose claims on the router are this cluster's (`provider.route_claims`); ""
        # claims nothing.
        self._cluster_id = cluster_id
        # (router, tag) pairs already written: a claim costs a call once per process.
        self._claimed: set[tuple[str, str]] = set()
        self._router_id = router_id
        self._atomic = atomic
        self._address_pairs = address_pairs
        self._max_body_bytes = max_body_bytes
        # One batch at a time: serialises read-modify-writes of the router's routes (classic
        # mode) and of node ports' pairs.
        self._lock = threading.Lock()
        self._router_networks: frozenset[str] | None = None

    def retarget(self, router_id: str) -> None:
        """Program `router_id` from now on (a reload of `[Route] router-id`). A batch in
        flight finishes on the old router first; the routes already there stay, as after
        upstream's restart with a new router."""
        with self._lock:
            if router_id != self._router_id:
                self._router_id = router_id
                self._router_networks = None

    # --- Routes ----------------------------------------------------------------------------------
    def list(self, *, nodes: Sequence[Node]) -> tuple[Route, ...]:
        owners = {a.address: node for node in nodes for a in node.status.addresses}
        routes = []
        router = self._router()
        found = claims(router.tags)
        for entry in router.routes:
            owner = owners.get(entry.nexthop)
            routes.append(
                Route(
                    name=entry.destination,
                    target_node=owner.name if owner else entry.nexthop,
                    destination_cidr=entry.destination,
                    blackhole=owner is None,
                    target_node_addresses=owner.status.addresses if owner else (),
                    claimed_by=claimed_by(entry.destination, found, cluster_id=self._cluster_id)
                    if found
                    else (),
                )
            )
        return tuple(routes)

    def claim(self, *, cluster_cidrs: Sequence[str]) -> None:
        """Tag the router `pyccm-routes:<cluster-id>=<cidr>` for each cluster CIDR
        (`RouteClaims`): a PUT only for a tag the router does not carry yet (read once per
        router and process, so a restarted worker writes nothing), and never twice. A claim
        of a CIDR this cluster no longer routes stays: `pyccm gc` finds that CIDR's
        leftovers by it."""
        if not self._cluster_id:
            return
        router_id = self._router_id
        pending = [
            claim
            for claim in claims_for(self._cluster_id, cluster_cidrs)
            if (router_id, claim.tag) not in self._claimed
        ]
        carried = set(self._router().tags) if pending else set()
        for claim in pending:
            tag = claim.tag
            if tag in carried:
                self._claimed.add((router_id, tag))
                continue
            add_router_tag(self._client, router_id, tag)
            log.info(
                "router %s: tagged %s (this cluster routes %s through it)",
                router_id,
                tag,
                claim.network,
            )
            self._claimed.add((router_id, tag))

    def create(self, *, name_hint: str, route: Route) -> None:
        self._raise_first(self._change([route], add=True))

    def delete(self, *, route: Route) -> None:
        self._raise_first(self._change([route], add=False))

    def create_many(self, *, routes: Sequence[tuple[str, Route]]) -> tuple[RouteFailure, ...]:
        # The name hint (the node's UID) names nothing in Neutron, as upstream.
        return _failures(self._change([route for _, route in routes], add=True))

    def delete_many(self, *, routes: Sequence[Route]) -> tuple[RouteFailure, ...]:
        return _failures(self._change(routes, add=False))

    @staticmethod
    def _raise_first(failed: _Failed) -> None:
        if failed:
            raise failed[0][1]

    # --- one batch -------------------------------------------------------------------------------
    def _change(self, routes: Sequence[Route], *, add: bool) -> _Failed:
        """Add (or remove) `routes` and their address pairs; the routes that failed."""
        by_entry: dict[RouterRoute, _Routes] = defaultdict(list)
        failed: _Failed = []
        for route in routes:
            try:
                by_entry[_entry(route, add=add)].append(route)
            except ProviderError as error:
                failed.append((route, error))
        if not by_entry:
            return failed
        with self._lock:
            batch = self._write_router(list(by_entry), add=add)
            if self._address_pairs and batch.done:
                self._write_pairs(batch, add=add)
        for entry, reason in batch.failed.items():
            failed.extend((route, reason) for route in by_entry[entry])
        return failed

    def _write_router(self, entries: _Entries, *, add: bool) -> _Batch:
        batch = _Batch()
        for chunk in chunks(entries, limit=self._max_body_bytes):
            self._write_chunk(batch, chunk, add=add)
        return batch

    def _write_chunk(self, batch: _Batch, chunk: _Entries, *, add: bool) -> None:
        if add and batch.full is not None:
            batch.fail(chunk, batch.full)
            return
        try:
            self._update_router(chunk, add=add)
        except ProviderError as error:
            if add and limit_refusal(error):
                self._fit(batch, chunk, cause=error)
            elif len(chunk) > 1 and _splits(error):
                half = len(chunk) // 2
                self._write_chunk(batch, chunk[:half], add=add)
                self._write_chunk(batch, chunk[half:], add=add)
            else:
                batch.fail(chunk, error)
            return
        batch.done.extend(chunk)

    def _fit(self, batch: _Batch, chunk: _Entries, *, cause: ProviderError) -> None:
        """The router refused `chunk` for its route limit: add what still fits, fail the rest."""
        try:
            router = self._owner()
            limit = stated_limit(cause) or self._route_quota(router.project_id)
        except ProviderError as error:
            batch.fail(chunk, error)
            return
        held = len(router.routes)
        if limit is None:
            rest = self._fill(batch, chunk)
            limit = held + len(chunk) - len(rest)
        else:
            room = max(0, min(limit - held, len(chunk)))
            rest = chunk[room:]
            if room:
                # The room is known now: a smaller call cannot come back here forever.
                self._write_chunk(batch, chunk[:room], add=True)
        batch.full = RouteLimitReached(
            f"router {self._router_id} holds {held} routes and may hold at most {limit}"
            f" (Neutron's router_route quota or max_routes): {cause}",
            limit=limit,
        )
        batch.fail(rest, batch.full)
        log.warning("%s; %d route(s) not added", batch.full, len(rest))

    def _fill(self, batch: _Batch, chunk: _Entries) -> _Entries:
        """Add as much of `chunk` as the router takes, by halving the calls it refuses (the
        limit is unknown); the entries left out."""
        rest, size = chunk, len(chunk) // 2
        while rest and size:
            try:
                self._update_router(rest[:size], add=True)
            except ProviderError as error:
                if not limit_refusal(error):
                    batch.fail(rest[:size], error)
                    rest = rest[size:]
                size //= 2
                continue
            batch.done.extend(rest[:size])
            rest = rest[size:]
            size = min(size, len(rest))
        return rest

    def _owner(self) -> _RouterOwner:
        return self._client.call_json(
            _RouterOwnerEnvelope,
            "network",
            "GET",
            f"/routers/{self._router_id}",
            request="router_get",
        ).router

    def _route_quota(self, project_id: str) -> int | None:
        """The project's `router_route` quota, or None when it cannot be read or is unlimited."""
        if not project_id:
            return None
        try:
            quota = self._client.call_json(
                _QuotaEnvelope, "network", "GET", f"/quotas/{project_id}", request="quota_get"
            ).quota
        except ProviderError as error:
            log.info("cannot read the route quota of project %s: %s", project_id, error)
            return None
        return quota.router_route if quota.router_route > 0 else None

    def _update_router(self, entries: Sequence[RouterRoute], *, add: bool) -> None:
        if self._atomic:
            self._extraroutes("add" if add else "remove", entries)
            return
        current = self._router().routes
        if add:
            known = set(current)
            missing = [e for e in entries if e not in known]
            if missing:
                self._put_routes([*current, *missing])
            return
        gone = set(entries)
        kept = [r for r in current if r not in gone]
        if len(kept) != len(current):
            self._put_routes(kept)

    def _undo(self, entries: Sequence[RouterRoute], *, add: bool) -> None:
        """Take back the router change of `entries` (their pairs could not follow)."""
        for chunk in chunks(entries, limit=self._max_body_bytes):
            try:
                self._update_router(chunk, add=not add)
            except ProviderError as error:
                log.error("could not undo the router change of %d route(s): %s", len(chunk), error)

    # --- the router ------------------------------------------------------------------------------
    def _router(self) -> Router:
        return self._client.call_json(
            RouterEnvelope, "network", "GET", f"/routers/{self._router_id}", request="router_get"
        ).router

    def _put_routes(self, routes: Sequence[RouterRoute]) -> None:
        self._client.call(
            "network",
            "PUT",
            f"/routers/{self._router_id}",
            request="router_update",
            body=_body(routes),
        )

    def _extraroutes(self, action: str, entries: Sequence[RouterRoute]) -> None:
        self._client.call(
            "network",
            "PUT",
            f"/routers/{self._router_id}/{action}_extraroutes",
            request=f"router_{action}_extraroutes",
            body=_body(entries),
        )

    # --- allowed address pairs -------------------------------------------------------------------
    def _write_pairs(self, batch: _Batch, *, add: bool) -> None:
        """Give (take) each done entry's pod CIDR to (from) its next hop's port; an entry whose
        port cannot be written is undone on the router and fails."""
        by_hop: dict[str, _Entries] = defaultdict(list)
        for entry in batch.done:
            by_hop[entry.nexthop].append(entry)
        ports: dict[str, Port] = {}
        missing: dict[str, ProviderError] = {}
        try:
            ports, missing = self._ports_holding(list(by_hop))
        except ProviderError as lookup_failed:
            missing = dict.fromkeys(by_hop, lookup_failed)
        undone: dict[RouterRoute, ProviderError] = {}
        for hop, missed in missing.items():
            # Removing: a port that is gone took its pairs with it.
            if add or not isinstance(missed, CloudNotFound):
                undone.update(dict.fromkeys(by_hop[hop], missed))
        updates = _pair_updates(ports, by_hop, add=add)
        errors = concurrently(
            self._set_pairs, updates, limit=PORT_UPDATES_IN_FLIGHT, name="route-port"
        )
        for update, failed in zip(updates, errors, strict=True):
            if failed is not None:
                undone.update(dict.fromkeys(update.entries, failed))
        if undone:
            self._undo(list(undone), add=add)
            batch.done = [e for e in batch.done if e not in undone]
            batch.failed.update(undone)

    def _networks(self, *, refresh: bool = False) -> frozenset[str]:
        if self._router_networks is None or refresh:
            ports = list_ports(self._client, {"device_id": self._router_id})
            self._router_networks = frozenset(p.network_id for p in ports)
        return self._router_networks

    def _ports_holding(
        self, addresses: Sequence[str]
    ) -> tuple[dict[str, Port], dict[str, ProviderError]]:
        """The one port on a router network holding each address; the addresses without
        one (CloudNotFound), or with several (CloudError)."""
        found: dict[str, Port] = {}
        missing: dict[str, ProviderError] = {}
        known: frozenset[str] = frozenset()
        for refresh in (False, True):
            networks = self._networks(refresh=refresh)
            if refresh and networks == known:
                break  # the same networks: listing them again would find the same ports
            known = networks
            wanted = [a for a in addresses if a not in found]
            holders = self._holders(wanted, networks)
            missing = {}
            for address in wanted:
                matches = holders.get(address, [])
                if len(matches) == 1:
                    found[address] = matches[0]
                elif matches:
                    missing[address] = CloudError(
                        f"{len(matches)} ports on the router's networks hold {address}"
                    )
                else:
                    missing[address] = CloudNotFound(
                        f"no port on the router's networks holds {address}"
                    )
            if not missing:
                break
        return found, missing

    def _holders(self, addresses: Sequence[str], networks: frozenset[str]) -> dict[str, _Ports]:
        """address -> the ports on `networks` holding it."""
        if not addresses or not networks:
            return {}
        if len(addresses) <= LOOKUPS_ONE_BY_ONE:
            listed: dict[str, _Ports] = {}

            def query(address: str) -> None:
                listed[address] = list_ports(self._client, {"fixed_ips": [f"ip_address={address}"]})

            for error in concurrently(
                query, addresses, limit=LOOKUPS_ONE_BY_ONE, name="route-port"
            ):
                if error is not None:
                    raise error
            ports: Iterable[Port] = (p for found in listed.values() for p in found)
        else:
            ports = list_ports(
                self._client, {"network_id": sorted(networks), "fields": PORT_FIELDS}
            )
        wanted = set(addresses)
        holders: dict[str, dict[str, Port]] = defaultdict(dict)
        for port in ports:
            if port.network_id not in networks:
                continue
            for fixed in port.fixed_ips:
                if fixed.ip_address in wanted:
                    holders[fixed.ip_address][port.id] = port
        return {address: list(by_id.values()) for address, by_id in holders.items()}

    def _set_pairs(self, update: _PairUpdate) -> None:
        body = {"port": {"allowed_address_pairs": [_pair(p) for p in update.pairs]}}
        self._client.call(
            "network", "PUT", f"/ports/{update.port_id}", request="port_update", body=body
        )


@dataclass(frozen=True)
class _PairUpdate:
    port_id: str
    pairs: tuple[AddressPair, ...]
    # The router entries this write is for: undone if it fails.
    entries: tuple[RouterRoute, ...]


def _pair_updates(
    ports: dict[str, Port], by_hop: dict[str, list[RouterRoute]], *, add: bool
) -> list[_PairUpdate]:
    """One write per port whose pairs change (a port can be the next hop of several routes)."""
    by_port: dict[str, tuple[Port, list[RouterRoute]]] = {}
    for hop, port in ports.items():
        by_port.setdefault(port.id, (port, []))[1].extend(by_hop[hop])
    updates = []
    for port, entries in by_port.values():
        if port.port_security_enabled is False:
            continue
        destinations = {e.destination for e in entries}
        have = port.allowed_address_pairs
        if add:
            present = {p.ip_address for p in have}
            new = [AddressPair(ip_address=d) for d in sorted(destinations - present)]
            pairs = (*have, *new)
        else:
            pairs = tuple(p for p in have if p.ip_address not in destinations)
        if len(pairs) != len(have):
            updates.append(_PairUpdate(port_id=port.id, pairs=pairs, entries=tuple(entries)))
    return updates


def _entry(route: Route, *, add: bool) -> RouterRoute:
    # A blackhole's next hop is its target: no node owns that address any more.
    hop = route.target_node if route.blackhole and not add else next_hop(route)
    return RouterRoute(destination=route.destination_cidr, nexthop=hop)


def _failures(failed: list[tuple[Route, ProviderError]]) -> tuple[RouteFailure, ...]:
    return tuple(
        RouteFailure(
            route=route,
            error=str(error),
            route_limit=error.limit if isinstance(error, RouteLimitReached) else None,
        )
        for route, error in failed
    )


def add_router_tag(client: OpenStackClient, router_id: str, tag: str) -> None:
    # `PUT /v2.0/routers/{id}/tags/{tag}`: 201 whether or not the router had the tag.
    client.call(
        "network", "PUT", f"/routers/{router_id}/tags/{tag}", request="router_tag_add", ok=(201,)
    )


def remove_router_tag(client: OpenStackClient, router_id: str, tag: str) -> None:
    """`DELETE /v2.0/routers/{id}/tags/{tag}`; a tag already gone is fine."""
    try:
        client.call(
            "network",
            "DELETE",
            f"/routers/{router_id}/tags/{tag}",
            request="router_tag_delete",
            ok=(204,),
        )
    except CloudNotFound:
        return


def _pair(pair: AddressPair) -> dict[str, str]:
    out = {"ip_address": pair.ip_address}
    if pair.mac_address:
        out["mac_address"] = pair.mac_address
    return out
