"""Nova (compute v2.1): servers and flavors, with microversion negotiation.

The CCM finds a node's server by name regex or id, reads its status (SHUTOFF means shut
down), flavor, availability zone, access IPs, metadata and `addresses`. Addresses are not
stored here: they are computed from the server's Neutron ports and their floating IPs on
every read, so associating a floating IP through Neutron shows up as a `floating` address,
as in a real cloud. The flavor is `{"id", "links"}` below microversion 2.47 and embedded
with `original_name` from 2.47 on; the maximum is a knob so both provider paths are tested.
"""

from __future__ import annotations

import re
from typing import Any

from pyccm_sim.openstack.errors import ApiError, bad_request, conflict, not_found
from pyccm_sim.openstack.neutron import Neutron
from pyccm_sim.openstack.pagination import Page, nova_page
from pyccm_sim.openstack.routing import NO_CONTENT, Handler, Reply, Req, Route, ok
from pyccm_sim.openstack.settings import Knobs, version_minor
from pyccm_sim.openstack.store import Counters, Ids, Record, Table, now_iso

PREFIX = "/compute/v2.1"
MIN_MINOR = 1
EMBEDDED_FLAVOR_MINOR = 47
UPDATED = "2013-07-23T11:33:21Z"
POWER_STATES = {"ACTIVE": 1, "SHUTOFF": 4, "PAUSED": 3, "SUSPENDED": 7, "ERROR": 0}
VM_STATES = {
    "ACTIVE": "active",
    "SHUTOFF": "stopped",
    "PAUSED": "paused",
    "SUSPENDED": "suspended",
    "ERROR": "error",
    "SHELVED_OFFLOADED": "shelved_offloaded",
    "BUILD": "building",
}
REGEX_SPECIALS = frozenset("\\.+*?()|[]{}^$")
# Filters Nova applies itself; everything else in the query is tolerated and ignored.
SERVER_FILTERS = ("name", "status", "availability_zone", "flavor", "uuid")


def _server_missing(server_id: str) -> ApiError:
    return not_found(f"Instance {server_id} could not be found.")


def _flavor_missing(flavor_id: str) -> ApiError:
    return not_found(f"Flavor {flavor_id} could not be found.")


class Nova:
    def __init__(
        self,
        *,
        ids: Ids,
        counters: Counters,
        knobs: Knobs,
        neutron: Neutron,
        project_id: str,
        user_id: str,
    ) -> None:
        self._ids = ids
        self._knobs = knobs
        self._neutron = neutron
        self._project_id = project_id
        self._user_id = user_id
        # pyccm finds a node's server by `name=^<node>$`: that regex uses the name index.
        self.servers = Table("server", counters, indexed={"name": "name"})
        self.flavors = Table("flavor", counters)
        self.image_id = ids.uuid()
        # Servers in Nova's list order (oldest first; the page reverses it), rebuilt
        # after a create or delete, so a page costs the page, not a sort of every server.
        self._ordered: list[Record] | None = None
        self._flavor_refs: dict[tuple[str, bool, str], Record] = {}

    def create_flavor(
        self, flavor_id: str, name: str, *, vcpus: int, ram: int, disk: int
    ) -> Record:
        self._flavor_refs.clear()
        return self.flavors.insert(
            {
                "id": flavor_id,
                "name": name,
                "vcpus": vcpus,
                "ram": ram,
                "disk": disk,
                "OS-FLV-EXT-DATA:ephemeral": 0,
                "swap": 0,
                "rxtx_factor": 1.0,
                "os-flavor-access:is_public": True,
                "OS-FLV-DISABLED:disabled": False,
            }
        )

    def create_server(
        self,
        name: str,
        *,
        flavor_id: str,
        zone: str,
        network_id: str,
        fixed_ip: str | None,
        status: str = "ACTIVE",
        metadata: dict[str, str] | None = None,
        access_ipv4: str = "",
        access_ipv6: str = "",
    ) -> Record:
        self.flavors.require(flavor_id, _flavor_missing)
        stamp = now_iso()
        server: Record = {
            "id": self._ids.uuid(),
            "name": name,
            "status": status,
            "flavor_id": flavor_id,
            "zone": zone,
            "metadata": dict(metadata or {}),
            "accessIPv4": access_ipv4,
            "accessIPv6": access_ipv6,
            "created": stamp,
            "updated": stamp,
            "hostId": self._ids.hex()[:56],
        }
        fixed = [{"ip_address": fixed_ip}] if fixed_ip else None
        self._neutron.create_port(
            network_id, device_id=server["id"], device_owner=f"compute:{zone}", fixed_ips=fixed
        )
        self._ordered = None
        return self.servers.insert(server)

    def delete_server(self, server_id: str) -> None:
        self.servers.require(server_id, _server_missing)
        self._neutron.delete_device_ports(server_id)
        self._ordered = None
        self.servers.delete(server_id)

    def ordered(self) -> list[Record]:
        """Every server by `created, id` (Nova's order, reversed)."""
        if self._ordered is None:
            self._ordered = sorted(self.servers.rows.values(), key=_by_creation)
        return self._ordered

    def set_status(self, server_id: str, status: str) -> Record:
        server = self.servers.require(server_id, _server_missing)
        return self.servers.touch(server, {"status": status, "updated": now_iso()})

    def find_by_name(self, name: str) -> Record | None:
        return next(iter(self.servers.with_value("name", name)), None)

    def addresses(self, server_id: str) -> dict[str, list[dict[str, Any]]]:
        """Fixed and floating addresses per network name, from the server's ports."""
        result: dict[str, list[dict[str, Any]]] = {}
        for port in self._neutron.ports_of_device(server_id):
            network = self._neutron.networks.rows.get(port["network_id"])
            entries = result.setdefault(network["name"] if network else port["network_id"], [])
            for fixed in port["fixed_ips"]:
                version = 6 if ":" in fixed["ip_address"] else 4
                entries.append(
                    {
                        "version": version,
                        "addr": fixed["ip_address"],
                        "OS-EXT-IPS:type": "fixed",
                        "OS-EXT-IPS-MAC:mac_addr": port["mac_address"],
                    }
                )
            for fip in self._neutron.fips_of_port(port["id"]):
                entries.append(
                    {
                        "version": 4,
                        "addr": fip["floating_ip_address"],
                        "OS-EXT-IPS:type": "floating",
                        "OS-EXT-IPS-MAC:mac_addr": port["mac_address"],
                    }
                )
        return result

    def render(self, server: Record, *, minor: int, base_url: str) -> Record:
        status = server["status"]
        body: Record = {
            "id": server["id"],
            "name": server["name"],
            "status": status,
            "tenant_id": self._project_id,
            "user_id": self._user_id,
            "metadata": server["metadata"],
            "hostId": server["hostId"],
            "image": {"id": self.image_id},
            "flavor": self._flavor_ref(server["flavor_id"], minor=minor, base_url=base_url),
            "created": server["created"],
            "updated": server["updated"],
            "addresses": self.addresses(server["id"]),
            "accessIPv4": server["accessIPv4"],
            "accessIPv6": server["accessIPv6"],
            "links": _links(base_url, "servers", server["id"]),
            "OS-EXT-AZ:availability_zone": server["zone"],
            "OS-EXT-STS:power_state": POWER_STATES.get(status, 0),
            "OS-EXT-STS:vm_state": VM_STATES.get(status, status.lower()),
            "OS-EXT-STS:task_state": None,
            "OS-DCF:diskConfig": "MANUAL",
            "key_name": None,
            "config_drive": "",
            "progress": 0,
            "security_groups": [{"name": "default"}],
            "os-extended-volumes:volumes_attached": [],
            "OS-SRV-USG:launched_at": server["created"],
            "OS-SRV-USG:terminated_at": None,
        }
        if minor >= 9:
            body["locked"] = False
        if minor >= 19:
            body["description"] = None
        if minor >= 26:
            body["tags"] = []
        return body

    def _flavor_ref(self, flavor_id: str, *, minor: int, base_url: str) -> Record:
        # One rendering per flavor, version and host, shared by every server of a list.
        key = (flavor_id, minor >= EMBEDDED_FLAVOR_MINOR, base_url)
        ref = self._flavor_refs.get(key)
        if ref is None:
            ref = self._flavor_refs[key] = self._render_flavor_ref(
                flavor_id, minor=minor, base_url=base_url
            )
        return ref

    def _render_flavor_ref(self, flavor_id: str, *, minor: int, base_url: str) -> Record:
        flavor = self.flavors.get(flavor_id)
        if minor < EMBEDDED_FLAVOR_MINOR or flavor is None:
            return {
                "id": flavor_id,
                "links": [{"rel": "bookmark", "href": f"{base_url}/compute/flavors/{flavor_id}"}],
            }
        return {
            "vcpus": flavor["vcpus"],
            "ram": flavor["ram"],
            "disk": flavor["disk"],
            "ephemeral": 0,
            "swap": 0,
            "original_name": flavor["name"],
            "extra_specs": {},
        }


def exact_name(pattern: str) -> str | None:
    """The one name an anchored literal regex (`^node\\.1$`, Go's QuoteMeta) matches, else
    None; such a filter can use the name index."""
    if len(pattern) < 2 or pattern[0] != "^" or pattern[-1] != "$" or pattern.endswith("\\$"):
        return None
    literal = []
    chars = iter(pattern[1:-1])
    for char in chars:
        if char == "\\":
            escaped = next(chars, "")
            if escaped.isalnum() or not escaped:
                return None
            literal.append(escaped)
        elif char in REGEX_SPECIALS:
            return None
        else:
            literal.append(char)
    return "".join(literal)


def _by_creation(row: Record) -> tuple[str, str]:
    return (row["created"], row["id"])


def _by_id(row: Record) -> str:
    return str(row["id"])


def _with_links(collection: str, rows: list[Record], page: Page) -> Record:
    """`{collection: rows}`, plus `<collection>_links` only when Nova has a next page."""
    body: Record = {collection: rows}
    if page.links:
        body[f"{collection}_links"] = page.links
    return body


def _links(base_url: str, collection: str, item_id: str) -> list[dict[str, str]]:
    return [
        {"rel": "self", "href": f"{base_url}{PREFIX}/{collection}/{item_id}"},
        {"rel": "bookmark", "href": f"{base_url}/compute/{collection}/{item_id}"},
    ]


def negotiate(headers: Any, knobs: Knobs) -> int:
    """The microversion minor a request asked for (2.1 when it did not ask), or 406."""
    maximum = version_minor(knobs.nova_max_microversion)
    raw = headers.get("OpenStack-API-Version")
    requested = None
    if raw:
        service, _, value = raw.strip().partition(" ")
        if service.lower() == "compute":
            requested = value.strip()
    if requested is None:
        requested = headers.get("X-OpenStack-Nova-API-Version")
    if not requested:
        return MIN_MINOR
    if requested == "latest":
        return maximum
    try:
        minor = version_minor(requested)
    except ValueError:
        raise bad_request(f"Invalid format of version string {requested!r}.") from None
    if not MIN_MINOR <= minor <= maximum:
        raise ApiError(
            406,
            f"Version 2.{minor} is not supported by the API. Minimum is 2.{MIN_MINOR} and "
            f"maximum is 2.{maximum}.",
        )
    return minor


def _version_doc(base_url: str, knobs: Knobs) -> Record:
    return {
        "id": "v2.1",
        "status": "CURRENT",
        "version": knobs.nova_max_microversion,
        "min_version": f"2.{MIN_MINOR}",
        "updated": UPDATED,
        "links": [{"rel": "self", "href": f"{base_url}{PREFIX}/"}],
        "media-types": [
            {
                "base": "application/json",
                "type": "application/vnd.openstack.compute+json;version=2.1",
            }
        ],
    }


class NovaApi:
    def __init__(self, nova: Nova, knobs: Knobs) -> None:
        self.nova = nova
        self.knobs = knobs

    def versions(self, req: Req) -> Reply:
        v20 = {
            "id": "v2.0",
            "status": "SUPPORTED",
            "version": "",
            "min_version": "",
            "updated": "2011-01-21T11:33:21Z",
            "links": [{"rel": "self", "href": f"{req.base_url}/compute/v2/"}],
        }
        return ok({"versions": [v20, _version_doc(req.base_url, self.knobs)]})

    def version(self, req: Req) -> Reply:
        return ok({"version": _version_doc(req.base_url, self.knobs)})

    def _matching(self, req: Req) -> list[Record]:
        """The servers the query's filters allow, in Nova's order (oldest first here)."""
        servers = self.nova.ordered()
        name = req.query.get("name")
        if name:
            try:
                pattern = re.compile(name)
            except re.error:
                raise bad_request(f"Invalid regular expression for name: {name!r}") from None
            literal = exact_name(name)
            if literal is not None:
                # `$` also matches before a final newline.
                named = [*self.nova.servers.with_value("name", literal)]
                named += self.nova.servers.with_value("name", literal + "\n")
                servers = sorted(named, key=_by_creation)
            servers = [s for s in servers if pattern.search(s["name"])]
        filters = {
            "status": "status",
            "availability_zone": "zone",
            "flavor": "flavor_id",
            "uuid": "id",
        }
        for param, key in filters.items():
            value = req.query.get(param)
            if value:
                servers = [
                    s for s in servers if str(s[key]).upper() == value.upper() or s[key] == value
                ]
        return servers

    def _page(self, req: Req, rows: list[Record], collection: str, *, servers: bool) -> Page:
        return nova_page(
            rows,
            req.query,
            presorted=servers,
            # Nova lists servers newest first (created_at desc, id desc), flavors by id.
            key=_by_creation if servers else _by_id,
            newest_first=servers,
            lookup=(self.nova.servers if servers else self.nova.flavors).get,
            cap=self.knobs.nova_page_limit or None,
            url=f"{req.base_url}{PREFIX}/{collection}",
        )

    def servers(self, req: Req, *, detail: bool, minor: int) -> Reply:
        page = self._page(
            req, self._matching(req), "servers/detail" if detail else "servers", servers=True
        )
        if detail:
            rows = [self.nova.render(s, minor=minor, base_url=req.base_url) for s in page.rows]
        else:
            rows = [
                {
                    "id": s["id"],
                    "name": s["name"],
                    "links": _links(req.base_url, "servers", s["id"]),
                }
                for s in page.rows
            ]
        return ok(_with_links("servers", rows, page))

    def server(self, req: Req, *, minor: int) -> Reply:
        server = self.nova.servers.require(req.match["id"], _server_missing)
        return ok({"server": self.nova.render(server, minor=minor, base_url=req.base_url)})

    def delete_server(self, req: Req, *, minor: int) -> Reply:
        self.nova.delete_server(req.match["id"])
        return NO_CONTENT

    def action(self, req: Req, *, minor: int) -> Reply:
        server = self.nova.servers.require(req.match["id"], _server_missing)
        if not isinstance(req.body, dict) or len(req.body) != 1:
            raise bad_request("Malformed request body")
        (name,) = req.body
        transitions = {
            "os-stop": ("ACTIVE", "SHUTOFF", "stop"),
            "os-start": ("SHUTOFF", "ACTIVE", "start"),
        }
        if name not in transitions:
            raise bad_request(f"There is no such action: {name}")
        before, after, verb = transitions[name]
        if server["status"] != before:
            raise conflict(
                f"Cannot '{verb}' instance {server['id']} while it is in vm_state "
                f"{VM_STATES.get(server['status'], server['status'])}"
            )
        self.nova.set_status(server["id"], after)
        return Reply(202)

    def flavors(self, req: Req, *, detail: bool, minor: int) -> Reply:
        collection = "flavors/detail" if detail else "flavors"
        page = self._page(req, list(self.nova.flavors), collection, servers=False)
        rows = [
            self._flavor(f, req.base_url)
            if detail
            else {
                "id": f["id"],
                "name": f["name"],
                "links": _links(req.base_url, "flavors", f["id"]),
            }
            for f in page.rows
        ]
        return ok(_with_links("flavors", rows, page))

    def flavor(self, req: Req, *, minor: int) -> Reply:
        flavor = self.nova.flavors.require(req.match["id"], _flavor_missing)
        return ok({"flavor": self._flavor(flavor, req.base_url)})

    def _flavor(self, flavor: Record, base_url: str) -> Record:
        return flavor | {"links": _links(base_url, "flavors", flavor["id"]), "description": None}


def _versioned(handler: Any, knobs: Knobs) -> Handler:
    """Negotiate the microversion, call the handler with it and echo it in the headers."""

    def run(req: Req) -> Reply:
        minor = negotiate(req.headers, knobs)
        reply: Reply = handler(req, minor=minor)
        headers = dict(reply.headers or {})
        headers["OpenStack-API-Version"] = f"compute 2.{minor}"
        headers["X-OpenStack-Nova-API-Version"] = f"2.{minor}"
        headers["Vary"] = "OpenStack-API-Version, X-OpenStack-Nova-API-Version"
        return Reply(reply.status, reply.body, headers)

    return run


def routes(nova: Nova, knobs: Knobs) -> list[Route]:
    """Nova's routes under `/compute`."""
    api = NovaApi(nova, knobs)
    p = PREFIX

    def v(handler: Any) -> Handler:
        return _versioned(handler, knobs)

    return [
        Route("GET", "/compute", api.versions, auth=False),
        Route("GET", "/compute/", api.versions, auth=False),
        Route("GET", p, api.version, auth=False),
        Route("GET", f"{p}/", api.version, auth=False),
        Route("GET", f"{p}/servers", v(lambda r, minor: api.servers(r, detail=False, minor=minor))),
        Route(
            "GET",
            f"{p}/servers/detail",
            v(lambda r, minor: api.servers(r, detail=True, minor=minor)),
        ),
        Route("GET", f"{p}/servers/{{id}}", v(api.server)),
        Route("DELETE", f"{p}/servers/{{id}}", v(api.delete_server)),
        Route("POST", f"{p}/servers/{{id}}/action", v(api.action)),
        Route("GET", f"{p}/flavors", v(lambda r, minor: api.flavors(r, detail=False, minor=minor))),
        Route(
            "GET",
            f"{p}/flavors/detail",
            v(lambda r, minor: api.flavors(r, detail=True, minor=minor)),
        ),
        Route("GET", f"{p}/flavors/{{id}}", v(api.flavor)),
    ]
