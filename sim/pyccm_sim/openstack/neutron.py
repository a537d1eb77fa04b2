"""Neutron v2.0: networks, subnets, ports, floating IPs, routers, security groups, extensions.

The CCM reads node ports to compute addresses, attaches floating IPs to load-balancer VIP
ports, edits router `routes` and port `allowed_address_pairs` for pod routes, and manages
security groups. Those paths must behave like Neutron, including the refusals the CCM
has to survive: 409 when a floating-IP range is exhausted or an address is in use, 400
for a nexthop that is not on a router subnet, 409 for a duplicate security-group rule,
400 for attributes of a disabled extension. Nova (server `addresses`) and Octavia (VIP
ports) build on this model, so it exposes plain methods besides its HTTP handlers.
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
from multidict import MultiMapping

from pyccm_sim.openstack.errors import ApiError, bad_request, conflict, not_found
from pyccm_sim.openstack.pagination import neutron_page
from pyccm_sim.openstack.routing import (
    NO_CONTENT,
    Reply,
    Req,
    Route,
    created,
    json_object,
    ok,
    reject_unknown,
    string_list,
)
from pyccm_sim.openstack.settings import Knobs
from pyccm_sim.openstack.store import (
    NULL_SPELLINGS,
    AddressPool,
    Counters,
    Ids,
    PoolExhausted,
    Record,
    Table,
    now_iso,
    project_fields,
    query_values,
    select,
)

PREFIX = "/network/v2.0"
EXTENSIONS = (
    ("router", "Neutron L3 Router"),
    ("extraroute", "Neutron Extra Route"),
    ("extraroute-atomic", "Atomically add/remove extra routes"),
    ("allowed-address-pairs", "Allowed Address Pairs"),
    ("port-security", "Port Security"),
    ("external-net", "Neutron external network"),
    ("security-group", "security-group"),
    ("trunk", "Trunk Extension"),
    ("trunk-details", "Trunk port details"),
    ("standard-attr-tag", "Tag support for resources with standard attribute"),
    ("binding", "Port Binding"),
    ("quotas", "Quota management support"),
)
UNKNOWN_ATTRIBUTES = "Unrecognized attribute(s) '{names}'"
COMMON_WRITABLE = frozenset({"name", "description", "tenant_id", "project_id"})
NETWORK_FIELDS = COMMON_WRITABLE | {
    "admin_state_up",
    "shared",
    "router:external",
    "mtu",
    "port_security_enabled",
    "tags",
}
SUBNET_FIELDS = COMMON_WRITABLE | {
    "network_id",
    "cidr",
    "ip_version",
    "gateway_ip",
    "allocation_pools",
    "enable_dhcp",
    "dns_nameservers",
    "host_routes",
    "tags",
}
PORT_FIELDS = COMMON_WRITABLE | {
    "network_id",
    "admin_state_up",
    "mac_address",
    "fixed_ips",
    "device_id",
    "device_owner",
    "security_groups",
    "allowed_address_pairs",
    "port_security_enabled",
    "binding:host_id",
    "binding:vnic_type",
    "tags",
}
FIP_FIELDS = COMMON_WRITABLE | {
    "floating_network_id",
    "port_id",
    "subnet_id",
    "floating_ip_address",
    "fixed_ip_address",
    "tags",
}
ROUTER_FIELDS = COMMON_WRITABLE | {"admin_state_up", "external_gateway_info", "routes", "tags"}
SG_FIELDS = COMMON_WRITABLE | {"stateful", "tags"}
RULE_FIELDS = COMMON_WRITABLE | {
    "security_group_id",
    "direction",
    "ethertype",
    "protocol",
    "port_range_min",
    "port_range_max",
    "remote_ip_prefix",
    "remote_group_id",
}
# Fields a PUT may not change (Neutron answers 400 "Cannot update read-only attribute").
READ_ONLY_ON_UPDATE = frozenset(
    {
        "network_id",
        "tenant_id",
        "project_id",
        "floating_network_id",
        "security_group_id",
        "cidr",
        "ip_version",
    }
)
PORT_PROTOCOLS = frozenset({"tcp", "udp", "sctp", "dccp", "udplite"})
ROUTER_INTERFACE = "network:router_interface"
ROUTER_GATEWAY = "network:router_gateway"
# The ports Neutron's DELETE /ports refuses while their router exists (ServicePortInUse).
ROUTER_PORT_OWNERS = frozenset({ROUTER_INTERFACE, ROUTER_GATEWAY})


def _missing(
    label: str, kind: str, template: str = "{label} {id} could not be found."
) -> Callable[[str], ApiError]:
    return lambda row_id: not_found(template.format(label=label, id=row_id), kind=kind)


# Wordings from neutron-lib's and neutron's exception classes (some end without a period).
NETWORK_MISSING = _missing("Network", "NetworkNotFound")
SUBNET_MISSING = _missing("Subnet", "SubnetNotFound")
PORT_MISSING = _missing("Port", "PortNotFound")
FIP_MISSING = _missing("Floating IP", "FloatingIPNotFound", "{label} {id} could not be found")
ROUTER_MISSING = _missing("Router", "RouterNotFound", "{label} {id} could not be found")
SG_MISSING = _missing("Security group", "SecurityGroupNotFound", "{label} {id} does not exist")
RULE_MISSING = _missing(
    "Security group rule", "SecurityGroupRuleNotFound", "{label} {id} does not exist"
)
MISSING_BY_KIND = {
    "network": NETWORK_MISSING,
    "subnet": SUBNET_MISSING,
    "port": PORT_MISSING,
    "floatingip": FIP_MISSING,
    "router": ROUTER_MISSING,
    "security_group": SG_MISSING,
    "security_group_rule": RULE_MISSING,
}


class RouteSet:
    """A router's extra routes in order, each also as its JSON, by (destination, nexthop).

    The JSON of the whole list is kept too and extended in place by an add (a burst of
    node joins), so an answer costs a copy of bytes, not the encoding of every route.
    """

    _encode = msgspec.json.Encoder().encode

    def __init__(self) -> None:
        self._routes: dict[tuple[str, str], dict[str, str]] = {}
        self._json: dict[tuple[str, str], bytes] = {}
        self._joined: bytes | None = b"[]"

    def __len__(self) -> int:
        return len(self._routes)

    def new(self, routes: list[dict[str, str]]) -> list[dict[str, str]]:
        """Those of `routes` the router does not hold yet."""
        return [r for r in routes if (r["destination"], r["nexthop"]) not in self._routes]

    def held(self, routes: list[dict[str, str]]) -> list[dict[str, str]]:
        return [r for r in routes if (r["destination"], r["nexthop"]) in self._routes]

    def add(self, routes: list[dict[str, str]]) -> None:
        """Add routes the router does not hold (see `new`)."""
        if not routes:
            return
        fragments = []
        for route in routes:
            key = (route["destination"], route["nexthop"])
            self._routes[key] = route
            self._json[key] = fragment = self._encode(route)
            fragments.append(fragment)
        if self._joined is not None:
            separator = b"," if len(self._routes) > len(routes) else b""
            self._joined = self._joined[:-1] + separator + b",".join(fragments) + b"]"

    def remove(self, routes: list[dict[str, str]]) -> None:
        for route in routes:
            key = (route["destination"], route["nexthop"])
            self._routes.pop(key, None)
            self._json.pop(key, None)
        if routes:
            self._joined = None

    def replace(self, routes: list[dict[str, str]]) -> None:
        self._routes.clear()
        self._json.clear()
        self._joined = b"[]"
        self.add(routes)

    def listed(self) -> list[dict[str, str]]:
        return list(self._routes.values())

    def json(self) -> bytes:
        if self._joined is None:
            self._joined = b"[" + b",".join(self._json.values()) + b"]"
        return self._joined


class Neutron:
    """The networking model; also the building blocks the seeder, Nova and Octavia use."""

    def __init__(self, *, ids: Ids, counters: Counters, knobs: Knobs, project_id: str) -> None:
        self._ids = ids
        self._knobs = knobs
        self.project_id = project_id
        # Indexed filters: a list by one of these costs the matching rows, not the table
        # (a 5,000-node cloud has a port per node, and pyccm asks for them one by one).
        self.networks = Table("network", counters, indexed={"name": "name"})
        self.subnets = Table("subnet", counters, indexed={"network_id": "network_id"})
        self.ports = Table(
            "port",
            counters,
            indexed={"network_id": "network_id", "name": "name"},
            also_indexed=("security_groups",),
        )
        self.floatingips = Table(
            "floatingip", counters, indexed={"floating_ip_address": "floating_ip_address"}
        )
        self.routers = Table("router", counters, indexed={"name": "name"})
        self.security_groups = Table("security_group", counters, indexed={"name": "name"})
        self.security_group_rules = Table(
            "security_group_rule", counters, indexed={"security_group_id": "security_group_id"}
        )
        self._pools: dict[str, AddressPool] = {}
        # Indexes kept by hand: device_id changes through update_port, fixed IPs never
        # change, a floating IP's port changes only in _associate.
        self._ports_by_device: dict[str, list[str]] = {}
        self._ports_by_ip: dict[str, dict[str, None]] = {}
        self._fips_by_port: dict[str, list[str]] = {}
        # Per router: its routes by (destination, nexthop), with their JSON, so adding or
        # removing routes costs the routes of the call, whatever the router holds.
        self._route_sets: dict[str, RouteSet] = {}
        self.default_sg_id = self.create_security_group("default", "Default security group")["id"]

    # -- building blocks ------------------------------------------------------------------

    def _base(self, name: str, description: str = "") -> Record:
        stamp = now_iso()
        return {
            "id": self._ids.uuid(),
            "name": name,
            "description": description,
            "tenant_id": self.project_id,
            "project_id": self.project_id,
            "tags": [],
            "created_at": stamp,
            "updated_at": stamp,
            "revision_number": 0,
        }

    def extension_enabled(self, alias: str) -> bool:
        return alias not in self._knobs.disabled_extensions

    def create_network(self, name: str, *, external: bool = False, **extra: Any) -> Record:
        row = self._base(name) | {
            "status": "ACTIVE",
            "subnets": [],
            "admin_state_up": True,
            "shared": False,
            "router:external": external,
            "mtu": 1450,
            "port_security_enabled": True,
            "availability_zones": ["nova"],
        }
        row.update(extra)
        return self.networks.insert(row)

    def create_subnet(
        self,
        network_id: str,
        name: str,
        cidr: str,
        *,
        gateway_ip: str | None,
        pool: tuple[str, str] | None = None,
        tags: list[str] | None = None,
    ) -> Record:
        network = self.networks.require(network_id, NETWORK_MISSING)
        net = ipaddress.ip_network(cidr, strict=False)
        start, end = pool or _default_pool(net, gateway_ip)
        row = self._base(name) | {
            "network_id": network_id,
            "cidr": str(net),
            "ip_version": net.version,
            "gateway_ip": gateway_ip,
            "allocation_pools": [{"start": start, "end": end}],
            "enable_dhcp": True,
            "dns_nameservers": [],
            "host_routes": [],
            "ipv6_ra_mode": None,
            "ipv6_address_mode": None,
            "subnetpool_id": None,
        }
        row["tags"] = list(tags or [])
        address_pool = AddressPool(str(net), start=start, end=end)
        if gateway_ip:
            address_pool.claim(gateway_ip)
        self._pools[row["id"]] = address_pool
        network["subnets"].append(row["id"])
        return self.subnets.insert(row)

    def create_port(
        self,
        network_id: str,
        *,
        name: str = "",
        device_id: str = "",
        device_owner: str = "",
        fixed_ips: list[dict[str, str]] | None = None,
        security_groups: list[str] | None = None,
        port_security: bool = True,
    ) -> Record:
        self.networks.require(network_id, NETWORK_MISSING)
        ips = self._allocate_fixed_ips(network_id, fixed_ips)
        sgs = (
            security_groups
            if security_groups is not None
            else (
                [self.default_sg_id]
                if port_security and device_owner.startswith("compute:")
                else []
            )
        )
        row = self._base(name) | {
            "network_id": network_id,
            "mac_address": self._ids.mac(),
            "admin_state_up": True,
            "status": "ACTIVE",
            "device_id": device_id,
            "device_owner": device_owner,
            "fixed_ips": ips,
            "allowed_address_pairs": [],
            "security_groups": sgs,
            "port_security_enabled": port_security,
            "binding:vnic_type": "normal",
            "extra_dhcp_opts": [],
        }
        self.ports.insert(row)
        self._index_device(row["id"], device_id)
        for entry in ips:
            self._ports_by_ip.setdefault(entry["ip_address"], {})[row["id"]] = None
        return row

    def add_fixed_ip(self, port_id: str, subnet_id: str, address: str) -> None:
        """Give a port one more address (a node's IPv6 address in a dual-stack seed)."""
        port = self.ports.require(port_id, PORT_MISSING)
        subnets = [s for s in self.subnets if s["network_id"] == port["network_id"]]
        entry = self._claim_one(
            port["network_id"], subnets, {"subnet_id": subnet_id, "ip_address": address}
        )
        port["fixed_ips"].append(entry)
        self._ports_by_ip.setdefault(entry["ip_address"], {})[port_id] = None

    def _allocate_fixed_ips(
        self, network_id: str, wanted: list[dict[str, str]] | None
    ) -> list[dict[str, str]]:
        if wanted == []:
            return []  # Neutron makes a port without addresses when asked to
        subnets = [s for s in self.subnets if s["network_id"] == network_id]
        if not subnets:
            raise bad_request(f"Network {network_id} has no subnets.")
        requests = wanted if wanted else [{"subnet_id": subnets[0]["id"]}]
        claimed: list[dict[str, str]] = []
        try:
            for request in requests:
                claimed.append(self._claim_one(network_id, subnets, request))
        except ApiError:
            self._release(claimed)
            raise
        return claimed

    def _claim_one(
        self, network_id: str, subnets: list[Record], request: dict[str, str]
    ) -> dict[str, str]:
        address = request.get("ip_address")
        subnet_id = request.get("subnet_id")
        if subnet_id is None and address is None:
            return self._claim_any(network_id, subnets)
        if subnet_id is None and address is not None:
            subnet_id = next(
                (s["id"] for s in subnets if self._pools[s["id"]].contains(address)), None
            )
            if subnet_id is None:
                raise bad_request(
                    f"IP address {address} is not a valid IP for any subnet on network "
                    f"{network_id}.",
                    kind="InvalidIpForNetwork",
                )
        if subnet_id is None or subnet_id not in {s["id"] for s in subnets}:
            raise bad_request(
                f"Invalid input for operation: subnet {subnet_id} is not on network {network_id}.",
                kind="InvalidInput",
            )
        pool = self._pools[subnet_id]
        if address is None:
            try:
                address = pool.allocate()
            except PoolExhausted:
                raise conflict(
                    f"No more IP addresses available on network {network_id}.",
                    kind="IpAddressGenerationFailure",
                ) from None
            return {"subnet_id": subnet_id, "ip_address": address}
        if not pool.contains(address):
            raise bad_request(
                f"IP address {address} is not a valid IP for the specified subnet.",
                kind="InvalidIpForSubnet",
            )
        if pool.in_use(address):
            raise conflict(
                f"Unable to complete operation for network {network_id}. The IP address "
                f"{address} is in use.",
                kind="IpAddressInUse",
            )
        pool.claim(address)
        return {"subnet_id": subnet_id, "ip_address": str(ipaddress.ip_address(address))}

    def _claim_any(self, network_id: str, subnets: list[Record]) -> dict[str, str]:
        """An address from the first IPv4 subnet of the network that has one free."""
        ordered = sorted(subnets, key=lambda s: s["ip_version"])
        for subnet in ordered:
            try:
                return {
                    "subnet_id": subnet["id"],
                    "ip_address": self._pools[subnet["id"]].allocate(),
                }
            except PoolExhausted:
                continue
        raise conflict(
            f"No more IP addresses available on network {network_id}.",
            kind="IpAddressGenerationFailure",
        )

    def _release(self, fixed_ips: list[dict[str, str]]) -> None:
        """Give addresses back to their pools; a subnet's gateway address stays reserved
        (for the router interface that may take it again)."""
        for entry in fixed_ips:
            pool = self._pools.get(entry["subnet_id"])
            subnet = self.subnets.rows.get(entry["subnet_id"])
            if pool is not None and (subnet is None or subnet["gateway_ip"] != entry["ip_address"]):
                pool.release(entry["ip_address"])

    def _index_device(self, port_id: str, device_id: str) -> None:
        if device_id:
            self._ports_by_device.setdefault(device_id, []).append(port_id)

    def _unindex_device(self, port_id: str, device_id: str) -> None:
        ports = self._ports_by_device.get(device_id)
        if ports and port_id in ports:
            ports.remove(port_id)
            if not ports:
                del self._ports_by_device[device_id]

    def ports_of_device(self, device_id: str) -> list[Record]:
        return [self.ports.rows[port_id] for port_id in self._ports_by_device.get(device_id, [])]

    def ports_with_ip(self, address: str) -> list[Record]:
        return [self.ports.rows[port_id] for port_id in self._ports_by_ip.get(address, {})]

    def port_candidates(self, query: MultiMapping[str]) -> list[Record]:
        """The ports a list query can match, from the most selective index it names."""
        device_ids = query.getall("device_id", [])
        if device_ids:
            # Repeated `device_id` filters OR (the node worker asks for 50 servers at once).
            return [p for d in dict.fromkeys(device_ids) for p in self.ports_of_device(d)]
        for constraint in query.getall("fixed_ips", []):
            name, _, value = constraint.partition("=")
            if name == "ip_address":
                return self.ports_with_ip(value)
        groups = query_values(query, "security_groups")
        if groups:
            found: dict[str, Record] = {}
            for group in groups:
                found.update((p["id"], p) for p in self.ports.with_value("security_groups", group))
            return list(found.values())
        candidates = self.ports.candidates(query)
        return list(self.ports) if candidates is None else candidates

    def fip_candidates(self, query: MultiMapping[str]) -> list[Record]:
        port_ids = query.getall("port_id", [])
        if len(port_ids) == 1 and port_ids[0] not in NULL_SPELLINGS:
            return self.fips_of_port(port_ids[0])
        candidates = self.floatingips.candidates(query)
        return list(self.floatingips) if candidates is None else candidates

    def fips_of_port(self, port_id: str) -> list[Record]:
        return [self.floatingips.rows[fip_id] for fip_id in self._fips_by_port.get(port_id, [])]

    def delete_port(self, port_id: str) -> None:
        port = self.ports.require(port_id, PORT_MISSING)
        for fip in self.fips_of_port(port_id):
            self._associate(fip, None, None)
        self._release(port["fixed_ips"])
        self._unindex_device(port_id, port["device_id"])
        for entry in port["fixed_ips"]:
            holders = self._ports_by_ip.get(entry["ip_address"], {})
            holders.pop(port_id, None)
            if not holders:
                self._ports_by_ip.pop(entry["ip_address"], None)
        self.ports.delete(port_id)

    def delete_device_ports(self, device_id: str) -> None:
        for port in self.ports_of_device(device_id):
            self.delete_port(port["id"])

    def create_router(
        self,
        name: str,
        *,
        external_network_id: str | None,
        enable_snat: bool = True,
        admin_state_up: bool = True,
    ) -> Record:
        """A router, with a gateway port on `external_network_id` when one is given."""
        if external_network_id is not None:
            network = self.networks.require(external_network_id, NETWORK_MISSING)
            if not network["router:external"]:
                raise ApiError(
                    400,
                    f"Bad router request: Network {external_network_id} is not an external "
                    "network.",
                    kind="BadRequest",
                )
        router = self._base(name) | {
            "status": "ACTIVE",
            "admin_state_up": admin_state_up,
            "routes": [],
            "external_gateway_info": None,
            "distributed": False,
            "ha": False,
            "availability_zones": ["nova"],
        }
        self.routers.insert(router)
        if external_network_id is None:
            return router
        gateway = self.create_port(
            external_network_id,
            device_id=router["id"],
            device_owner=ROUTER_GATEWAY,
            port_security=False,
        )
        router["external_gateway_info"] = {
            "network_id": external_network_id,
            "enable_snat": enable_snat,
            "external_fixed_ips": gateway["fixed_ips"],
        }
        return router

    def delete_router(self, router_id: str) -> None:
        """Neutron refuses while interfaces are attached (409 RouterInUse)."""
        self.routers.require(router_id, ROUTER_MISSING)
        ports = self.ports_of_device(router_id)
        attached = [p["id"] for p in ports if p["device_owner"] == ROUTER_INTERFACE]
        if attached:
            raise conflict(
                f"Router {router_id} has ports still attached: {', '.join(attached)}",
                kind="RouterInUse",
            )
        for port in ports:
            self.delete_port(port["id"])
        self.routers.delete(router_id)
        self._route_sets.pop(router_id, None)

    def add_router_interface(self, router_id: str, subnet_id: str) -> Record:
        """An interface on the subnet's gateway address (l3_db._add_interface_by_subnet).

        Answers what Neutron answers (`router_interface_info`). An IPv6 subnet joins the
        router's port on that network when it has an IPv6 address already, as Neutron
        gives a router one port per network for its IPv6 prefixes.
        """
        router = self.routers.require(router_id, ROUTER_MISSING)
        subnet = self.subnet_of(subnet_id)
        gateway = subnet["gateway_ip"]
        if not gateway:
            raise _bad_router("Subnet for router interface must have a gateway IP.")
        self._check_router_subnets(router_id, [subnet])
        held = [
            p["id"]
            for p in self.ports_with_ip(gateway)
            if any(e["subnet_id"] == subnet_id for e in p["fixed_ips"])
        ]
        if held:
            raise conflict(
                f"IP address {gateway} already allocated in subnet {subnet_id}",
                kind="IpAddressAlreadyAllocated",
            )
        entry = {"subnet_id": subnet_id, "ip_address": gateway}
        # The gateway address stays claimed from the subnet's creation on (see _release).
        existing = self._ipv6_interface(router_id, subnet["network_id"])
        if subnet["ip_version"] == 6 and existing is not None:
            existing["fixed_ips"].append(entry)
            self._ports_by_ip.setdefault(gateway, {})[existing["id"]] = None
            _bump(self.ports, existing, {})
            return _interface_info(router, existing, [subnet_id])
        self._pools[subnet_id].release(gateway)
        port = self.create_port(
            subnet["network_id"],
            device_id=router_id,
            device_owner=ROUTER_INTERFACE,
            fixed_ips=[entry],
            port_security=False,
        )
        return _interface_info(router, port, [subnet_id])

    def add_router_interface_port(self, router_id: str, port_id: str) -> Record:
        """An existing port made the router's interface (l3_db._add_interface_by_port):
        it keeps its addresses; checks and wordings in Neutron's order."""
        router = self.routers.require(router_id, ROUTER_MISSING)
        port = self.ports.require(port_id, PORT_MISSING)
        if port["device_id"]:
            raise conflict(
                f"Unable to complete operation on port {port_id} for network "
                f"{port['network_id']}. Port already has an attached device {port['device_id']}.",
                kind="PortInUse",
            )
        if not port["fixed_ips"]:
            raise _bad_router("Router port must have at least one fixed IP.")
        if _has_ipv6(port):
            other = self._ipv6_interface(router_id, port["network_id"])
            if other is not None:
                raise _bad_router(
                    f"Router already contains IPv6 port {other['id']} belonging to network id "
                    f"{port['network_id']}. Only one IPv6 port from the same network subnet can "
                    "be connected to a router."
                )
        subnets = [self.subnet_of(e["subnet_id"]) for e in port["fixed_ips"]]
        self._check_router_subnets(router_id, subnets)
        if len([s for s in subnets if s["ip_version"] == 4]) > 1:
            raise _bad_router("Cannot have multiple IPv4 subnets on router port.")
        self._unindex_device(port_id, port["device_id"])
        self._index_device(port_id, router_id)
        _bump(self.ports, port, {"device_id": router_id, "device_owner": ROUTER_INTERFACE})
        return _interface_info(router, port, [s["id"] for s in subnets])

    def remove_router_interface(
        self, router_id: str, *, port_id: str | None, subnet_id: str | None
    ) -> Record:
        """Remove an interface by port (the port is deleted) or by subnet (the port, or
        the subnet's address on a port holding several IPv6 prefixes), as
        l3_db.remove_router_interface does; refused while a floating IP needs it."""
        router = self.routers.require(router_id, ROUTER_MISSING)
        interfaces = [
            p for p in self.ports_of_device(router_id) if p["device_owner"] == ROUTER_INTERFACE
        ]
        if port_id is not None:
            port = next((p for p in interfaces if p["id"] == port_id), None)
            if port is None:
                raise not_found(
                    f"Router {router_id} does not have an interface with id {port_id}",
                    kind="RouterInterfaceNotFound",
                )
            subnet_ids = [e["subnet_id"] for e in port["fixed_ips"]]
            if subnet_id is not None and subnet_id not in subnet_ids:
                raise bad_request(
                    f"Subnet on port {port_id} does not match the requested subnet {subnet_id}.",
                    kind="SubnetMismatchForPort",
                )
            for each in subnet_ids:
                self._check_interface_unused(router_id, self.subnet_of(each))
            self.delete_port(port_id)
            return _interface_info(router, port, subnet_ids)
        assert subnet_id is not None
        subnet = self.subnet_of(subnet_id)
        on_network = [p for p in interfaces if p["network_id"] == subnet["network_id"]]
        if on_network:
            self._check_interface_unused(router_id, subnet)
        for port in on_network:
            mine = [e for e in port["fixed_ips"] if e["subnet_id"] == subnet_id]
            if not mine:
                continue
            if len(port["fixed_ips"]) == 1:
                self.delete_port(port["id"])
                return _interface_info(router, port, [subnet_id])
            # One prefix of a port holding several: that address goes, the port stays.
            self._release(mine)
            for entry in mine:
                self._ports_by_ip.get(entry["ip_address"], {}).pop(port["id"], None)
            kept = [e for e in port["fixed_ips"] if e["subnet_id"] != subnet_id]
            _bump(self.ports, port, {"fixed_ips": kept})
            return _interface_info(router, port, [subnet_id])
        raise not_found(
            f"Router {router_id} has no interface on subnet {subnet_id}",
            kind="RouterInterfaceNotFoundForSubnet",
        )

    def _ipv6_interface(self, router_id: str, network_id: str) -> Record | None:
        """The router's interface port on `network_id` that has an IPv6 address."""
        for port in self.ports_of_device(router_id):
            if (
                port["device_owner"] == ROUTER_INTERFACE
                and port["network_id"] == network_id
                and _has_ipv6(port)
            ):
                return port
        return None

    def _check_router_subnets(self, router_id: str, new: list[Record]) -> None:
        """l3_db._check_for_dup_router_subnets: a router has one port per subnet, and
        no two of its subnets overlap (all of the gateway network's subnets count)."""
        new_ids = {s["id"] for s in new}
        held: list[str] = []
        for port in self.ports_of_device(router_id):
            if port["device_owner"] not in ROUTER_PORT_OWNERS:
                continue
            for entry in port["fixed_ips"]:
                if entry["subnet_id"] in new_ids:
                    raise _bad_router(f"Router already has a port on subnet {entry['subnet_id']}.")
                if port["device_owner"] == ROUTER_GATEWAY:
                    gateway_net = self.subnets.with_value("network_id", port["network_id"])
                    held += [s["id"] for s in gateway_net]
                else:
                    held.append(entry["subnet_id"])
        for existing in (self.subnets.rows[i] for i in dict.fromkeys(held)):
            for subnet in new:
                mine = ipaddress.ip_network(existing["cidr"])
                theirs = ipaddress.ip_network(subnet["cidr"])
                if mine.version == theirs.version and mine.overlaps(theirs):
                    raise _bad_router(
                        f"Cidr {subnet['cidr']} of subnet {subnet['id']} overlaps with cidr "
                        f"{existing['cidr']} of subnet {existing['id']}."
                    )

    def _check_interface_unused(self, router_id: str, subnet: Record) -> None:
        """l3_db._check_router_interface_not_in_use: no floating IP through this router
        stands for an address of a port on the subnet."""
        cidr = ipaddress.ip_network(subnet["cidr"])
        for fip in self.floatingips:
            if fip["router_id"] != router_id or not fip["fixed_ip_address"]:
                continue
            if ipaddress.ip_address(fip["fixed_ip_address"]) not in cidr:
                continue
            port = self.ports.rows.get(fip["port_id"])
            if port is not None and any(e["subnet_id"] == subnet["id"] for e in port["fixed_ips"]):
                raise conflict(
                    f"Router interface for subnet {subnet['id']} on router {router_id} cannot "
                    "be deleted, as it is required by one or more floating IPs.",
                    kind="RouterInterfaceInUseByFloatingIP",
                )

    def create_security_group(self, name: str, description: str = "") -> Record:
        group = self._base(name, description) | {"stateful": True}
        self.security_groups.insert(group)
        for ethertype in ("IPv4", "IPv6"):
            self._insert_rule(
                {"security_group_id": group["id"], "direction": "egress", "ethertype": ethertype}
            )
        return group

    def _insert_rule(self, fields: Record) -> Record:
        rule = self._base("") | {
            "security_group_id": fields["security_group_id"],
            "direction": fields["direction"],
            "ethertype": fields.get("ethertype", "IPv4"),
            "protocol": fields.get("protocol"),
            "port_range_min": fields.get("port_range_min"),
            "port_range_max": fields.get("port_range_max"),
            "remote_ip_prefix": fields.get("remote_ip_prefix"),
            "remote_group_id": fields.get("remote_group_id"),
            "remote_address_group_id": None,
            "description": fields.get("description", ""),
        }
        del rule["name"]
        del rule["tags"]
        return self.security_group_rules.insert(rule)

    def render_security_group(self, group: Record) -> Record:
        rules = self.security_group_rules.with_value("security_group_id", group["id"])
        return group | {"security_group_rules": rules}

    def create_floating_ip(self, fields: Record) -> Record:
        network_id = fields.get("floating_network_id")
        if not isinstance(network_id, str):
            raise bad_request("Invalid input for operation: floating_network_id is required.")
        network = self.networks.require(network_id, NETWORK_MISSING)
        if not network["router:external"]:
            raise bad_request(
                f"Bad floatingip request: Network {network_id} is not a valid external network.",
                kind="BadRequest",
            )
        request: dict[str, str] = {}
        if fields.get("subnet_id"):
            request["subnet_id"] = str(fields["subnet_id"])
        if fields.get("floating_ip_address"):
            request["ip_address"] = str(fields["floating_ip_address"])
        (allocated,) = self._allocate_fixed_ips(network_id, [request])
        fip = self._base("", str(fields.get("description") or "")) | {
            "floating_ip_address": allocated["ip_address"],
            "floating_network_id": network_id,
            "router_id": None,
            "port_id": None,
            "fixed_ip_address": None,
            "status": "DOWN",
            "port_details": None,
            "port_forwardings": [],
            "qos_policy_id": None,
        }
        fip["_subnet_id"] = allocated["subnet_id"]
        fip["tags"] = list(fields.get("tags") or [])
        try:
            if fields.get("port_id"):
                self._associate(fip, str(fields["port_id"]), fields.get("fixed_ip_address"))
        except ApiError:
            self._release([allocated])
            raise
        return self.floatingips.insert(fip)

    def delete_floating_ip(self, fip_id: str) -> None:
        fip = self.floatingips.require(fip_id, FIP_MISSING)
        self._associate(fip, None, None)
        self._release([{"subnet_id": fip["_subnet_id"], "ip_address": fip["floating_ip_address"]}])
        self.floatingips.delete(fip_id)

    def _associate(self, fip: Record, port_id: str | None, fixed_ip: Any) -> None:
        old = fip["port_id"]
        if port_id is None:
            if old:
                self._fips_by_port[old].remove(fip["id"])
            fip.update(port_id=None, fixed_ip_address=None, router_id=None, status="DOWN")
            return
        port = self.ports.require(port_id, PORT_MISSING)
        # Neutron's order (l3_db._check_and_get_fip_assoc): the fixed IP, the router
        # that serves its subnet, then another floating IP on that fixed IP.
        address, subnet_id = self._fixed_ip_for(port, fixed_ip)
        router_id = self._router_between(port, subnet_id, fip["floating_network_id"])
        for other in self.fips_of_port(port_id):
            if other["id"] != fip["id"] and other["fixed_ip_address"] == address:
                raise conflict(
                    f"Cannot associate floating IP {fip['floating_ip_address']} ({fip['id']}) "
                    f"with port {port_id} using fixed IP {address}, as that fixed IP already "
                    f"has a floating IP on external network {fip['floating_network_id']}.",
                    kind="FloatingIPPortAlreadyAssociated",
                )
        if old and old != port_id:
            self._fips_by_port[old].remove(fip["id"])
        if old != port_id:
            self._fips_by_port.setdefault(port_id, []).append(fip["id"])
        fip.update(port_id=port_id, fixed_ip_address=address, router_id=router_id, status="ACTIVE")

    def _fixed_ip_for(self, port: Record, wanted: Any) -> tuple[str, str]:
        """(address, subnet) a floating IP on `port` stands for, with the checks and
        wordings of Neutron's l3_db._internal_fip_assoc_data: the one IPv4 address asked
        for, else the port's only IPv4 address (a dual-stack port has one of each)."""
        prefix = "Bad floatingip request: "
        if wanted is not None:
            try:
                version = ipaddress.ip_address(str(wanted)).version
            except ValueError:
                raise bad_request(
                    f"Invalid input for fixed_ip_address. Reason: '{wanted}' is not a valid IP "
                    "address."
                ) from None
            if version != 4:
                raise bad_request(
                    f"{prefix}Cannot process floating IP association with {wanted}, since "
                    "that is not an IPv4 address."
                )
            found = [e for e in port["fixed_ips"] if e["ip_address"] == wanted]
            if not found:
                raise bad_request(f"{prefix}Port {port['id']} does not have fixed ip {wanted}.")
            return str(wanted), str(found[0]["subnet_id"])
        v4 = [e for e in port["fixed_ips"] if ipaddress.ip_address(e["ip_address"]).version == 4]
        if not v4:
            raise bad_request(
                f"{prefix}Cannot add floating IP to port {port['id']} that has no fixed IPv4 "
                "addresses."
            )
        if len(v4) > 1:
            raise bad_request(
                f"{prefix}Port {port['id']} has multiple fixed IPv4 addresses.  Must provide a "
                "specific IPv4 address when assigning a floating IP."
            )
        return str(v4[0]["ip_address"]), str(v4[0]["subnet_id"])

    def _router_between(self, port: Record, subnet_id: str, external_network_id: str) -> str:
        """A router with its gateway on the external network and an interface on the
        subnet of the fixed IP (not merely on its network: Neutron's
        get_router_for_floatingip joins on the interface's subnet)."""
        for router in self.routers:
            gateway = router["external_gateway_info"] or {}
            if gateway.get("network_id") != external_network_id:
                continue
            if any(
                e["subnet_id"] == subnet_id
                for p in self.ports_of_device(router["id"])
                if p["network_id"] == port["network_id"]
                for e in p["fixed_ips"]
            ):
                return str(router["id"])
        raise not_found(
            f"External network {external_network_id} is not reachable from subnet {subnet_id}."
            f"  Therefore, cannot associate Port {port['id']} with a Floating IP.",
            kind="ExternalGatewayForFloatingIPNotFound",
        )

    def router_subnets(self, router_id: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        networks = []
        for port in self.ports_of_device(router_id):
            for entry in port["fixed_ips"]:
                networks.append(self._pools[entry["subnet_id"]].network)
        return networks

    def validate_routes(self, router_id: str, routes: Any) -> list[dict[str, str]]:
        """The routes of a request, checked (nexthop on a router subnet) and deduplicated."""
        if not isinstance(routes, list):
            raise bad_request(f"Invalid input for routes. Reason: '{routes}' is not a list.")
        subnets = self.router_subnets(router_id)
        result: dict[tuple[str, str], dict[str, str]] = {}
        for route in routes:
            destination, nexthop = _parse_route(route)
            if not any(nexthop in subnet for subnet in subnets):
                raise bad_request(
                    f"Invalid format for routes: {route}, the nexthop is not connected with router",
                    kind="InvalidRoutes",
                )
            result.setdefault(
                (destination, str(nexthop)), {"destination": destination, "nexthop": str(nexthop)}
            )
        return list(result.values())

    def check_route_count(self, count: int) -> None:
        """The per-router limit on the routes a router would hold after a write.

        Neutron 29 enforces it as the `router_route` quota (`[QUOTAS] quota_router_route`,
        30 by default; it replaced `max_routes`): `QUOTAS.limit_check(router_route=N)`
        raises neutron-lib's OverQuota, a 409.
        """
        limit = self._knobs.max_routes
        if limit is not None and count > limit:
            raise conflict("Quota exceeded for resources: ['router_route'].", kind="OverQuota")

    def route_set(self, router_id: str) -> RouteSet:
        return self._route_sets.setdefault(router_id, RouteSet())

    def render_router(self, router: Record) -> Record:
        """The router with its routes as cached JSON (thousands of them, on every write)."""
        return router | {"routes": msgspec.Raw(self.route_set(router["id"]).json())}

    def subnet_of(self, subnet_id: str) -> Record:
        return self.subnets.require(subnet_id, SUBNET_MISSING)


def _bad_router(message: str) -> ApiError:
    """neutron-lib's BadRequest for resource `router`."""
    return bad_request(f"Bad router request: {message}", kind="BadRequest")


def _has_ipv6(port: Record) -> bool:
    return any(ipaddress.ip_address(e["ip_address"]).version == 6 for e in port["fixed_ips"])


def _interface_info(router: Record, port: Record, subnet_ids: list[str]) -> Record:
    """The body of add/remove_router_interface (l3_db._make_router_interface_info)."""
    return {
        "id": router["id"],
        "project_id": port["project_id"],
        "port_id": port["id"],
        "network_id": port["network_id"],
        "subnet_id": subnet_ids[-1],
        "subnet_ids": subnet_ids,
    }


def _default_pool(
    net: ipaddress.IPv4Network | ipaddress.IPv6Network, gateway: str | None
) -> tuple[str, str]:
    first = net.network_address + 1
    if gateway and ipaddress.ip_address(gateway) == first:
        first += 1
    last = net.broadcast_address - 1 if net.version == 4 else net.broadcast_address
    return str(first), str(last)


def _parse_route(route: Any) -> tuple[str, ipaddress.IPv4Address | ipaddress.IPv6Address]:
    if not isinstance(route, dict) or set(route) != {"destination", "nexthop"}:
        raise bad_request(
            f"Invalid input for routes. Reason: '{route}' is not a valid route; "
            "expected destination and nexthop."
        )
    try:
        destination = ipaddress.ip_network(route["destination"], strict=False)
        nexthop = ipaddress.ip_address(route["nexthop"])
    except (ValueError, TypeError):
        raise bad_request(
            f"Invalid input for routes. Reason: '{route}' has an invalid destination or nexthop."
        ) from None
    return str(destination), nexthop


# -- HTTP ---------------------------------------------------------------------------------


def _versions(req: Req) -> Reply:
    href = f"{req.base_url}/network/v2.0/"
    return ok(
        {
            "versions": [
                {"id": "v2.0", "status": "CURRENT", "links": [{"rel": "self", "href": href}]}
            ]
        }
    )


def _check_fields(obj: Record, allowed: frozenset[str], neutron: Neutron) -> None:
    reject_unknown(obj, allowed, message=UNKNOWN_ATTRIBUTES)
    if "routes" in obj and not neutron.extension_enabled("extraroute"):
        raise bad_request(UNKNOWN_ATTRIBUTES.format(names="routes"))
    if "allowed_address_pairs" in obj and not neutron.extension_enabled("allowed-address-pairs"):
        raise bad_request(UNKNOWN_ATTRIBUTES.format(names="allowed_address_pairs"))


def _check_update(obj: Record) -> None:
    frozen = sorted(set(obj) & READ_ONLY_ON_UPDATE)
    if frozen:
        raise bad_request(f"Cannot update read-only attribute {frozen[0]}")


def _public(row: Record) -> Record:
    """A row without the simulator's private bookkeeping keys (prefixed `_`)."""
    return {key: value for key, value in row.items() if not key.startswith("_")}


def _bump(table: Table, row: Record, changes: Record) -> Record:
    changes = dict(changes)
    changes["updated_at"] = now_iso()
    changes["revision_number"] = row["revision_number"] + 1
    return table.touch(row, changes)


class NeutronApi:
    """HTTP handlers for the Neutron model."""

    def __init__(self, neutron: Neutron) -> None:
        self.n = neutron

    def listing(
        self,
        req: Req,
        table: Table,
        collection: str,
        rows: list[Record] | None = None,
        handled: frozenset[str] = frozenset(),
    ) -> Reply:
        if rows is None:
            rows = table.candidates(req.query)
        chosen = select(table if rows is None else rows, req.query, handled=handled)
        missing = MISSING_BY_KIND[table.kind]
        page = neutron_page(
            chosen,
            req.query,
            lookup=lambda marker: table.require(marker, missing),
            url=req.base_url + req.path,
        )
        shown = page.rows
        if table is self.n.security_groups:
            shown = [self.n.render_security_group(row) for row in shown]
        if table is self.n.floatingips:
            shown = [_public(row) for row in shown]
        body: dict[str, Any] = {collection: project_fields(shown, req.query)}
        # Neutron adds the links only when it pages, i.e. when the client sent a limit.
        if page.links:
            body[f"{collection}_links"] = page.links
        return ok(body)

    # -- extensions
    def extensions(self, req: Req) -> Reply:
        items = [
            {
                "alias": alias,
                "name": name,
                "description": name,
                "updated": "2013-01-01T10:00:00-00:00",
                "links": [],
            }
            for alias, name in EXTENSIONS
            if self.n.extension_enabled(alias)
        ]
        return ok({"extensions": items})

    def extension(self, req: Req) -> Reply:
        alias = req.match["alias"]
        for known, name in EXTENSIONS:
            if known == alias and self.n.extension_enabled(alias):
                return ok(
                    {
                        "extension": {
                            "alias": alias,
                            "name": name,
                            "description": name,
                            "updated": "2013-01-01T10:00:00-00:00",
                            "links": [],
                        }
                    }
                )
        raise not_found(f"Extension with alias {alias} does not exist")

    # -- networks
    def networks(self, req: Req) -> Reply:
        return self.listing(req, self.n.networks, "networks")

    def network(self, req: Req) -> Reply:
        return ok({"network": self.n.networks.require(req.match["id"], NETWORK_MISSING)})

    def create_network(self, req: Req) -> Reply:
        body = json_object(req, "network")
        _check_fields(body, NETWORK_FIELDS, self.n)
        extra = {
            k: v
            for k, v in body.items()
            if k not in {"name", "router:external", "tenant_id", "project_id"}
        }
        row = self.n.create_network(
            str(body.get("name", "")), external=bool(body.get("router:external")), **extra
        )
        return created({"network": row})

    def update_network(self, req: Req) -> Reply:
        row = self.n.networks.require(req.match["id"], NETWORK_MISSING)
        body = json_object(req, "network")
        _check_fields(body, NETWORK_FIELDS, self.n)
        _check_update(body)
        return ok({"network": _bump(self.n.networks, row, body)})

    def delete_network(self, req: Req) -> Reply:
        network_id = req.match["id"]
        self.n.networks.require(network_id, NETWORK_MISSING)
        if self.n.ports.with_value("network_id", network_id):
            raise conflict(
                f"Unable to complete operation on network {network_id}. There are one or "
                "more ports still in use on the network.",
                kind="NetworkInUse",
            )
        for subnet in [s for s in self.n.subnets if s["network_id"] == network_id]:
            self.n.subnets.delete(subnet["id"])
        self.n.networks.delete(network_id)
        return NO_CONTENT

    # -- subnets
    def subnets(self, req: Req) -> Reply:
        return self.listing(req, self.n.subnets, "subnets")

    def subnet(self, req: Req) -> Reply:
        return ok({"subnet": self.n.subnet_of(req.match["id"])})

    def create_subnet(self, req: Req) -> Reply:
        body = json_object(req, "subnet")
        _check_fields(body, SUBNET_FIELDS, self.n)
        network_id, cidr = body.get("network_id"), body.get("cidr")
        if not isinstance(network_id, str) or not isinstance(cidr, str):
            raise bad_request("Invalid input for operation: network_id and cidr are required.")
        try:
            net = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            raise bad_request(
                f"Invalid input for cidr. Reason: '{cidr}' is not a valid IP subnet."
            ) from None
        gateway = body.get("gateway_ip", str(net.network_address + 1))
        pools = body.get("allocation_pools")
        pool = (pools[0]["start"], pools[0]["end"]) if pools else None
        row = self.n.create_subnet(
            network_id,
            str(body.get("name", "")),
            cidr,
            gateway_ip=gateway,
            pool=pool,
            tags=string_list(body, "tags"),
        )
        return created({"subnet": row})

    def update_subnet(self, req: Req) -> Reply:
        row = self.n.subnet_of(req.match["id"])
        body = json_object(req, "subnet")
        _check_fields(body, SUBNET_FIELDS, self.n)
        _check_update(body)
        return ok({"subnet": _bump(self.n.subnets, row, body)})

    # -- ports
    def ports(self, req: Req) -> Reply:
        rows = self.n.port_candidates(req.query)
        rows = [p for p in rows if _fixed_ips_match(p, req.query.getall("fixed_ips", []))]
        wanted_sgs = set(query_values(req.query, "security_groups"))
        if wanted_sgs:
            rows = [p for p in rows if wanted_sgs & set(p["security_groups"])]
        return self.listing(
            req, self.n.ports, "ports", rows, handled=frozenset({"fixed_ips", "security_groups"})
        )

    def port(self, req: Req) -> Reply:
        return ok({"port": self.n.ports.require(req.match["id"], PORT_MISSING)})

    def create_port(self, req: Req) -> Reply:
        body = json_object(req, "port")
        _check_fields(body, PORT_FIELDS, self.n)
        network_id = body.get("network_id")
        if not isinstance(network_id, str):
            raise bad_request("Invalid input for operation: network_id is required.")
        fixed = body.get("fixed_ips")
        if fixed is not None and not (
            isinstance(fixed, list) and all(isinstance(e, dict) for e in fixed)
        ):
            raise bad_request("Invalid input for fixed_ips: a list of objects is required.")
        sgs = string_list(body, "security_groups")
        for sg in sgs or []:
            self.n.security_groups.require(sg, SG_MISSING)
        row = self.n.create_port(
            network_id,
            name=str(body.get("name", "")),
            device_id=str(body.get("device_id", "")),
            device_owner=str(body.get("device_owner", "")),
            fixed_ips=fixed,
            security_groups=sgs,
            port_security=body.get("port_security_enabled", True) is not False,
        )
        pairs = body.get("allowed_address_pairs")
        if pairs:
            row["allowed_address_pairs"] = _address_pairs(row, pairs)
        return created({"port": row})

    def update_port(self, req: Req) -> Reply:
        row = self.n.ports.require(req.match["id"], PORT_MISSING)
        body = json_object(req, "port")
        _check_fields(body, PORT_FIELDS, self.n)
        _check_update(body)
        if body.get("fixed_ips") is not None:
            raise bad_request("Updating fixed_ips is not supported by the simulator.")
        changes = dict(body)
        security = body.get("port_security_enabled", row["port_security_enabled"])
        if "security_groups" in body:
            sgs = string_list(body, "security_groups") or []
            for sg in sgs:
                self.n.security_groups.require(sg, SG_MISSING)
            if sgs and security is False:
                raise conflict(
                    "Port has security group associated. Cannot disable port security or ip "
                    "address until security group is removed",
                    kind="PortSecurityAndIPRequiredForSecurityGroups",
                )
            changes["security_groups"] = sgs
        if "allowed_address_pairs" in body:
            changes["allowed_address_pairs"] = _address_pairs(
                row | {"port_security_enabled": security}, body["allowed_address_pairs"]
            )
        if "device_id" in body:
            self.n._unindex_device(row["id"], row["device_id"])
            self.n._index_device(row["id"], str(body["device_id"]))
        return ok({"port": _bump(self.n.ports, row, changes)})

    def delete_port(self, req: Req) -> Reply:
        port = self.n.ports.rows.get(req.match["id"])
        if (
            port is not None
            and port["device_owner"] in ROUTER_PORT_OWNERS
            and port["device_id"] in self.n.routers.rows
        ):
            # l3_db.prevent_l3_port_deletion: a router's ports go through the router API.
            raise conflict(
                f"Port {port['id']} cannot be deleted directly via the port API: has device "
                f"owner {port['device_owner']}.",
                kind="ServicePortInUse",
            )
        self.n.delete_port(req.match["id"])
        return NO_CONTENT

    # -- floating IPs
    def floatingips(self, req: Req) -> Reply:
        return self.listing(
            req, self.n.floatingips, "floatingips", self.n.fip_candidates(req.query)
        )

    def floatingip(self, req: Req) -> Reply:
        return ok({"floatingip": _public(self.n.floatingips.require(req.match["id"], FIP_MISSING))})

    def create_floatingip(self, req: Req) -> Reply:
        body = json_object(req, "floatingip")
        _check_fields(body, FIP_FIELDS, self.n)
        return created({"floatingip": _public(self.n.create_floating_ip(body))})

    def update_floatingip(self, req: Req) -> Reply:
        row = self.n.floatingips.require(req.match["id"], FIP_MISSING)
        body = json_object(req, "floatingip")
        _check_fields(body, FIP_FIELDS, self.n)
        _check_update(body)
        if "port_id" in body:
            port_id = body["port_id"]
            self.n._associate(
                row, None if port_id is None else str(port_id), body.get("fixed_ip_address")
            )
        changes = {k: v for k, v in body.items() if k in {"description", "name"}}
        return ok({"floatingip": _public(_bump(self.n.floatingips, row, changes))})

    def delete_floatingip(self, req: Req) -> Reply:
        self.n.delete_floating_ip(req.match["id"])
        return NO_CONTENT

    # -- routers
    def routers(self, req: Req) -> Reply:
        return self.listing(req, self.n.routers, "routers")

    def router(self, req: Req) -> Reply:
        router = self.n.routers.require(req.match["id"], ROUTER_MISSING)
        return ok({"router": self.n.render_router(router)})

    def create_router(self, req: Req) -> Reply:
        body = json_object(req, "router")
        _check_fields(body, ROUTER_FIELDS, self.n)
        if "routes" in body:
            # extraroute's `routes` is PUT-only in Neutron's attribute map.
            raise bad_request("Attribute 'routes' not allowed in POST")
        gateway = body.get("external_gateway_info") or {}
        if not isinstance(gateway, dict):
            raise bad_request("Invalid input for external_gateway_info: a dict is required.")
        network_id = gateway.get("network_id")
        router = self.n.create_router(
            str(body.get("name", "")),
            external_network_id=None if network_id is None else str(network_id),
            enable_snat=gateway.get("enable_snat", True) is not False,
            admin_state_up=body.get("admin_state_up", True) is not False,
        )
        if body.get("description"):
            router["description"] = str(body["description"])
        if body.get("tags"):
            router["tags"] = string_list(body, "tags")
        return created({"router": self.n.render_router(router)})

    def delete_router(self, req: Req) -> Reply:
        self.n.delete_router(req.match["id"])
        return NO_CONTENT

    def update_router(self, req: Req) -> Reply:
        row = self.n.routers.require(req.match["id"], ROUTER_MISSING)
        body = json_object(req, "router")
        _check_fields(body, ROUTER_FIELDS, self.n)
        _check_update(body)
        if "external_gateway_info" in body:
            raise bad_request("Changing the router gateway is not supported by the simulator.")
        changes = dict(body)
        if "routes" in body:
            routes = self.n.validate_routes(row["id"], body["routes"])
            self.n.check_route_count(len(routes))
            self.n.route_set(row["id"]).replace(routes)
            changes["routes"] = routes
        return ok({"router": self.n.render_router(_bump(self.n.routers, row, changes))})

    def extraroutes(self, req: Req, *, add: bool) -> Reply:
        if not self.n.extension_enabled("extraroute-atomic"):
            raise not_found("The resource could not be found.")
        row = self.n.routers.require(req.match["id"], ROUTER_MISSING)
        body = json_object(req, "router")
        reject_unknown(body, frozenset({"routes"}), message=UNKNOWN_ATTRIBUTES)
        # Neutron merges the call's routes into the router's and writes the whole set
        # (`_add_extra_routes`, then `update_router`); only the call's routes are new here,
        # the others were checked when they were added.
        given = self.n.validate_routes(row["id"], body.get("routes", []))
        held = self.n.route_set(row["id"])
        if add:
            fresh = held.new(given)
            self.n.check_route_count(len(held) + len(fresh))
            held.add(fresh)
            # In place: the list is the router's own, and only the call's routes are new.
            row["routes"].extend(fresh)
            _bump(self.n.routers, row, {})
        else:
            held.remove(held.held(given))
            _bump(self.n.routers, row, {"routes": held.listed()})
        return ok({"router": self.n.render_router(row)})

    def router_interface(self, req: Req, *, add: bool) -> Reply:
        """PUT add_router_interface / remove_router_interface: the body names `subnet_id`
        or `port_id` (not wrapped in `router`; other keys are ignored). The router is
        looked up first, as Neutron's API layer does for every member action."""
        router_id = req.match["id"]
        self.n.routers.require(router_id, ROUTER_MISSING)
        body = {} if req.body is None else req.body
        if not isinstance(body, dict):
            # Neutron 29 fails on it (`interface_info.get`): its generic 500.
            raise ApiError(
                500, "Request Failed: internal server error while processing your request."
            )
        port_id, subnet_id = _interface_ids(body, removing=not add)
        if not add:
            info = self.n.remove_router_interface(router_id, port_id=port_id, subnet_id=subnet_id)
        elif port_id is not None:
            info = self.n.add_router_interface_port(router_id, port_id)
        else:
            assert subnet_id is not None
            info = self.n.add_router_interface(router_id, subnet_id)
        _bump(self.n.routers, self.n.routers.rows[router_id], {})
        return ok(info)

    # -- security groups
    def security_groups(self, req: Req) -> Reply:
        return self.listing(req, self.n.security_groups, "security_groups")

    def security_group(self, req: Req) -> Reply:
        group = self.n.security_groups.require(req.match["id"], SG_MISSING)
        return ok({"security_group": self.n.render_security_group(group)})

    def create_security_group(self, req: Req) -> Reply:
        body = json_object(req, "security_group")
        _check_fields(body, SG_FIELDS, self.n)
        group = self.n.create_security_group(
            str(body.get("name", "")), str(body.get("description", ""))
        )
        if body.get("tags"):
            group["tags"] = string_list(body, "tags")
        return created({"security_group": self.n.render_security_group(group)})

    def update_security_group(self, req: Req) -> Reply:
        group = self.n.security_groups.require(req.match["id"], SG_MISSING)
        body = json_object(req, "security_group")
        _check_fields(body, SG_FIELDS, self.n)
        _check_update(body)
        return ok(
            {
                "security_group": self.n.render_security_group(
                    _bump(self.n.security_groups, group, body)
                )
            }
        )

    def delete_security_group(self, req: Req) -> Reply:
        sg_id = req.match["id"]
        self.n.security_groups.require(sg_id, SG_MISSING)
        if self.n.ports.with_value("security_groups", sg_id):
            raise conflict(f"Security Group {sg_id} in use.", kind="SecurityGroupInUse")
        for rule in self.n.security_group_rules.with_value("security_group_id", sg_id):
            self.n.security_group_rules.delete(rule["id"])
        self.n.security_groups.delete(sg_id)
        return NO_CONTENT

    def rules(self, req: Req) -> Reply:
        return self.listing(req, self.n.security_group_rules, "security_group_rules")

    def rule(self, req: Req) -> Reply:
        return ok(
            {
                "security_group_rule": self.n.security_group_rules.require(
                    req.match["id"], RULE_MISSING
                )
            }
        )

    def create_rule(self, req: Req) -> Reply:
        body = json_object(req, "security_group_rule")
        _check_fields(body, RULE_FIELDS, self.n)
        fields = _rule_fields(body)
        self.n.security_groups.require(fields["security_group_id"], SG_MISSING)
        for rule in self.n.security_group_rules.with_value(
            "security_group_id", fields["security_group_id"]
        ):
            if _rule_key(rule) == _rule_key(fields):
                raise conflict(
                    f"Security group rule already exists. Rule id is {rule['id']}.",
                    kind="SecurityGroupRuleExists",
                )
        return created({"security_group_rule": self.n._insert_rule(fields)})

    def delete_rule(self, req: Req) -> Reply:
        self.n.security_group_rules.require(req.match["id"], RULE_MISSING)
        self.n.security_group_rules.delete(req.match["id"])
        return NO_CONTENT

    # -- tags
    def tag_table(self, req: Req) -> Table:
        tables = {
            "networks": self.n.networks,
            "subnets": self.n.subnets,
            "ports": self.n.ports,
            "floatingips": self.n.floatingips,
            "routers": self.n.routers,
            "security-groups": self.n.security_groups,
        }
        return tables[req.match["collection"]]

    def tagged(self, req: Req) -> Record:
        table = self.tag_table(req)
        return table.require(
            req.match["id"], _missing(table.kind.replace("_", " ").capitalize(), "NotFound")
        )

    def get_tags(self, req: Req) -> Reply:
        return ok({"tags": self.tagged(req)["tags"]})

    def check_tag(self, req: Req) -> Reply:
        if req.match["tag"] not in self.tagged(req)["tags"]:
            raise not_found(f"Tag {req.match['tag']} could not be found.", kind="TagNotFound")
        return NO_CONTENT

    def replace_tags(self, req: Req) -> Reply:
        row = self.tagged(req)
        body = req.body
        if not isinstance(body, dict) or string_list(body, "tags") is None:
            raise bad_request("Invalid input: tags must be a list of strings.")
        _bump(self.tag_table(req), row, {"tags": list(dict.fromkeys(body["tags"]))})
        return ok({"tags": row["tags"]})

    def add_tag(self, req: Req) -> Reply:
        row = self.tagged(req)
        if req.match["tag"] not in row["tags"]:
            _bump(self.tag_table(req), row, {"tags": [*row["tags"], req.match["tag"]]})
        return Reply(201)

    def delete_tag(self, req: Req) -> Reply:
        row = self.tagged(req)
        tag = req.match["tag"]
        if tag not in row["tags"]:
            raise not_found(f"Tag {tag} could not be found.", kind="TagNotFound")
        _bump(self.tag_table(req), row, {"tags": [t for t in row["tags"] if t != tag]})
        return NO_CONTENT

    def delete_all_tags(self, req: Req) -> Reply:
        _bump(self.tag_table(req), self.tagged(req), {"tags": []})
        return NO_CONTENT


def _fixed_ips_match(port: Record, constraints: list[str]) -> bool:
    """`fixed_ips=ip_address=X` / `fixed_ips=subnet_id=Y`: every constraint must hold."""
    for constraint in constraints:
        name, _, value = constraint.partition("=")
        if not any(entry.get(name) == value for entry in port["fixed_ips"]):
            return False
    return True


def _interface_ids(body: Record, *, removing: bool) -> tuple[str | None, str | None]:
    """(port_id, subnet_id) of a router-interface body, checked as
    l3_db._validate_interface_info checks them (both are allowed only on removal)."""
    if "port_id" not in body and "subnet_id" not in body:
        raise _bad_router("Either subnet_id or port_id must be specified.")
    for key in ("port_id", "subnet_id"):
        if key in body and not _is_uuid(body[key]):
            raise _bad_router(f"'{body[key]}' is not a valid UUID.")
    if not removing and "port_id" in body and "subnet_id" in body:
        raise _bad_router("Cannot specify both subnet-id and port-id.")
    port_id, subnet_id = body.get("port_id"), body.get("subnet_id")
    return (
        None if port_id is None else str(port_id),
        None if subnet_id is None else str(subnet_id),
    )


def _is_uuid(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _address_pairs(port: Record, pairs: Any) -> list[dict[str, str]]:
    if not isinstance(pairs, list) or not all(
        isinstance(p, dict) and "ip_address" in p for p in pairs
    ):
        raise bad_request("Invalid input for allowed_address_pairs: each pair needs ip_address.")
    if pairs and port["port_security_enabled"] is False:
        raise conflict(
            "Port Security must be enabled in order to have allowed address pairs on a port.",
            kind="AddressPairAndPortSecurityRequired",
        )
    result: list[dict[str, str]] = []
    for pair in pairs:
        try:
            ipaddress.ip_network(pair["ip_address"], strict=False)
        except (ValueError, TypeError):
            raise bad_request(
                f"'{pair['ip_address']}' is not a valid IP address or CIDR."
            ) from None
        entry = {
            "ip_address": str(pair["ip_address"]),
            "mac_address": str(pair.get("mac_address") or port["mac_address"]),
        }
        if entry in result:
            raise bad_request(
                "Request contains duplicate address pair: mac_address "
                f"{entry['mac_address']} ip_address {entry['ip_address']}.",
                kind="DuplicateAddressPairInRequest",
            )
        result.append(entry)
    return result


def _rule_fields(body: Record) -> Record:
    if body.get("direction") not in {"ingress", "egress"}:
        raise bad_request(
            f"Invalid input for direction. Reason: {body.get('direction')!r} is not in "
            "['ingress', 'egress']."
        )
    if not isinstance(body.get("security_group_id"), str):
        raise bad_request("Invalid input for operation: security_group_id is required.")
    ethertype = body.get("ethertype", "IPv4")
    if ethertype not in {"IPv4", "IPv6"}:
        raise bad_request(
            f"Invalid input for ethertype. Reason: {ethertype!r} is not in ['IPv4', 'IPv6']."
        )
    protocol = body.get("protocol")
    protocol = None if protocol in (None, "any") else str(protocol).lower()
    low, high = body.get("port_range_min"), body.get("port_range_max")
    if protocol in PORT_PROTOCOLS and (low is not None or high is not None):
        _check_port_range(low, high)
    prefix = body.get("remote_ip_prefix")
    if prefix is not None:
        try:
            network = ipaddress.ip_network(prefix, strict=False)
        except (ValueError, TypeError):
            raise bad_request(f"Invalid input for remote_ip_prefix: '{prefix}'.") from None
        if ethertype != f"IPv{network.version}":
            # Neutron's _validate_ip_prefix: the rule's family and its prefix's must agree.
            raise bad_request(
                f"Conflicting value ethertype {ethertype} for CIDR {prefix}",
                kind="SecurityGroupRuleParameterConflict",
            )
        prefix = str(network)
    return {
        **body,
        "ethertype": ethertype,
        "protocol": protocol,
        "remote_ip_prefix": prefix,
        "port_range_min": low,
        "port_range_max": high,
    }


def _check_port_range(low: Any, high: Any) -> None:
    valid = all(isinstance(v, int) and 0 < v < 65536 for v in (low, high))
    if not valid or low > high:
        raise bad_request(f"Invalid port range {low}:{high}.", kind="SecurityGroupInvalidPortRange")


def _rule_key(rule: Record) -> tuple[Any, ...]:
    return (
        rule["security_group_id"],
        rule["direction"],
        rule.get("ethertype", "IPv4"),
        rule.get("protocol"),
        rule.get("port_range_min"),
        rule.get("port_range_max"),
        rule.get("remote_ip_prefix"),
        rule.get("remote_group_id"),
    )


def routes(neutron: Neutron) -> list[Route]:
    """Neutron's routes under `/network`."""
    api = NeutronApi(neutron)
    p = PREFIX
    table: list[Route] = [
        Route("GET", "/network", _versions, auth=False),
        Route("GET", "/network/", _versions, auth=False),
        Route("GET", f"{p}/extensions", api.extensions),
        Route("GET", f"{p}/extensions/{{alias}}", api.extension),
        Route("PUT", f"{p}/routers/{{id}}/add_extraroutes", lambda r: api.extraroutes(r, add=True)),
        Route(
            "PUT", f"{p}/routers/{{id}}/remove_extraroutes", lambda r: api.extraroutes(r, add=False)
        ),
        Route(
            "PUT",
            f"{p}/routers/{{id}}/add_router_interface",
            lambda r: api.router_interface(r, add=True),
        ),
        Route(
            "PUT",
            f"{p}/routers/{{id}}/remove_router_interface",
            lambda r: api.router_interface(r, add=False),
        ),
    ]
    crud = {
        "networks": (
            api.networks,
            api.network,
            api.create_network,
            api.update_network,
            api.delete_network,
        ),
        "subnets": (api.subnets, api.subnet, api.create_subnet, api.update_subnet, None),
        "ports": (api.ports, api.port, api.create_port, api.update_port, api.delete_port),
        "floatingips": (
            api.floatingips,
            api.floatingip,
            api.create_floatingip,
            api.update_floatingip,
            api.delete_floatingip,
        ),
        "routers": (
            api.routers,
            api.router,
            api.create_router,
            api.update_router,
            api.delete_router,
        ),
        "security-groups": (
            api.security_groups,
            api.security_group,
            api.create_security_group,
            api.update_security_group,
            api.delete_security_group,
        ),
        "security-group-rules": (api.rules, api.rule, api.create_rule, None, api.delete_rule),
    }
    for name, (listing, get, create, update, delete) in crud.items():
        table.append(Route("GET", f"{p}/{name}", listing))
        table.append(Route("GET", f"{p}/{name}/{{id}}", get))
        if create is not None:
            table.append(Route("POST", f"{p}/{name}", create))
        if update is not None:
            table.append(Route("PUT", f"{p}/{name}/{{id}}", update))
        if delete is not None:
            table.append(Route("DELETE", f"{p}/{name}/{{id}}", delete))
    tags = (
        f"{p}/{{collection:networks|subnets|ports|floatingips|routers|security-groups}}/{{id}}/tags"
    )
    table += [
        Route("GET", tags, api.get_tags),
        Route("PUT", tags, api.replace_tags),
        Route("DELETE", tags, api.delete_all_tags),
        Route("GET", f"{tags}/{{tag}}", api.check_tag),
        Route("PUT", f"{tags}/{{tag}}", api.add_tag),
        Route("DELETE", f"{tags}/{{tag}}", api.delete_tag),
    ]
    return table
