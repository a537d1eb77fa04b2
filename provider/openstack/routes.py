"""Pod-network routes on a Neutron router (reference §4).

* With `extraroute-atomic`, routes are added and removed with the atomic
  `add_extraroutes` / `remove_extraroutes` calls; without it, the router's whole `routes`
  list is read and written back under a lock, so two sync threads never lose each
  other's update (upstream's process-wide mutex; one route worker per cluster makes the
  lock process-wide enough).
* With `allowed-address-pairs`, the next hop's port gets the pod CIDR as an allowed address
  pair (unless port security is off); a failure there undoes the route change.
* The next hop is the target node's first InternalIP of the destination's family; a route
  whose next hop no node owns is reported as a blackhole.

Improvements on upstream: the next hop's port is found with one query
(`fixed_ips=ip_address=<ip>`, filtered to the router's networks) instead of one per router
network, and deleting a route whose node port is already gone succeeds instead of rolling
the route back forever.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable, Sequence

from protocol.views import Node
from provider.errors import CloudError, CloudNotFound
from provider.interface import Route
from provider.openstack.client import OpenStackClient
from provider.openstack.resources import (
    AddressPair,
    Port,
    Router,
    RouterEnvelope,
    RouterRoute,
)

Undo = Callable[[], None]


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


def _body(routes: Sequence[RouterRoute]) -> dict[str, dict[str, list[dict[str, str]]]]:
    return {
        "router": {"routes": [{"destination": r.destination, "nexthop": r.nexthop} for r in routes]}
    }


class OpenStackRoutes:
    def __init__(
        self,
        *,
        client: OpenStackClient,
        router_id: str,
        atomic: bool,
        address_pairs: bool,
    ) -> None:
        self._client = client
        self._router_id = router_id
        self._atomic = atomic
        self._address_pairs = address_pairs
        # Serialises read-modify-writes of the router's routes and of node ports' pairs.
        self._lock = threading.Lock()
        self._router_networks: frozenset[str] | None = None

    # --- Routes ----------------------------------------------------------------------------------
    def list(self, *, nodes: Sequence[Node]) -> tuple[Route, ...]:
        owners = {a.address: node for node in nodes for a in node.status.addresses}
        routes = []
        for entry in self._router().routes:
            owner = owners.get(entry.nexthop)
            routes.append(
                Route(
                    name=entry.destination,
                    target_node=owner.name if owner else entry.nexthop,
                    destination_cidr=entry.destination,
                    blackhole=owner is None,
                    target_node_addresses=owner.status.addresses if owner else (),
                )
            )
        return tuple(routes)

    def create(self, *, name_hint: str, route: Route) -> None:
        entry = RouterRoute(destination=route.destination_cidr, nexthop=next_hop(route))
        undo = self._add_route(entry)
        if not self._address_pairs:
            return
        try:
            self._add_address_pair(entry)
        except Exception:
            if undo is not None:
                undo()
            raise

    def delete(self, *, route: Route) -> None:
        hop = route.target_node if route.blackhole else next_hop(route)
        entry = RouterRoute(destination=route.destination_cidr, nexthop=hop)
        undo = self._remove_route(entry)
        # A blackhole's node is gone from the cluster, but its server (and the port holding
        # the pair) may live on: the pair goes with the route, as upstream does.
        if not self._address_pairs:
            return
        try:
            self._remove_address_pair(entry)
        except Exception:
            if undo is not None:
                undo()
            raise

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

    def _extraroutes(self, action: str, entry: RouterRoute) -> None:
        self._client.call(
            "network",
            "PUT",
            f"/routers/{self._router_id}/{action}_extraroutes",
            request=f"router_{action}_extraroutes",
            body=_body([entry]),
        )

    def _add_route(self, entry: RouterRoute) -> Undo | None:
        """Add `entry`; returns how to take it back (None when it was already there)."""
        if self._atomic:
            self._extraroutes("add", entry)
            return lambda: self._extraroutes("remove", entry)
        with self._lock:
            current = list(self._router().routes)
            if entry in current:
                return None
            self._put_routes([*current, entry])
        return lambda: self._restore(current)

    def _remove_route(self, entry: RouterRoute) -> Undo | None:
        if self._atomic:
            self._extraroutes("remove", entry)
            return lambda: self._extraroutes("add", entry)
        with self._lock:
            current = list(self._router().routes)
            if entry not in current:
                return None
            self._put_routes([r for r in current if r != entry])
        return lambda: self._restore(current)

    def _restore(self, routes: Sequence[RouterRoute]) -> None:
        with self._lock:
            self._put_routes(routes)

    # --- allowed address pairs -------------------------------------------------------------------
    def _networks(self, *, refresh: bool = False) -> frozenset[str]:
        if self._router_networks is None or refresh:
            ports = self._client.list_all(
                Port,
                "network",
                "/ports",
                key="ports",
                request="port_list",
                params={"device_id": self._router_id},
            )
            self._router_networks = frozenset(p.network_id for p in ports)
        return self._router_networks

    def _port_of(self, address: str) -> Port:
        """The one port on a router network holding `address` (CloudNotFound if none)."""
        ports = self._client.list_all(
            Port,
            "network",
            "/ports",
            key="ports",
            request="port_list",
            params={"fixed_ips": [f"ip_address={address}"]},
        )
        for refresh in (False, True):
            networks = self._networks(refresh=refresh)
            matches = [p for p in ports if p.network_id in networks]
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise CloudError(f"{len(matches)} ports on the router's networks hold {address}")
        raise CloudNotFound(f"no port on the router's networks holds {address}")

    def _set_pairs(self, port: Port, pairs: Sequence[AddressPair]) -> None:
        body = {"port": {"allowed_address_pairs": [_pair(p) for p in pairs]}}
        self._client.call("network", "PUT", f"/ports/{port.id}", request="port_update", body=body)

    def _add_address_pair(self, entry: RouterRoute) -> None:
        with self._lock:
            port = self._port_of(entry.nexthop)
            if port.port_security_enabled is False:
                return
            if any(p.ip_address == entry.destination for p in port.allowed_address_pairs):
                return
            self._set_pairs(
                port, [*port.allowed_address_pairs, AddressPair(ip_address=entry.destination)]
            )

    def _remove_address_pair(self, entry: RouterRoute) -> None:
        with self._lock:
            try:
                port = self._port_of(entry.nexthop)
            except CloudNotFound:
                return  # the node's port is gone, and its pairs with it
            if port.port_security_enabled is False:
                return
            kept = [p for p in port.allowed_address_pairs if p.ip_address != entry.destination]
            if len(kept) != len(port.allowed_address_pairs):
                self._set_pairs(port, kept)


def _pair(pair: AddressPair) -> dict[str, str]:
    out = {"ip_address": pair.ip_address}
    if pair.mac_address:
        out["mac_address"] = pair.mac_address
    return out
