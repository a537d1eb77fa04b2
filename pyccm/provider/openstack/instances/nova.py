"""Upstream's InstancesV2 on Nova and Neutron (docs/upstream.md#instances), with one fix.

* providerID `openstack:///<uuid>` or `openstack://<region>/<uuid>`; a value without a
  scheme is read as `openstack://<value>`, and a bare server UUID is accepted too;
* without a providerID the server is looked up by name with Nova's regex filter, anchored
  (`^name$`): several hits are `AmbiguousInstance`, none is `InstanceNotFound`. **Better
  than upstream**, which returns a generic error there, so a Node whose server was deleted
  before it got a providerID is never cleaned up (kubernetes/cloud-provider-openstack#2999,
  kubernetes/cloud-provider-openstack#3114);
* only `SHUTOFF` is "shut down";
* instance type from the flavor: `original_name` (embedded by Nova ≥ 2.47), else the
  flavor's name, else its id; zone from the server's AZ, sanitised into a label value;
  region from `[Global] region`; addresses by `provider.openstack.addresses`.

Calls per metadata lookup: GET server + GET ports (+ 2 per trunk subport). Upstream also
GETs the flavor, because gophercloud sends no compute microversion; this provider asks
for microversion 2.47 when Nova offers it, so the flavor's name comes with the server.
Where it must GET a flavor, the answer is cached: flavors are immutable in Nova.

`instances_metadata` answers `instance_metadata` for many nodes at once (the node worker's
batch of nodes waiting to be initialized): one paged `GET /servers/detail` for the servers
and `GET /ports` with `PORTS_PER_CALL` repeated `device_id` filters for their ports (Neutron
ORs repeated filters; `PORT_LISTS_AT_ONCE` lists at a time), so 5,000 nodes cost 5 + 100
calls instead of 10,000. A chunk of 50 servers has its port list asked as soon as the
page that completes it has landed, and its nodes' answers are delivered when that list
has: the first answers come after one page and one port list, not after every call
(nodes without a providerID are placed by name once the whole listing is in, since a name
must be held by one server only). Each node's metadata is built by the same code from the
same documents as its own lookup's. A node the listing cannot place (its server is missing or
was created after the listing, its name is shared) is left out: its caller looks it up
alone, which is what says InstanceNotFound or AmbiguousInstance.

`instance_listing` answers `instance_exists` / `instance_shutdown` for many nodes from one
paged `GET /servers/detail` (`SERVER_PAGE` servers a page, Nova's own cap): 5 calls for
5,000 nodes where upstream's lifecycle loop makes one GET per NotReady node. A node is
matched by its providerID's server id, or, without one, by an exact name held by exactly
one server, the rules of the per-node lookups. A node it cannot place is left out, never
reported gone: its caller asks `instance_exists` about it alone.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import msgspec

from pyccm.protocol.views import Node
from pyccm.provider.errors import (
    AmbiguousInstance,
    CloudError,
    CloudNotFound,
    InstanceNotFound,
    InvalidProviderId,
    ProviderError,
)
from pyccm.provider.interface import InstanceListing, InstanceMetadata, ProviderId
from pyccm.provider.openstack.common.concurrency import concurrently
from pyccm.provider.openstack.common.ports import list_ports
from pyccm.provider.openstack.common.provider_ids import SCHEME, parse_provider_id
from pyccm.provider.openstack.common.resources import (
    FlavorEnvelope,
    NetworkEnvelope,
    Port,
    PortEnvelope,
    Server,
    ServerEnvelope,
)
from pyccm.provider.openstack.config import LiveSettings, OpenStackSettings
from pyccm.provider.openstack.instances.addresses import node_addresses
from pyccm.provider.openstack.transport.client import OpenStackClient

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ZONE_BAD_RUNS = re.compile(r"[^-A-Za-z0-9_.]+")
# Nova ≥ 2.47 embeds the flavor (with `original_name`) in the server.
FLAVOR_MICROVERSION = (2, 47)
# Go's regexp.QuoteMeta set: Nova matches `name` as a regex.
_REGEX_SPECIALS = set("\\.+*?()|[]{}^$")
# Servers per page of a listing: Nova's default `[api] max_limit` (it caps any larger ask).
SERVER_PAGE = 1000
# Servers whose ports one `GET /ports` asks for: 50 `device_id=<uuid>` filters are ~2.4 kB
# of query, inside the 4 kB request line of a Neutron behind uWSGI's default buffer-size.
PORTS_PER_CALL = 50
# Port lists in flight at once for one batch: one after the other, 100 lists (5,000 nodes)
# took 50 s before the first node's answer on a simulator busy with member updates.
PORT_LISTS_AT_ONCE = 8


class ListedServer(msgspec.Struct, frozen=True):
    """The three fields a listing is read for: thousands of servers decode in milliseconds."""

    id: str
    name: str = ""
    status: str = ""


# A listing's item: the lean `ListedServer` (lifecycle) or the whole `Server` (metadata).
AnyServer = TypeVar("AnyServer", ListedServer, Server)


def quote_meta(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_SPECIALS else c for c in text)


def sanitize_zone(zone: str) -> str:
    """An availability zone as a label value: bad runs → `-`, trimmed, at most 63 chars."""
    return _ZONE_BAD_RUNS.sub("-", zone).strip("-_.")[:63]


def is_label_value(text: str) -> bool:
    return len(text) <= 63 and _LABEL_VALUE.match(text) is not None


class OpenStackInstances:
    def __init__(self, *, client: OpenStackClient, settings: LiveSettings) -> None:
        self._client = client
        self._live = settings
        self._flavor_lock = threading.Lock()
        self._flavor_names: dict[str, str] = {}

    @property
    def _settings(self) -> OpenStackSettings:
        """`cloud.conf` in force now: `[Networking]` and the region of a reload apply from
        the next call."""
        return self._live.current

    # --- InstancesV2 ---------------------------------------------------------------------------
    def instance_exists(self, *, node: Node) -> bool:
        try:
            self._server(node)
        except InstanceNotFound:
            return False
        return True

    def instance_shutdown(self, *, node: Node) -> bool:
        return self._server(node).status == "SHUTOFF"

    def instance_listing(self, *, nodes: Sequence[Node]) -> InstanceListing:
        if not nodes:
            return InstanceListing()
        servers = self._client.list_all(
            ListedServer,
            "compute",
            "/servers/detail",
            key="servers",
            request="server_list",
            params={"limit": SERVER_PAGE},
        )
        found: set[str] = set()
        shutdown: set[str] = set()
        for name, listed in self._placed(nodes, servers).items():
            found.add(name)
            if listed.status == "SHUTOFF":
                shutdown.add(name)
        return InstanceListing(found=frozenset(found), shutdown=frozenset(shutdown))

    def instances_metadata(
        self,
        *,
        nodes: Sequence[Node],
        deliver: Callable[[dict[str, InstanceMetadata]], None] | None = None,
    ) -> dict[str, InstanceMetadata]:
        """`instance_metadata` of every node the listing places, by node name; each chunk's
        answers also go to `deliver` as soon as its server page and its port list landed."""
        answers: dict[str, InstanceMetadata] = {}
        lock = threading.Lock()

        def answer(chunk: list[tuple[Server, list[str]]]) -> None:
            ports = self._ports_of_servers([server.id for server, _ in chunk])
            landed = {
                name: self._metadata(server, ports.get(server.id, []))
                for server, names in chunk
                for name in names
            }
            with lock:
                answers.update(landed)
            if deliver is not None:
                deliver(landed)

        if nodes:
            errors = concurrently(
                answer, self._chunks(nodes), limit=PORT_LISTS_AT_ONCE, name="instance-ports"
            )
            failed = next((error for error in errors if error is not None), None)
            if failed is not None:
                raise failed
        return answers

    def _chunks(self, nodes: Sequence[Node]) -> Iterator[list[tuple[Server, list[str]]]]:
        """The listed servers of `nodes` with the names of the nodes each is, `PORTS_PER_CALL`
        servers a chunk, each chunk as soon as the pages that hold it have landed. A node is
        placed by its providerID's server id, or, without one, by an exact name held by
        exactly one server of the whole listing (known once every page is in)."""
        by_id: dict[str, list[str]] = defaultdict(list)
        unnamed: set[str] = set()
        for node in nodes:
            if not node.spec.provider_id:
                unnamed.add(node.name)
                continue
            server_id = self._server_id(node)
            if server_id is not None:
                by_id[server_id].append(node.name)
        named: dict[str, list[Server]] = defaultdict(list)
        ready: list[tuple[Server, list[str]]] = []
        pages = self._client.pages(
            Server,
            "compute",
            "/servers/detail",
            key="servers",
            request="server_list",
            params={"limit": SERVER_PAGE},
            microversion=self._compute_microversion(),
        )
        for page in pages:
            for server in page:
                if server.name in unnamed:
                    named[server.name].append(server)
                if server.id in by_id:
                    ready.append((server, by_id.pop(server.id)))
            while len(ready) >= PORTS_PER_CALL:
                yield ready[:PORTS_PER_CALL]
                ready = ready[PORTS_PER_CALL:]
        ready += [(servers[0], [name]) for name, servers in named.items() if len(servers) == 1]
        for start in range(0, len(ready), PORTS_PER_CALL):
            yield ready[start : start + PORTS_PER_CALL]

    def _server_id(self, node: Node) -> str | None:
        """The server id of a node's providerID, or None when it names another region or is
        not one."""
        try:
            region, server_id = parse_provider_id(node.spec.provider_id)
        except InvalidProviderId:
            return None
        if region and region != self._settings.global_.region:
            return None
        return server_id

    def _placed(self, nodes: Sequence[Node], servers: Sequence[AnyServer]) -> dict[str, AnyServer]:
        """Each node's server in a listing, by node name; a node the listing cannot tell
        about is left out."""
        by_id = {server.id: server for server in servers}
        by_name: dict[str, list[AnyServer]] = defaultdict(list)
        for server in servers:
            by_name[server.name].append(server)
        placed: dict[str, AnyServer] = {}
        for node in nodes:
            listed = self._listed(node, by_id, by_name)
            if listed is not None:
                placed[node.name] = listed
        return placed

    def _listed(
        self,
        node: Node,
        by_id: dict[str, AnyServer],
        by_name: dict[str, list[AnyServer]],
    ) -> AnyServer | None:
        """The node's server in the listing, or None when the listing cannot tell."""
        if not node.spec.provider_id:
            named = by_name.get(node.name, [])
            return named[0] if len(named) == 1 else None
        server_id = self._server_id(node)
        return None if server_id is None else by_id.get(server_id)

    def instance_metadata(self, *, node: Node) -> InstanceMetadata:
        server = self._server(node)
        return self._metadata(server, self._ports(server.id))

    def _metadata(self, server: Server, ports: list[Port]) -> InstanceMetadata:
        settings = self._settings
        addresses = node_addresses(
            server=server,
            ports=ports,
            subport_addresses=self._subport_addresses(ports),
            networking=settings.networking,
        )
        region = settings.global_.region
        prefix = f"{SCHEME}://{region}/" if settings.regional else f"{SCHEME}:///"
        return InstanceMetadata(
            provider_id=ProviderId(prefix + server.id),
            instance_type=self._instance_type(server),
            node_addresses=addresses,
            zone=sanitize_zone(server.availability_zone),
            region=region,
        )

    # --- lookups ----------------------------------------------------------------------------------
    def _server(self, node: Node) -> Server:
        if not node.spec.provider_id:
            return self._server_by_name(node.name)
        region, server_id = parse_provider_id(node.spec.provider_id)
        configured = self._settings.global_.region
        if region and region != configured:
            raise InvalidProviderId(
                f"providerID {node.spec.provider_id!r} names region {region!r}, not {configured!r}"
            )
        try:
            envelope = self._client.call_json(
                ServerEnvelope,
                "compute",
                "GET",
                f"/servers/{server_id}",
                request="server_get",
                microversion=self._compute_microversion(),
            )
        except CloudNotFound as exc:
            raise InstanceNotFound(f"server {server_id} of node {node.name} not found") from exc
        return envelope.server

    def _servers(self, params: dict[str, str | int]) -> list[Server]:
        """Every server `params` selects, whole (with the negotiated microversion)."""
        return self._client.list_all(
            Server,
            "compute",
            "/servers/detail",
            key="servers",
            request="server_list",
            params=params,
            microversion=self._compute_microversion(),
        )

    def _server_by_name(self, name: str) -> Server:
        servers = self._servers({"name": f"^{quote_meta(name)}$"})
        if not servers:
            raise InstanceNotFound(f"no server named {name!r}")
        if len(servers) > 1:
            raise AmbiguousInstance(f"{len(servers)} servers are named {name!r}")
        return servers[0]

    def _compute_microversion(self) -> str | None:
        """2.47 when Nova offers it, else none. Nova's version document is read once per
        connection (`Connection.compute_microversion`; a failed read is asked again)."""
        highest = self._client.compute_microversion()
        return "2.47" if highest is not None and highest >= FLAVOR_MICROVERSION else None

    def _ports(self, server_id: str) -> list[Port]:
        return list_ports(self._client, {"device_id": server_id})

    def _ports_of_servers(self, server_ids: Sequence[str]) -> dict[str, list[Port]]:
        """The ports of a chunk of servers (`PORTS_PER_CALL` at most) by server id, from one
        listing; each server's ports keep the order of the answer, as `_ports` gives them."""
        found: dict[str, list[Port]] = {}
        for port in list_ports(self._client, {"device_id": list(server_ids)}):
            found.setdefault(port.device_id, []).append(port)
        return found

    def _subport_addresses(self, ports: list[Port]) -> dict[str, list[str]]:
        """Fixed IPs of trunk subports by network name. Failures are skipped, as upstream."""
        found: dict[str, list[str]] = {}
        for port in ports:
            for sub in port.trunk_details.sub_ports if port.trunk_details else []:
                try:
                    subport = self._client.call_json(
                        PortEnvelope, "network", "GET", f"/ports/{sub.port_id}", request="port_get"
                    ).port
                    network = self._client.call_json(
                        NetworkEnvelope,
                        "network",
                        "GET",
                        f"/networks/{subport.network_id}",
                        request="network_get",
                    ).network
                except ProviderError:
                    continue
                found.setdefault(network.name, []).extend(ip.ip_address for ip in subport.fixed_ips)
        return found

    def _instance_type(self, server: Server) -> str:
        flavor = server.flavor
        if flavor is None or not (flavor.original_name or flavor.id):
            raise CloudError(f"server {server.id} has no flavor", retryable=False)
        if flavor.original_name and is_label_value(flavor.original_name):
            return flavor.original_name
        if not flavor.id:
            raise CloudError(
                f"server {server.id}: flavor name is not a label value", retryable=False
            )
        return self._flavor_name(flavor.id)

    def _flavor_name(self, flavor_id: str) -> str:
        # One GET per flavor even when a batch's chunks ask at once: flavors are few and
        # immutable, so their lookups may wait for each other.
        with self._flavor_lock:
            cached = self._flavor_names.get(flavor_id)
            if cached is not None:
                return cached
            envelope = self._client.call_json(
                FlavorEnvelope, "compute", "GET", f"/flavors/{flavor_id}", request="flavor_get"
            )
            name = envelope.flavor.name if is_label_value(envelope.flavor.name) else flavor_id
            self._flavor_names[flavor_id] = name
        return name
