"""Octavia (load-balancer v2): load balancers, listeners, pools, members, health monitors.

This is where a CCM spends its cloud time, so the parts it depends on are emulated
closely: the fully populated create (listeners → default pool → members → monitor in one
POST) with a VIP port created in Neutron; the provisioning state machine, where every
write puts the load balancer in PENDING_* for `provisioning_delay_s` (driven by the event
loop's `call_later`) and any further write to it or its children answers 409 "immutable"
until it is ACTIVE again; cascade and non-cascade deletes; the batch member PUT (202);
the validations a CCM trips over (duplicate listener port, pool/listener protocol pairs,
monitor timeout > delay, quota); and API-version gating of fields (tags need 2.5,
allowed_cidrs 2.12, ...) from the configurable top of the version list.

Operating status is computed when a row is rendered, from members and the
`down_member_addresses` knob, so it follows members without timers.
"""

from __future__ import annotations

import functools
import ipaddress
import operator
import sys
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec.structs import asdict
from multidict import MultiMapping

from pyccm_sim.openstack.errors import ApiError, bad_request, conflict, not_found
from pyccm_sim.openstack.members import (
    BATCH_FIELDS,
    MAX_STRING,
    Member,
    MemberBody,
    MemberTable,
    MemberView,
    PoolMembers,
    shared,
)
from pyccm_sim.openstack.neutron import Neutron
from pyccm_sim.openstack.octavia_catalog import Catalog
from pyccm_sim.openstack.pagination import octavia_page
from pyccm_sim.openstack.routing import NO_CONTENT, Handler, Reply, Req, Route, created, ok
from pyccm_sim.openstack.settings import Knobs, version_minor
from pyccm_sim.openstack.store import (
    PAGING_PARAMS,
    Counters,
    Ids,
    Record,
    Table,
    field_matches,
    now_iso,
    project_fields,
    select,
)

PREFIXES = ("/load-balancer/v2", "/load-balancer/v2.0")
PROVIDERS = {
    "amphora": "Amphora provider",
    "octavia": "Alias of amphora",
    "amphorav2": "Amphora v2",
    "ovn": "Octavia OVN driver",
}
LISTENER_PROTOCOLS = frozenset(
    {"HTTP", "HTTPS", "TCP", "TERMINATED_HTTPS", "UDP", "SCTP", "PROMETHEUS"}
)
POOL_PROTOCOLS_FOR = {
    "TCP": frozenset({"HTTP", "HTTPS", "PROXY", "PROXYV2", "TCP"}),
    "HTTP": frozenset({"HTTP", "PROXY", "PROXYV2"}),
    "HTTPS": frozenset({"HTTPS", "PROXY", "PROXYV2", "TCP"}),
    "TERMINATED_HTTPS": frozenset({"HTTP", "PROXY", "PROXYV2"}),
    "UDP": frozenset({"UDP"}),
    "SCTP": frozenset({"SCTP"}),
    "PROMETHEUS": frozenset(),
}
POOL_PROTOCOLS = frozenset({"HTTP", "HTTPS", "TCP", "UDP", "SCTP", "PROXY", "PROXYV2"})
ALGORITHMS = frozenset({"ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT"})
MONITOR_TYPES = frozenset({"HTTP", "HTTPS", "PING", "TCP", "TLS-HELLO", "UDP-CONNECT", "SCTP"})
# octavia_lib's SUPPORTED_HTTP_HEADERS and SUPPORTED_SSL_HEADERS.
HTTP_HEADERS = frozenset(
    {"X-Forwarded-For", "X-Forwarded-Port", "X-Forwarded-Proto", "X-Forwarded-IP", "X-Client-IP"}
    | {"X-Real-IP"}
)
SSL_HEADERS = frozenset(
    {"X-SSL-Client-Verify", "X-SSL-Client-Has-Cert", "X-SSL-Client-DN", "X-SSL-Client-CN"}
    | {"X-SSL-Issuer", "X-SSL-Client-SHA1", "X-SSL-Client-Not-Before", "X-SSL-Client-Not-After"}
)
PERSISTENCE_TYPES = frozenset({"SOURCE_IP", "HTTP_COOKIE", "APP_COOKIE"})
# Minimum API minor version for a field; below it Octavia's API does not know the field.
FIELD_MIN_MINOR = {
    "tags": 5,
    "flavor_id": 6,
    "allowed_cidrs": 12,
    "availability_zone": 14,
    "timeout_client_data": 1,
    "timeout_member_connect": 1,
    "timeout_member_data": 1,
    "timeout_tcp_inspect": 1,
    "additional_vips": 26,
}
COMMON = frozenset({"name", "description", "admin_state_up", "tags", "project_id", "tenant_id"})
LB_CREATE = COMMON | {
    "provider",
    "vip_subnet_id",
    "vip_network_id",
    "vip_port_id",
    "vip_address",
    "vip_qos_policy_id",
    "flavor_id",
    "availability_zone",
    "listeners",
    "pools",
    "additional_vips",
}
LB_UPDATE = frozenset({"name", "description", "admin_state_up", "tags", "vip_qos_policy_id"})
TIMEOUTS = frozenset(
    {"timeout_client_data", "timeout_member_connect", "timeout_member_data", "timeout_tcp_inspect"}
)
LISTENER_UPDATE = (
    frozenset(
        {
            "name",
            "description",
            "admin_state_up",
            "tags",
            "connection_limit",
            "default_pool_id",
            "default_tls_container_ref",
            "sni_container_refs",
            "insert_headers",
            "allowed_cidrs",
        }
    )
    | TIMEOUTS
)
LISTENER_CREATE = LISTENER_UPDATE | {
    "protocol",
    "protocol_port",
    "loadbalancer_id",
    "default_pool",
    "project_id",
    "tenant_id",
    "l7policies",
}
POOL_UPDATE = frozenset(
    {
        "name",
        "description",
        "admin_state_up",
        "tags",
        "lb_algorithm",
        "session_persistence",
        "tls_enabled",
    }
)
POOL_CREATE = POOL_UPDATE | {
    "protocol",
    "listener_id",
    "loadbalancer_id",
    "members",
    "healthmonitor",
    "project_id",
    "tenant_id",
}
MEMBER_UPDATE = frozenset(
    {"name", "admin_state_up", "tags", "weight", "backup", "monitor_address", "monitor_port"}
)
MEMBER_CREATE = MEMBER_UPDATE | {"address", "protocol_port", "subnet_id", "project_id", "tenant_id"}
MEMBER_FIELDS = (
    "name",
    "address",
    "protocol_port",
    "subnet_id",
    "weight",
    "backup",
    "monitor_address",
    "monitor_port",
    "admin_state_up",
)
HM_UPDATE = frozenset(
    {
        "name",
        "admin_state_up",
        "tags",
        "delay",
        "timeout",
        "max_retries",
        "max_retries_down",
        "url_path",
        "http_method",
        "expected_codes",
        "http_version",
        "domain_name",
    }
)
HM_CREATE = HM_UPDATE | {"pool_id", "type", "project_id", "tenant_id"}
HTTP_MONITORS = frozenset({"HTTP", "HTTPS"})
PENDING_OR_ERROR = frozenset({"PENDING_CREATE", "ERROR"})
# Body fields Octavia's WSME types declare as UuidType: anything else there is a 400.
UUID_FIELDS = frozenset(
    {
        "flavor_id",
        "loadbalancer_id",
        "listener_id",
        "pool_id",
        "default_pool_id",
        "subnet_id",
        "vip_subnet_id",
        "vip_network_id",
        "vip_port_id",
        "vip_qos_policy_id",
    }
)
# Columns Octavia filters on but renders only as lists of ids (`loadbalancers: [{id}]`),
# per collection: query name -> the hidden column holding it. Octavia maps the query's
# `loadbalancer_id` to its `load_balancer_id` column; the rest are rendered fields, which
# `select` filters on as they are.
RELATION_FILTERS: dict[str, dict[str, str]] = {
    "listeners": {"loadbalancer_id": "_lb_id"},
    "pools": {"loadbalancer_id": "_lb_id"},
    "members": {"pool_id": "_pool_id"},
    "healthmonitors": {"pool_id": "_pool_id"},
}

Schedule = Callable[[float, Callable[[], None]], None]
# oslo_utils.strutils.TRUE_STRINGS: how `additive_only=...` says yes.
TRUE_STRINGS = frozenset({"1", "t", "true", "on", "y", "yes"})
# A batch update compares these of each member it keeps (C-level getters: 5,000 a call).
BATCH_VALUES = operator.itemgetter(*BATCH_FIELDS)
BATCH_ATTRIBUTES = operator.attrgetter(*BATCH_FIELDS)


def _missing(label: str) -> Callable[[str], ApiError]:
    # Octavia's NotFound: "%(resource)s %(id)s not found." (octavia/common/exceptions.py).
    return lambda row_id: not_found(f"{label} {row_id} not found.")


LB_MISSING = _missing("Load Balancer")
LISTENER_MISSING = _missing("Listener")
POOL_MISSING = _missing("Pool")
MEMBER_MISSING = _missing("Member")
HM_MISSING = _missing("Health Monitor")


def immutable(resource: str, row_id: str) -> ApiError:
    """ImmutableObject: a write to a child while its load balancer (or pool) is busy."""
    return conflict(f"{resource} {row_id} is immutable and cannot be updated.")


def pending_state(lb: Record) -> ApiError:
    """LBPendingStateError: a PUT or DELETE of the load balancer itself while it is busy."""
    return conflict(
        f"Invalid state {lb['provisioning_status']} of loadbalancer resource {lb['id']}"
    )


def member_in_use(address: str, port: int) -> ApiError:
    """DuplicateMemberEntry: another member of the pool has this address and port."""
    return conflict(
        f"Another member on this pool is already using ip {address} on protocol_port {port}"
    )


def unexpected(message: str) -> ApiError:
    """What Octavia's WSME fault handler answers for an exception it did not expect."""
    return ApiError(500, message)


@dataclass
class Operation:
    """One write in flight: which rows finish as ACTIVE and which disappear."""

    lb_id: str
    activate: list[tuple[Table, str]] = field(default_factory=list)
    remove: list[tuple[Table, str]] = field(default_factory=list)
    # Members are not in a Table (see members.py): the objects themselves.
    activate_members: list[Member] = field(default_factory=list)
    remove_members: list[Member] = field(default_factory=list)
    lb_removed: bool = False
    error: bool = False


class Octavia:
    def __init__(
        self,
        *,
        ids: Ids,
        counters: Counters,
        knobs: Knobs,
        neutron: Neutron,
        project_id: str,
        schedule: Schedule,
    ) -> None:
        self._ids = ids
        self._knobs = knobs
        self._neutron = neutron
        self._project_id = project_id
        self._schedule = schedule
        # The filters clients list by get an index (pyccm finds its load balancers by
        # name, their listeners and pools by load balancer), so no list costs more
        # with the number of unrelated load balancers.
        by_name = {"name": "name"}
        self.loadbalancers = Table(
            "loadbalancer", counters, indexed=by_name | {"vip_port_id": "vip_port_id"}
        )
        self.listeners = Table(
            "listener", counters, indexed=by_name | {"loadbalancer_id": "_lb_id"}
        )
        self.pools = Table("pool", counters, indexed=by_name | {"loadbalancer_id": "_lb_id"})
        self.members = MemberTable(counters)
        self.healthmonitors = Table(
            "healthmonitor", counters, indexed=by_name | {"pool_id": "_pool_id"}
        )
        # Flavors and availability zones, as an operator makes them (admin API).
        self.catalog = Catalog(ids=ids, counters=counters, providers=PROVIDERS)
        # Load balancers an operator pinned in PENDING_UPDATE (fault drill).
        self.stuck: set[str] = set()

    def lb_uses(self, field: str, value: str) -> bool:
        """Whether a load balancer has `field` == `value` (a flavor or zone in use)."""
        return any(lb[field] == value for lb in self.loadbalancers)

    @property
    def minor(self) -> int:
        return version_minor(self._knobs.octavia_version)

    # -- state machine ---------------------------------------------------------------------

    def mutable_lb(self, lb_id: str) -> Record:
        """The load balancer a child write needs ACTIVE, else 409 ImmutableObject."""
        lb = self.loadbalancers.require(lb_id, LB_MISSING)
        if lb["provisioning_status"] != "ACTIVE":
            raise immutable("Load Balancer", lb_id)
        return lb

    def settable_lb(self, lb_id: str, *, deleting: bool = False) -> Record:
        """The load balancer its own PUT (ACTIVE) or DELETE (ACTIVE or ERROR) needs.

        Octavia's LoadBalancersController answers these with LBPendingStateError, a
        wording of its own, where every child controller answers ImmutableObject.
        """
        lb = self.loadbalancers.require(lb_id, LB_MISSING)
        allowed = {"ACTIVE", "ERROR"} if deleting else {"ACTIVE"}
        if lb["provisioning_status"] not in allowed:
            raise pending_state(lb)
        return lb

    def mutable_pool(self, pool: Record) -> Record:
        """Members and monitors check their pool first (ImmutableObject "Pool ..."), then
        its load balancer; the pool is PENDING_UPDATE after any member or monitor write."""
        if pool["provisioning_status"] != "ACTIVE":
            raise immutable("Pool", pool["id"])
        return self.mutable_lb(pool["_lb_id"])

    def lock(self, op: Operation, table: Table, row: Record) -> None:
        """Put `row` in PENDING_UPDATE until `op` finishes (as Octavia's status locks do)."""
        row["provisioning_status"] = "PENDING_UPDATE"
        op.activate.append((table, row["id"]))

    def lock_listener_of(self, op: Operation, pool: Record) -> None:
        """The listener using `pool` as its default pool goes PENDING_UPDATE too."""
        listener = self.listeners.get(pool["_listener_id"] or "")
        if listener is not None:
            self.lock(op, self.listeners, listener)

    def lock_pool(self, op: Operation, pool: Record) -> None:
        self.lock(op, self.pools, pool)
        self.lock_listener_of(op, pool)

    def start(self, lb: Record, op: Operation, *, lb_status: str) -> None:
        """Mark the load balancer pending and finish `op` after the provisioning delay."""
        lb["provisioning_status"] = lb_status
        lb["updated_at"] = now_iso()
        self._schedule(self._knobs.provisioning_delay_s, lambda: self.finish(op))

    def finish(self, op: Operation) -> None:
        for table, row_id in op.remove:
            self._drop(table, row_id)
        for member in op.remove_members:
            self.members.delete(member)
        status = "ERROR" if op.error else "ACTIVE"
        for table, row_id in op.activate:
            row = table.get(row_id)
            if row is not None:
                row["provisioning_status"] = status
        for member in op.activate_members:
            member.provisioning_status = status
        lb = self.loadbalancers.get(op.lb_id)
        if lb is None:
            return
        if op.lb_removed:
            self._remove_lb(lb)
        elif op.lb_id in self.stuck:
            lb["provisioning_status"] = "PENDING_UPDATE"
        else:
            lb["provisioning_status"] = status

    def stick(self, lb_id: str) -> None:
        lb = self.loadbalancers.require(lb_id, LB_MISSING)
        self.stuck.add(lb_id)
        lb["provisioning_status"] = "PENDING_UPDATE"

    def release(self, lb_id: str) -> None:
        lb = self.loadbalancers.require(lb_id, LB_MISSING)
        self.stuck.discard(lb_id)
        if lb["provisioning_status"] == "PENDING_UPDATE":
            lb["provisioning_status"] = "ACTIVE"

    def _drop(self, table: Table, row_id: str) -> None:
        row = table.get(row_id)
        if row is None:
            return
        if table is self.pools:
            self.members.drop_pool(row_id)
            if row["healthmonitor_id"]:
                self._drop(self.healthmonitors, row["healthmonitor_id"])
            lb = self.loadbalancers.rows[row["_lb_id"]]
            for listener_id in lb["_listeners"]:
                listener = self.listeners.rows[listener_id]
                if listener["default_pool_id"] == row_id:
                    listener["default_pool_id"] = None
            lb["_pools"].remove(row_id)
        elif table is self.healthmonitors:
            self.pools.rows[row["_pool_id"]]["healthmonitor_id"] = None
        elif table is self.listeners:
            self.loadbalancers.rows[row["_lb_id"]]["_listeners"].remove(row_id)
        table.delete(row_id)

    def _remove_lb(self, lb: Record) -> None:
        for pool_id in list(lb["_pools"]):
            self._drop(self.pools, pool_id)
        for listener_id in list(lb["_listeners"]):
            self._drop(self.listeners, listener_id)
        if lb["_owns_vip_port"] and self._neutron.ports.get(lb["vip_port_id"]) is not None:
            self._neutron.delete_port(lb["vip_port_id"])
        self.stuck.discard(lb["id"])
        self.loadbalancers.delete(lb["id"])

    # -- validation helpers ------------------------------------------------------------------

    def check_fields(self, obj: Any, allowed: frozenset[str], argument: str) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise bad_request(
                f"Invalid input for field/attribute {argument}. Value: '{obj}'. Expected an object."
            )
        minor = self.minor
        names = obj.keys()
        if names <= allowed and names.isdisjoint(_fields_newer_than(minor)):
            unknown = []  # the common case, decided without a loop
        else:
            unknown = sorted(
                name for name in obj if name not in allowed or FIELD_MIN_MINOR.get(name, 0) > minor
            )
        if unknown:
            raise bad_request(
                f"Invalid input for field/attribute {argument}. Value: '{obj}'. "
                f"Unknown attribute for argument {argument}: {', '.join(unknown)}"
            )
        for name in UUID_FIELDS & obj.keys():
            _check_uuid(name, obj[name])
        return obj

    def known(self, row: Record, allowed: frozenset[str]) -> dict[str, Any]:
        """The fields of `row` a client could send at the current API version."""
        minor = self.minor
        return {
            k: v
            for k, v in row.items()
            if k in allowed and FIELD_MIN_MINOR.get(k, 0) <= minor and v is not None
        }

    # -- builders (validate, then return an un-inserted row) ----------------------------------

    def _base(self, obj: dict[str, Any]) -> Record:
        stamp = now_iso()
        tags = _tags(obj)
        return {
            "id": self._ids.uuid(),
            "name": _str(obj, "name"),
            "description": _str(obj, "description"),
            "admin_state_up": obj.get("admin_state_up", True) is not False,
            "project_id": self._project_id,
            "tenant_id": self._project_id,
            "tags": list(tags),
            "provisioning_status": "PENDING_CREATE",
            "operating_status": "OFFLINE",
            "created_at": stamp,
            "updated_at": None,
        }

    def new_lb(self, obj: dict[str, Any]) -> Record:
        self.check_fields(obj, LB_CREATE, "loadbalancer")
        if not any(obj.get(k) for k in ("vip_subnet_id", "vip_network_id", "vip_port_id")):
            raise bad_request(
                "Validation failure: VIP must contain one of: vip_port_id, vip_network_id, "
                "vip_subnet_id."
            )
        # Octavia's order: the VIP, the flavor, the zone, then the provider they give.
        provider = self.catalog.provider_of(obj)
        if provider not in PROVIDERS:
            raise bad_request(f"Provider '{provider}' is not enabled.")
        return self._base(obj) | {
            "provider": provider,
            "flavor_id": obj.get("flavor_id"),
            "availability_zone": obj.get("availability_zone"),
            "vip_qos_policy_id": obj.get("vip_qos_policy_id"),
            "vip_vnic_type": "normal",
            "additional_vips": [],
            "_listeners": [],
            "_pools": [],
            "_owns_vip_port": True,
        }

    def attach_vip(self, lb: Record, obj: dict[str, Any]) -> None:
        """Create (or adopt) the VIP port in Neutron and copy its addresses onto the LB."""
        if obj.get("vip_port_id"):
            port = self._neutron.ports.get(str(obj["vip_port_id"]))
            if port is None:
                raise bad_request(f"Validation failure: Port {obj['vip_port_id']} not found.")
            lb["_owns_vip_port"] = False
        else:
            subnet_id = obj.get("vip_subnet_id") or self._subnet_of_network(
                obj.get("vip_network_id")
            )
            subnet = self._neutron.subnets.get(str(subnet_id))
            network_id = obj.get("vip_network_id")
            if subnet is None or (network_id and network_id != subnet["network_id"]):
                # Octavia's InvalidSubresource, whether the subnet is missing or elsewhere.
                raise bad_request(f"Subnet {subnet_id} not found.")
            fixed = {"subnet_id": subnet["id"]}
            if obj.get("vip_address"):
                fixed["ip_address"] = str(obj["vip_address"])
            extra = self._additional_vips(obj.get("additional_vips"), subnet)
            port = self._neutron.create_port(
                subnet["network_id"],
                name=f"octavia-lb-{lb['id']}",
                device_id=f"lb-{lb['id']}",
                device_owner="Octavia",
                fixed_ips=[fixed, *extra],
                security_groups=[],
            )
        first, *others = port["fixed_ips"]
        lb.update(
            vip_port_id=port["id"],
            vip_address=first["ip_address"],
            vip_subnet_id=first["subnet_id"],
            vip_network_id=port["network_id"],
            # Octavia names the VIP port in each (its AdditionalVipsType has a port_id).
            additional_vips=[
                {"subnet_id": e["subnet_id"], "ip_address": e["ip_address"], "port_id": port["id"]}
                for e in others
            ],
        )

    def _additional_vips(self, raw: Any, primary: Record) -> list[dict[str, str]]:
        """Octavia's checks on `additional_vips` (API 2.26): one address per subnet, every
        subnet on the VIP's network (load_balancer.py,
        _validate_subnets_share_network_but_no_duplicates)."""
        if not raw:
            return []
        if not isinstance(raw, list) or not all(isinstance(v, dict) for v in raw):
            raise bad_request(
                f"Invalid input for field/attribute additional_vips. Value: '{raw}'. "
                "Value should be a list of objects"
            )
        seen = {primary["id"]}
        wanted: list[dict[str, str]] = []
        for vip in raw:
            subnet_id = str(vip.get("subnet_id") or "")
            _check_uuid("subnet_id", subnet_id)
            if subnet_id in seen:
                raise bad_request(
                    "Validation failure: Duplicate VIP subnet(s) specified. Only one IP can be "
                    "bound per subnet."
                )
            seen.add(subnet_id)
            subnet = self._neutron.subnets.get(subnet_id)
            if subnet is None:
                raise bad_request(f"Validation failure: Subnet {subnet_id} not found")
            if subnet["network_id"] != primary["network_id"]:
                raise bad_request(
                    "Validation failure: All VIP subnets must belong to the same network."
                )
            fixed = {"subnet_id": subnet_id}
            if vip.get("ip_address"):
                fixed["ip_address"] = str(vip["ip_address"])
            wanted.append(fixed)
        return wanted

    def _subnet_of_network(self, network_id: Any) -> str:
        network = self._neutron.networks.get(str(network_id))
        if network is None:
            raise bad_request(f"Validation failure: Network {network_id} not found.")
        if not network["subnets"]:
            raise bad_request(f"Validation failure: Network {network_id} has no subnets.")
        return str(network["subnets"][0])

    def new_listener(self, obj: dict[str, Any], lb: Record, siblings: list[Record]) -> Record:
        self.check_fields(obj, LISTENER_CREATE, "listener")
        protocol = obj.get("protocol")
        if protocol not in LISTENER_PROTOCOLS:
            raise bad_request(
                f"Invalid input for field/attribute protocol. Value: '{protocol}'. Value should "
                f"be one of: {', '.join(sorted(LISTENER_PROTOCOLS))}"
            )
        port = _int(obj, "protocol_port", low=1, high=65535, required=True)
        for other in siblings:
            if other["protocol"] == protocol and other["protocol_port"] == port:
                raise conflict(
                    f"Another Listener on this Load Balancer is already using protocol {protocol} "
                    f"and protocol_port {port}"
                )
        if protocol == "TERMINATED_HTTPS" and not obj.get("default_tls_container_ref"):
            raise bad_request(
                "An SNI or default certificate container reference must be provided for "
                "TERMINATED_HTTPS listeners."
            )
        return self._base(obj) | {
            "protocol": protocol,
            "protocol_port": port,
            "connection_limit": _int(obj, "connection_limit", low=-1, high=2**31 - 1, default=-1),
            "default_pool_id": None,
            "default_tls_container_ref": obj.get("default_tls_container_ref"),
            "sni_container_refs": list(obj.get("sni_container_refs") or []),
            "insert_headers": _headers(obj.get("insert_headers"), protocol),
            "l7policies": [],
            "allowed_cidrs": _cidrs(obj.get("allowed_cidrs")),
            "timeout_client_data": _int(
                obj, "timeout_client_data", low=0, high=31536000000, default=50000
            ),
            "timeout_member_connect": _int(
                obj, "timeout_member_connect", low=0, high=31536000000, default=5000
            ),
            "timeout_member_data": _int(
                obj, "timeout_member_data", low=0, high=31536000000, default=50000
            ),
            "timeout_tcp_inspect": _int(
                obj, "timeout_tcp_inspect", low=0, high=31536000000, default=0
            ),
            "client_ca_tls_container_ref": None,
            "client_authentication": "NONE",
            "_lb_id": lb["id"],
        }

    def new_pool(
        self, obj: dict[str, Any], lb: Record, listener: Record | None, provider: str
    ) -> Record:
        self.check_fields(obj, POOL_CREATE, "pool")
        protocol = obj.get("protocol")
        if protocol not in POOL_PROTOCOLS:
            raise bad_request(
                f"Invalid input for field/attribute protocol. Value: '{protocol}'. Value should "
                f"be one of: {', '.join(sorted(POOL_PROTOCOLS))}"
            )
        if listener is not None and protocol not in POOL_PROTOCOLS_FOR[listener["protocol"]]:
            raise bad_request(
                f"Validation failure: The pool protocol '{protocol}' is invalid while the "
                f"listener protocol is "
                f"'{listener['protocol']}'."
            )
        algorithm = obj.get("lb_algorithm")
        _check_algorithm(algorithm, provider)
        return self._base(obj) | {
            "protocol": protocol,
            "lb_algorithm": algorithm,
            "session_persistence": _persistence(obj.get("session_persistence")),
            "healthmonitor_id": None,
            "tls_enabled": bool(obj.get("tls_enabled", False)),
            "tls_container_ref": None,
            "ca_tls_container_ref": None,
            "crl_container_ref": None,
            "_lb_id": lb["id"],
            "_members": PoolMembers(),
            "_listener_id": listener["id"] if listener else None,
        }

    def member_fields(self, obj: Any) -> dict[str, Any]:
        """A member body checked as Octavia's WSME type checks it: the fields of a `Member`
        a client sets, as shared values (see members.py).

        A CCM sends a million member bodies in a round of batch updates at 5,000 nodes and
        200 pools, each pool's distinct (their ports differ) but made of the same few
        thousand addresses and ids: each distinct value is parsed once (`_address`,
        `_is_uuid`), and a body costs a few dictionary lookups.
        """
        fields = self._check_member(obj)
        subnet_id = fields["subnet_id"]
        if subnet_id is not None and self._neutron.subnets.get(str(subnet_id)) is None:
            raise bad_request(f"Validation failure: Subnet {subnet_id} not found.")
        return fields

    def _check_member(self, obj: Any) -> dict[str, Any]:
        self.check_fields(obj, MEMBER_CREATE, "member")
        given = obj.get("address")
        address = _address(str(given))
        if address is None:
            raise bad_request(
                f"Invalid input for field/attribute address. Value: '{given}'. "
                "Value should be IPv4 or IPv6 format"
            )
        port = _int(obj, "protocol_port", low=1, high=65535, required=True)
        subnet_id = obj.get("subnet_id")
        return {
            "name": shared(_str(obj, "name")),
            "address": address,
            "protocol_port": shared(port),
            "subnet_id": shared(subnet_id),
            "weight": _int(obj, "weight", low=0, high=256, default=1),
            "backup": bool(obj.get("backup", False)),
            "monitor_address": shared(obj.get("monitor_address")),
            "monitor_port": shared(_int(obj, "monitor_port", low=1, high=65535, default=None)),
            "admin_state_up": obj.get("admin_state_up", True) is not False,
            "tags": tuple(shared(tag) for tag in _tags(obj)),
        }

    def new_member(self, fields: dict[str, Any], pool: Record, stamp: str) -> Member:
        """A PENDING_CREATE member of `pool` from `member_fields`, created at `stamp`."""
        # Positional, in Member's field order: a fourth of keywords' cost, a million times.
        return Member(
            self._ids.serial(),
            fields["name"],
            fields["address"],
            fields["protocol_port"],
            fields["subnet_id"],
            fields["weight"],
            fields["backup"],
            fields["monitor_address"],
            fields["monitor_port"],
            fields["admin_state_up"],
            fields["tags"],
            "PENDING_CREATE",
            shared(stamp),
            None,
            pool["id"],
            pool["_lb_id"],
        )

    def distinct_members(
        self, objs: Any, existing: Collection[tuple[str, int]] = ()
    ) -> list[dict[str, Any]]:
        """`member_fields` of each body; two with one address and port are a 409, or for a
        member in `existing` (a batch update's) Octavia's 400 "updated only once"."""
        if not isinstance(objs, list):
            raise bad_request("Invalid input for field/attribute members. Expected a list.")
        checked = self._typed_member_fields(objs)
        # Field by field, each body is checked just before its duplicate test (Octavia's order).
        every = checked if checked is not None else (self.member_fields(obj) for obj in objs)
        seen: set[tuple[str, int]] = set()
        result = []
        for fields in every:
            key = (fields["address"], fields["protocol_port"])
            if key in seen:
                if key in existing:
                    raise bad_request(
                        "Validation failure: Member must be updated only once in the same request."
                    )
                raise member_in_use(*key)
            seen.add(key)
            result.append(fields)
        return result

    def _typed_member_fields(self, objs: list[Any]) -> list[dict[str, Any]] | None:
        """`member_fields` of every body, the fast way (a million bodies a round at 5,000
        nodes and 200 pools): msgspec checks the list against `MemberBody` in one call,
        then each distinct address and subnet is looked up once. None when any body needs
        the field-by-field check (it raises the error Octavia would, in Octavia's order)."""
        if self.minor < FIELD_MIN_MINOR["tags"]:
            return None
        try:
            bodies = msgspec.convert(objs, list[MemberBody])
        except msgspec.ValidationError:
            return None
        subnets: dict[str, str | None] = {}  # a subnet's id as given -> shared, None: unknown
        intern = sys.intern
        result = []
        for body in bodies:
            address = _address(body.address)
            if address is None:
                return None
            subnet_id = body.subnet_id
            if subnet_id is not None:
                if subnet_id not in subnets:
                    known = self._neutron.subnets.get(subnet_id) is not None
                    subnets[subnet_id] = intern(subnet_id) if known else None
                subnet_id = subnets[subnet_id]
                if subnet_id is None:
                    return None
            name, monitor_address, tags = body.name, body.monitor_address, body.tags
            result.append(
                {
                    "name": intern(name) if name else "",
                    "address": address,
                    "protocol_port": shared(body.protocol_port),
                    "subnet_id": subnet_id,
                    "weight": 1 if body.weight is None else body.weight,
                    "backup": bool(body.backup),
                    "monitor_address": None if monitor_address is None else intern(monitor_address),
                    "monitor_port": shared(body.monitor_port),
                    "admin_state_up": body.admin_state_up is not False,
                    "tags": tuple(intern(tag) for tag in tags) if tags else (),
                }
            )
        return result

    def member_body(self, member: Member) -> dict[str, Any]:
        """The fields of `member` a client could send at the current API version."""
        body = {name: getattr(member, name) for name in MEMBER_FIELDS}
        body["tags"] = list(member.tags)
        return self.known(body, MEMBER_CREATE)

    def new_monitor(self, obj: dict[str, Any], pool: Record) -> Record:
        self.check_fields(obj, HM_CREATE, "healthmonitor")
        kind = obj.get("type")
        if kind not in MONITOR_TYPES:
            raise bad_request(
                f"Invalid input for field/attribute type. Value: '{kind}'. Value should be one "
                f"of: {', '.join(sorted(MONITOR_TYPES))}"
            )
        if pool["healthmonitor_id"]:
            raise conflict("This pool already has a health monitor")
        self._check_monitor_for_pool(str(kind), pool)
        monitor = self._base(obj) | {
            "type": kind,
            "_pool_id": pool["id"],
            "_lb_id": pool["_lb_id"],
            "http_version": None,
            "domain_name": None,
        }
        http = kind in HTTP_MONITORS
        monitor.update(
            url_path=obj.get("url_path", "/") if http else None,
            http_method=obj.get("http_method", "GET") if http else None,
            expected_codes=obj.get("expected_codes", "200") if http else None,
        )
        del monitor["description"]
        _apply_timing(monitor, obj, creating=True)
        return monitor

    def _check_monitor_for_pool(self, kind: str, pool: Record) -> None:
        if pool["protocol"] != "UDP":
            if kind == "UDP-CONNECT":
                raise bad_request("The monitor type UDP-CONNECT is only valid for UDP pools.")
            return
        allowed = {"UDP-CONNECT", "SCTP", "TCP"} | ({"HTTP"} if self.minor >= 16 else set())
        if kind not in allowed:
            raise bad_request(f"The monitor type {kind} is not valid for a UDP pool.")

    # -- inserting trees ---------------------------------------------------------------------

    def insert_listener(self, listener: Record, lb: Record, op: Operation) -> None:
        self.listeners.insert(listener)
        lb["_listeners"].append(listener["id"])
        op.activate.append((self.listeners, listener["id"]))

    def insert_pool(self, pool: Record, lb: Record, op: Operation) -> None:
        self.pools.insert(pool)
        self.members.attach(pool["id"], pool["_members"])
        lb["_pools"].append(pool["id"])
        if pool["_listener_id"]:
            listener = self.listeners.rows[pool["_listener_id"]]
            listener["default_pool_id"] = pool["id"]
        op.activate.append((self.pools, pool["id"]))

    def insert_member(self, member: Member, op: Operation) -> None:
        self.members.insert(member)
        op.activate_members.append(member)

    def insert_monitor(self, monitor: Record, pool: Record, op: Operation) -> None:
        self.healthmonitors.insert(monitor)
        pool["healthmonitor_id"] = monitor["id"]
        op.activate.append((self.healthmonitors, monitor["id"]))

    def create_tree(self, body: dict[str, Any]) -> Record:
        """POST /loadbalancers: validate the whole tree first, then insert it all."""
        lb = self.new_lb(body)
        quota = self._knobs.lb_quota
        if quota is not None and len(self.loadbalancers) >= quota:
            raise ApiError(403, "Quota has been met for resources: Load Balancer")
        plan = self._plan_children(body, lb)
        self.attach_vip(lb, body)
        self.loadbalancers.insert(lb)
        op = Operation(lb_id=lb["id"])
        for listener, pool, members, monitor in plan:
            if listener is not None:
                self.insert_listener(listener, lb, op)
            if pool is not None:
                self.insert_pool(pool, lb, op)
                for member in members:
                    self.insert_member(member, op)
                if monitor is not None:
                    self.insert_monitor(monitor, pool, op)
        if self._knobs.force_error_next_lbs > 0:
            self._knobs.force_error_next_lbs -= 1
            op.error = True
        self.start(lb, op, lb_status="PENDING_CREATE")
        return lb

    def _plan_children(
        self, body: dict[str, Any], lb: Record
    ) -> list[tuple[Record | None, Record | None, list[Member], Record | None]]:
        listeners = body.get("listeners") or []
        pools = body.get("pools") or []
        if not isinstance(listeners, list) or not isinstance(pools, list):
            raise bad_request("Invalid input for field/attribute listeners. Expected a list.")
        plan: list[tuple[Record | None, Record | None, list[Member], Record | None]] = []
        made: list[Record] = []
        for obj in listeners:
            listener = self.new_listener(obj, lb, made)
            made.append(listener)
            plan.append((listener, *self._plan_pool(obj.get("default_pool"), lb, listener)))
        for obj in pools:
            plan.append((None, *self._plan_pool(obj, lb, None)))
        return plan

    def _plan_pool(
        self, obj: Any, lb: Record, listener: Record | None
    ) -> tuple[Record | None, list[Member], Record | None]:
        if obj is None:
            return None, [], None
        pool = self.new_pool(
            self.check_fields(obj, POOL_CREATE, "pool"), lb, listener, lb["provider"]
        )
        stamp = now_iso()
        members = [
            self.new_member(fields, pool, stamp)
            for fields in self.distinct_members(obj.get("members") or [])
        ]
        monitor_obj = obj.get("healthmonitor")
        monitor = self.new_monitor(monitor_obj, pool) if monitor_obj is not None else None
        return pool, members, monitor

    # -- rendering ---------------------------------------------------------------------------

    def member_status(self, member: Member) -> str:
        if not member.admin_state_up:
            return "OFFLINE"
        pool = self.pools.rows.get(member.pool_id)
        if pool is None or not pool["healthmonitor_id"]:
            return "NO_MONITOR"
        return "ERROR" if member.address in self._knobs.down_member_addresses else "ONLINE"

    def pool_status(self, pool: Record) -> str:
        if not pool["admin_state_up"]:
            return "OFFLINE"
        if not pool["healthmonitor_id"] or not self._knobs.down_member_addresses:
            # No member can be ERROR: skip the pool's (possibly thousands of) members.
            return "ONLINE"
        statuses = [self.member_status(member) for member in pool["_members"]]
        if statuses and all(s == "ERROR" for s in statuses):
            return "ERROR"
        return "DEGRADED" if "ERROR" in statuses else "ONLINE"

    def listener_status(self, listener: Record) -> str:
        if not listener["admin_state_up"]:
            return "OFFLINE"
        pool = self.pools.rows.get(listener["default_pool_id"] or "")
        if pool is None:
            return "ONLINE"
        return "DEGRADED" if self.pool_status(pool) in {"ERROR", "DEGRADED"} else "ONLINE"

    def lb_status(self, lb: Record) -> str:
        if lb["provisioning_status"] == "ERROR":
            return "ERROR"
        if lb["provisioning_status"] == "PENDING_CREATE" or not lb["admin_state_up"]:
            return "OFFLINE"
        statuses = [self.listener_status(self.listeners.rows[i]) for i in lb["_listeners"]]
        return "DEGRADED" if "DEGRADED" in statuses else "ONLINE"

    def render_member(self, member: Member) -> MemberView:
        return self.render_members((member,))[0]

    def render_members(self, members: Iterable[Member]) -> list[MemberView]:
        """Members as Octavia renders them (a pool's thousands in a create's answer)."""
        project_id = self._project_id
        status = self._member_operating_status
        return [member.wire(status(member), project_id) for member in members]

    def _member_operating_status(self, member: Member) -> str:
        # New members are OFFLINE until ACTIVE, as every other row (see render).
        if member.provisioning_status in PENDING_OR_ERROR:
            return "OFFLINE"
        return self.member_status(member)

    def render(self, table: Table, row: Record) -> Record:
        out = {key: value for key, value in row.items() if not key.startswith("_")}
        # New rows start OFFLINE (octavia/db/prepare.py) and failed ones stay so; an update
        # or delete leaves the operating status as it was.
        pending_or_error = row["provisioning_status"] in PENDING_OR_ERROR
        if table is self.loadbalancers:
            out["listeners"] = [{"id": i} for i in row["_listeners"]]
            out["pools"] = [{"id": i} for i in row["_pools"]]
            out["operating_status"] = self.lb_status(row)
            return out
        lb_ref = [{"id": row["_lb_id"]}]
        if table is self.listeners:
            out["loadbalancers"] = lb_ref
            out["operating_status"] = "OFFLINE" if pending_or_error else self.listener_status(row)
        elif table is self.pools:
            out["loadbalancers"] = lb_ref
            out["listeners"] = [{"id": row["_listener_id"]}] if row["_listener_id"] else []
            out["members"] = [{"id": i} for i in row["_members"].ids()]
            out["operating_status"] = "OFFLINE" if pending_or_error else self.pool_status(row)
        elif table is self.healthmonitors:
            out["pools"] = [{"id": row["_pool_id"]}]
            out["operating_status"] = "OFFLINE" if pending_or_error else "ONLINE"
        return out


# -- small validators -------------------------------------------------------------------------


def _tags(obj: dict[str, Any]) -> list[str]:
    tags = obj.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise bad_request("Invalid input for field/attribute tags. Expected a list of strings.")
    if any(len(t) > MAX_STRING for t in tags):
        # WSME's StringType(max_length=255), on every resource's tags.
        raise bad_request(
            f"Invalid input for field/attribute tags. Value: '{tags}'. "
            f"Value should have a maximum character requirement of {MAX_STRING}"
        )
    return tags


def _str(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_STRING:
        raise bad_request(
            f"Invalid input for field/attribute {name}. Value: '{value}'. "
            f"Expected a string of at most {MAX_STRING} characters."
        )
    return value


def _int(
    obj: dict[str, Any],
    name: str,
    *,
    low: int,
    high: int,
    default: int | None = None,
    required: bool = False,
) -> Any:
    value = obj.get(name)
    if value is None:
        if required:
            raise bad_request(
                f"Invalid input for field/attribute {name}. Value: 'None'. Mandatory field missing."
            )
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise bad_request(
            f"Invalid input for field/attribute {name}. Value: '{value}'. Value should be "
            f"an integer between {low} and {high}."
        )
    return value


def _check_uuid(name: str, value: Any) -> None:
    if value is not None and not _is_uuid(str(value)):
        raise bad_request(
            f"Invalid input for field/attribute {name}. Value: '{value}'. "
            "Value should be UUID format"
        )


# A CCM sends the same few ids and the same node addresses in every member body of every
# pool (200 pools of 5,000 members: a million bodies of 5,000 addresses): each distinct
# value is parsed once.
@functools.lru_cache(maxsize=4096)
def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=65_536)
def _address(text: str) -> str | None:
    """The canonical (shared) form of an IP address, None when `text` is not one."""
    try:
        return sys.intern(str(ipaddress.ip_address(text)))
    except ValueError:
        return None


@functools.lru_cache(maxsize=64)
def _fields_newer_than(minor: int) -> frozenset[str]:
    return frozenset(name for name, least in FIELD_MIN_MINOR.items() if least > minor)


def _headers(value: Any, protocol: str) -> dict[str, str]:
    """Octavia's `_validate_insert_headers`: only HTTP and TERMINATED_HTTPS listeners insert
    headers, only its known ones, the client-certificate ones only with TLS termination."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise bad_request(f"Invalid input for field/attribute insert_headers. Value: '{value}'.")
    if not value:
        return {}
    if protocol not in ("HTTP", "TERMINATED_HTTPS"):
        raise bad_request(
            f"insert-headers is not a valid option for a {protocol} protocol listener."
        )
    if set(value) - HTTP_HEADERS - SSL_HEADERS:
        raise bad_request(f"{list(value)} is not a valid option for insert_headers")
    ssl = [name for name in value if name in SSL_HEADERS]
    if ssl and protocol != "TERMINATED_HTTPS":
        raise bad_request(f"{ssl} is not a valid option for {protocol} protocol listener.")
    return dict(value)


def _cidrs(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise bad_request(f"Invalid input for field/attribute allowed_cidrs. Value: '{value}'.")
    try:
        return [str(ipaddress.ip_network(cidr, strict=False)) for cidr in value]
    except (ValueError, TypeError):
        raise bad_request(
            f"Invalid input for field/attribute allowed_cidrs. Value: '{value}'."
        ) from None


def _persistence(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in PERSISTENCE_TYPES:
        raise bad_request(
            f"Invalid input for field/attribute session_persistence. Value: '{value}'."
        )
    return {
        "type": value["type"],
        "cookie_name": value.get("cookie_name"),
        "persistence_timeout": value.get("persistence_timeout"),
        "persistence_granularity": value.get("persistence_granularity"),
    }


def _check_algorithm(algorithm: Any, provider: str) -> None:
    if algorithm not in ALGORITHMS:
        raise bad_request(
            f"Invalid input for field/attribute lb_algorithm. Value: '{algorithm}'. Value "
            f"should be one of: {', '.join(sorted(ALGORITHMS))}"
        )
    ovn = provider == "ovn"
    if ovn != (algorithm == "SOURCE_IP_PORT"):
        # A provider driver's UnsupportedOptionError, as octavia/api/drivers/utils.py
        # relays it: 501 ProviderUnsupportedOptionError around the driver's own text.
        label = "OVN" if ovn else "Amphora"
        raise ApiError(
            501,
            f"Provider '{provider}' does not support a requested option: {label} provider "
            f"does not support {algorithm} algorithm.",
        )


def _apply_timing(monitor: Record, obj: dict[str, Any], *, creating: bool) -> None:
    for name, low, high, default in (
        ("delay", 0, 2**31 - 1, None),
        ("timeout", 0, 2**31 - 1, None),
        ("max_retries", 1, 10, None),
        ("max_retries_down", 1, 10, 3),
    ):
        if creating or name in obj:
            required = creating and default is None
            monitor[name] = _int(obj, name, low=low, high=high, default=default, required=required)
    if monitor["timeout"] > monitor["delay"]:
        raise bad_request(
            "Validation failure: The timeout value must not be greater than the delay value."
        )


# -- HTTP ---------------------------------------------------------------------------------------


def _member_key(row: Any) -> tuple[str, str]:
    """Octavia's `created_at, id` order for a member, stored or rendered for a filter."""
    if isinstance(row, dict):
        return (row["created_at"], row["id"])
    key: tuple[str, str] = row.order_key()
    return key


def _related(row: Record, query: MultiMapping[str], relations: dict[str, str]) -> bool:
    """Whether `row` passes the relation filters (`loadbalancer_id=...`) in `query`."""
    return all(
        field_matches(row[column], query.getall(name))
        for name, column in relations.items()
        if name in query
    )


def _version_list(req: Req, knobs: Knobs) -> Reply:
    top = version_minor(knobs.octavia_version)
    href = f"{req.base_url}/load-balancer/v2"
    versions = [
        {
            "id": f"v2.{minor}",
            "status": "CURRENT" if minor == top else "SUPPORTED",
            "updated": "2016-12-11T00:00:00Z",
            "links": [{"href": href, "rel": "self"}],
        }
        for minor in range(top + 1)
    ]
    return ok({"versions": versions})


def _root_of(body: Any, root: str) -> dict[str, Any]:
    if not isinstance(body, dict) or not isinstance(body.get(root), dict):
        raise bad_request(
            f"Invalid input for field/attribute {root}. Value: '{body}'. Missing mandatory "
            f"field: {root}"
        )
    value: dict[str, Any] = body[root]
    return value


class OctaviaApi:
    def __init__(self, octavia: Octavia, knobs: Knobs) -> None:
        self.o = octavia
        self.knobs = knobs

    def listing(
        self, req: Req, table: Table, collection: str, rows: list[Record] | None = None
    ) -> Reply:
        """Filter the stored rows, page them as Octavia does, render only the page."""
        query = req.query
        source = rows if rows is not None else table.candidates(query)
        if source is None:
            source = list(table)
        relations = RELATION_FILTERS.get(collection, {})
        related = [row for row in source if _related(row, query, relations)]
        if "operating_status" in query:
            # The one filtered field that is computed at render time, not stored.
            wanted = query.getall("operating_status")
            related = [
                row
                for row in related
                if field_matches(self.o.render(table, row)["operating_status"], wanted)
            ]
        chosen = select(related, query, handled=frozenset(relations) | {"operating_status"})
        page = octavia_page(
            chosen,
            query,
            lookup=table.get,
            cap=self.knobs.octavia_page_limit or None,
            url=req.base_url + req.path,
        )
        rendered = project_fields([self.o.render(table, row) for row in page.rows], query)
        return ok({collection: rendered, f"{collection}_links": page.links})

    # load balancers
    def lbs(self, req: Req) -> Reply:
        return self.listing(req, self.o.loadbalancers, "loadbalancers")

    def lb(self, req: Req) -> Reply:
        row = self.o.loadbalancers.require(req.match["id"], LB_MISSING)
        return ok({"loadbalancer": self.o.render(self.o.loadbalancers, row)})

    def lb_status_tree(self, req: Req) -> Reply:
        lb = self.o.loadbalancers.require(req.match["id"], LB_MISSING)
        listeners = []
        for listener_id in lb["_listeners"]:
            listener = self.o.render(self.o.listeners, self.o.listeners.rows[listener_id])
            pools = [
                self.o.render(self.o.pools, self.o.pools.rows[p["id"]])
                for p in (
                    [{"id": listener["default_pool_id"]}] if listener["default_pool_id"] else []
                )
            ]
            listener["pools"] = pools
            listeners.append(listener)
        tree = self.o.render(self.o.loadbalancers, lb) | {"listeners": listeners}
        return ok({"statuses": {"loadbalancer": tree}})

    def create_lb(self, req: Req) -> Reply:
        lb = self.o.create_tree(_root_of(req.body, "loadbalancer"))
        return created({"loadbalancer": self._full_tree(lb)})

    def _full_tree(self, lb: Record) -> Record:
        """The create response: the LB with its listeners (and their default pools) expanded."""
        out = self.o.render(self.o.loadbalancers, lb)
        out["listeners"] = []
        for listener_id in lb["_listeners"]:
            listener = self.o.render(self.o.listeners, self.o.listeners.rows[listener_id])
            out["listeners"].append(listener)
        out["pools"] = [self._full_pool(self.o.pools.rows[p]) for p in lb["_pools"]]
        return out

    def _full_pool(self, pool: Record) -> Record:
        out = self.o.render(self.o.pools, pool)
        out["members"] = self.o.render_members(pool["_members"])
        monitor = self.o.healthmonitors.get(pool["healthmonitor_id"] or "")
        out["healthmonitor"] = self.o.render(self.o.healthmonitors, monitor) if monitor else None
        return out

    def update_lb(self, req: Req) -> Reply:
        body = self.o.check_fields(_root_of(req.body, "loadbalancer"), LB_UPDATE, "loadbalancer")
        lb = self.o.settable_lb(req.match["id"])
        changes: Record = {"name": _str(body, "name")} if "name" in body else {}
        if "tags" in body:
            changes["tags"] = _tags(body)
        self.o.loadbalancers.touch(lb, {**body, **changes})
        self.o.start(lb, Operation(lb_id=lb["id"]), lb_status="PENDING_UPDATE")
        return ok({"loadbalancer": self.o.render(self.o.loadbalancers, lb)})

    def delete_lb(self, req: Req) -> Reply:
        lb = self.o.loadbalancers.require(req.match["id"], LB_MISSING)
        cascade = req.query.get("cascade", "false").lower() in {"true", "1", "yes"}
        # Octavia refuses a delete with children before it looks at the state.
        if (lb["_listeners"] or lb["_pools"]) and not cascade:
            raise bad_request(
                f"Validation failure: Cannot delete Load Balancer {lb['id']} - it has children"
            )
        self.o.settable_lb(lb["id"], deleting=True)
        self.o.stuck.discard(lb["id"])
        self.o.start(lb, Operation(lb_id=lb["id"], lb_removed=True), lb_status="PENDING_DELETE")
        return NO_CONTENT

    # listeners
    def listeners_(self, req: Req) -> Reply:
        return self.listing(req, self.o.listeners, "listeners")

    def listener(self, req: Req) -> Reply:
        row = self.o.listeners.require(req.match["id"], LISTENER_MISSING)
        return ok({"listener": self.o.render(self.o.listeners, row)})

    def create_listener(self, req: Req) -> Reply:
        body = self.o.check_fields(_root_of(req.body, "listener"), LISTENER_CREATE, "listener")
        if "default_pool" in body:
            raise bad_request(
                "default_pool is only accepted in a fully populated load balancer create."
            )
        lb_id = body.get("loadbalancer_id")
        if not isinstance(lb_id, str):
            raise bad_request(
                "Invalid input for field/attribute loadbalancer_id. Mandatory field missing."
            )
        lb = self._parent_lb(lb_id)
        siblings = [self.o.listeners.rows[i] for i in lb["_listeners"]]
        listener = self.o.new_listener(body, lb, siblings)
        pool = self._default_pool_for(body.get("default_pool_id"), lb, listener)
        op = Operation(lb_id=lb["id"])
        self.o.insert_listener(listener, lb, op)
        if pool is not None:
            listener["default_pool_id"] = pool["id"]
            pool["_listener_id"] = listener["id"]
        self.o.start(lb, op, lb_status="PENDING_UPDATE")
        return created({"listener": self.o.render(self.o.listeners, listener)})

    def _parent_lb(self, lb_id: str) -> Record:
        return self.o.mutable_lb(lb_id)

    def _default_pool_for(self, pool_id: Any, lb: Record, listener: Record) -> Record | None:
        if pool_id is None:
            return None
        pool = self.o.pools.get(str(pool_id))
        if pool is None or pool["_lb_id"] != lb["id"]:
            raise POOL_MISSING(str(pool_id))
        if pool["_listener_id"] and pool["_listener_id"] != listener["id"]:
            raise conflict(f"Pool {pool_id} is already in use by another listener.")
        if pool["protocol"] not in POOL_PROTOCOLS_FOR[listener["protocol"]]:
            raise bad_request(
                f"Validation failure: The pool protocol '{pool['protocol']}' is invalid while "
                f"the listener protocol "
                f"is '{listener['protocol']}'."
            )
        return pool

    def update_listener(self, req: Req) -> Reply:
        listener = self.o.listeners.require(req.match["id"], LISTENER_MISSING)
        body = self.o.check_fields(_root_of(req.body, "listener"), LISTENER_UPDATE, "listener")
        lb = self.o.mutable_lb(listener["_lb_id"])
        merged = self.o.known(listener, LISTENER_CREATE) | body
        merged.pop("default_pool_id", None)
        others = [self.o.listeners.rows[i] for i in lb["_listeners"] if i != listener["id"]]
        checked = self.o.new_listener(merged, lb, others)
        changes = {k: checked[k] for k in body if k in checked}
        if "default_pool_id" in body:
            pool = self._default_pool_for(body["default_pool_id"], lb, listener)
            changes["default_pool_id"] = pool["id"] if pool else None
            if pool is not None:
                pool["_listener_id"] = listener["id"]
        self.o.listeners.touch(
            listener, {**changes, "updated_at": now_iso(), "provisioning_status": "PENDING_UPDATE"}
        )
        self.o.start(
            lb,
            Operation(lb_id=lb["id"], activate=[(self.o.listeners, listener["id"])]),
            lb_status="PENDING_UPDATE",
        )
        return ok({"listener": self.o.render(self.o.listeners, listener)})

    def delete_listener(self, req: Req) -> Reply:
        listener = self.o.listeners.require(req.match["id"], LISTENER_MISSING)
        lb = self.o.mutable_lb(listener["_lb_id"])
        listener["provisioning_status"] = "PENDING_DELETE"
        for pool in self.o.pools.with_value("_lb_id", lb["id"]):
            if pool["_listener_id"] == listener["id"]:
                pool["_listener_id"] = None
        self.o.start(
            lb,
            Operation(lb_id=lb["id"], remove=[(self.o.listeners, listener["id"])]),
            lb_status="PENDING_UPDATE",
        )
        return NO_CONTENT

    # pools
    def pools_(self, req: Req) -> Reply:
        return self.listing(req, self.o.pools, "pools")

    def pool(self, req: Req) -> Reply:
        return ok(
            {
                "pool": self.o.render(
                    self.o.pools, self.o.pools.require(req.match["id"], POOL_MISSING)
                )
            }
        )

    def create_pool(self, req: Req) -> Reply:
        """POST /pools, in the order Octavia's PoolsController checks things.

        The schema accepts inline `members` and `healthmonitor` here as in the fully
        populated create, but this controller never builds them: the dicts reach the
        SQLAlchemy model and the request fails with a 500 (AttributeError) after every
        other check passed, leaving no pool behind. A missing `listener_id` fails the
        same way, on `None.load_balancer_id`.
        """
        body = self.o.check_fields(_root_of(req.body, "pool"), POOL_CREATE, "pool")
        lb_id, listener = self._pool_parent(body)
        lb = self.o.loadbalancers.require(lb_id, LB_MISSING)
        pool = self.o.new_pool(body, lb, listener, lb["provider"])
        for member in body.get("members") or []:
            self.o.check_fields(member, MEMBER_CREATE, "members")
        if body.get("healthmonitor") is not None:
            self.o.check_fields(body["healthmonitor"], HM_CREATE, "healthmonitor")
        if body.get("listener_id"):
            listener = self.o.listeners.get(str(body["listener_id"]))
            if listener is None:
                raise unexpected("'NoneType' object has no attribute 'default_pool'")
            if listener["default_pool_id"]:
                raise conflict("This listener already has a default pool")
            pool["_listener_id"] = listener["id"]
        self.o.mutable_lb(lb["id"])
        if body.get("members") or body.get("healthmonitor"):
            raise unexpected("'dict' object has no attribute '_sa_instance_state'")
        op = Operation(lb_id=lb["id"])
        self.o.insert_pool(pool, lb, op)
        self.o.lock_listener_of(op, pool)
        self.o.start(lb, op, lb_status="PENDING_UPDATE")
        return created({"pool": self.o.render(self.o.pools, pool)})

    def _pool_parent(self, body: dict[str, Any]) -> tuple[str, Record | None]:
        """The load balancer id a new pool goes on, and the listener when named alone."""
        if body.get("loadbalancer_id"):
            return str(body["loadbalancer_id"]), None
        if body.get("listener_id"):
            listener = self.o.listeners.get(str(body["listener_id"]))
            if listener is None:
                raise unexpected("'NoneType' object has no attribute 'load_balancer_id'")
            return str(listener["_lb_id"]), listener
        raise bad_request(
            "Validation failure: Must provide at least one of: loadbalancer_id, listener_id"
        )

    def update_pool(self, req: Req) -> Reply:
        pool = self.o.pools.require(req.match["id"], POOL_MISSING)
        body = self.o.check_fields(_root_of(req.body, "pool"), POOL_UPDATE, "pool")
        lb = self.o.mutable_lb(pool["_lb_id"])
        changes: Record = {}
        if "lb_algorithm" in body:
            _check_algorithm(body["lb_algorithm"], lb["provider"])
            changes["lb_algorithm"] = body["lb_algorithm"]
        if "session_persistence" in body:
            changes["session_persistence"] = _persistence(body["session_persistence"])
        for name in ("name", "description"):
            if name in body:
                changes[name] = _str(body, name)
        if "tags" in body:
            changes["tags"] = _tags(body)
        for name in ("admin_state_up", "tls_enabled"):
            if name in body:
                changes[name] = body[name]
        self.o.pools.touch(pool, {**changes, "updated_at": now_iso()})
        op = Operation(lb_id=lb["id"])
        self.o.lock_pool(op, pool)
        self.o.start(lb, op, lb_status="PENDING_UPDATE")
        return ok({"pool": self.o.render(self.o.pools, pool)})

    def delete_pool(self, req: Req) -> Reply:
        pool = self.o.pools.require(req.match["id"], POOL_MISSING)
        lb = self.o.mutable_lb(pool["_lb_id"])
        op = Operation(lb_id=lb["id"], remove=[(self.o.pools, pool["id"])])
        self.o.lock_listener_of(op, pool)
        pool["provisioning_status"] = "PENDING_DELETE"
        self.o.start(lb, op, lb_status="PENDING_UPDATE")
        return NO_CONTENT

    # members
    def _pool_of(self, req: Req) -> Record:
        return self.o.pools.require(req.match["pool_id"], POOL_MISSING)

    def members_(self, req: Req) -> Reply:
        """A pool's members: already in Octavia's order, rendered only for the page (or
        for the filter, when the query filters on a member field)."""
        pool = self._pool_of(req)
        members: PoolMembers = pool["_members"]
        query = req.query
        rows: list[Any] = members.ordered()
        if any(name not in PAGING_PARAMS for name in query):
            rendered = [asdict(view) for view in self.o.render_members(rows)]
            if "operating_status" in query:
                wanted = query.getall("operating_status")
                rendered = [r for r in rendered if field_matches(r["operating_status"], wanted)]
            rows = select(rendered, query, handled=frozenset({"operating_status"}))
        page = octavia_page(
            rows,
            query,
            lookup=members.by_id.get,
            cap=self.knobs.octavia_page_limit or None,
            url=req.base_url + req.path,
            key=_member_key,
            presorted=True,
        )
        # Members are rendered for the page alone; `fields=` picks from dicts.
        as_dict = asdict if "fields" in query else lambda view: view
        shown = [
            row if isinstance(row, dict) else as_dict(self.o.render_member(row))
            for row in page.rows
        ]
        return ok({"members": project_fields(shown, query), "members_links": page.links})

    def _member_in(self, req: Req, pool: Record) -> Member:
        member: Member | None = pool["_members"].by_id.get(req.match["id"])
        if member is None:
            raise MEMBER_MISSING(req.match["id"])
        return member

    def member(self, req: Req) -> Reply:
        member = self._member_in(req, self._pool_of(req))
        return ok({"member": self.o.render_member(member)})

    def create_member(self, req: Req) -> Reply:
        pool = self._pool_of(req)
        fields = self.o.member_fields(_root_of(req.body, "member"))
        key = (fields["address"], fields["protocol_port"])
        if any((m.address, m.protocol_port) == key for m in pool["_members"].by_id.values()):
            raise member_in_use(*key)
        member = self.o.new_member(fields, pool, now_iso())
        lb = self.o.mutable_pool(pool)
        op = Operation(lb_id=lb["id"])
        self.o.lock_pool(op, pool)
        self.o.insert_member(member, op)
        self.o.start(lb, op, lb_status="PENDING_UPDATE")
        return created({"member": self.o.render_member(member)})

    def update_member(self, req: Req) -> Reply:
        pool = self._pool_of(req)
        member = self._member_in(req, pool)
        body = self.o.check_fields(_root_of(req.body, "member"), MEMBER_UPDATE, "member")
        lb = self.o.mutable_pool(pool)
        checked = self.o.member_fields(self.o.member_body(member) | body)
        changes = {k: checked[k] for k in body}
        self.o.members.touch(member, {**changes, "updated_at": now_iso()})
        op = Operation(lb_id=lb["id"])
        member.provisioning_status = "PENDING_UPDATE"
        op.activate_members.append(member)
        self.o.lock_pool(op, pool)
        self.o.start(lb, op, lb_status="PENDING_UPDATE")
        return ok({"member": self.o.render_member(member)})

    def delete_member(self, req: Req) -> Reply:
        pool = self._pool_of(req)
        member = self._member_in(req, pool)
        lb = self.o.mutable_pool(pool)
        op = Operation(lb_id=lb["id"], remove_members=[member])
        self.o.lock_pool(op, pool)
        member.provisioning_status = "PENDING_DELETE"
        self.o.start(lb, op, lb_status="PENDING_UPDATE")
        return NO_CONTENT

    def batch_members(self, req: Req) -> Reply:
        if not self.knobs.batch_members:
            raise ApiError(405, "The method specified is not allowed for this resource.")
        pool = self._pool_of(req)
        body = req.body
        if not isinstance(body, dict) or not isinstance(body.get("members"), list):
            raise bad_request(
                "Invalid input for field/attribute members. Missing mandatory field: members"
            )
        # oslo's bool_from_string: anything but a true spelling is False.
        additive = req.query.get("additive_only", "").strip().lower() in TRUE_STRINGS
        lb = self.o.mutable_pool(pool)
        existing = {(m.address, m.protocol_port): m for m in pool["_members"]}
        wanted = self.o.distinct_members(body["members"], existing)
        if not wanted and (additive or not existing):
            # Octavia's "batch update is a noop": rolled back, nothing changes state.
            return Reply(202)
        self._apply_batch(pool, lb, wanted, existing, additive=additive)
        return Reply(202)

    def _apply_batch(
        self,
        pool: Record,
        lb: Record,
        wanted: list[dict[str, Any]],
        existing: dict[tuple[str, int], Member],
        *,
        additive: bool,
    ) -> None:
        """Octavia's batch update, matched on address and port: O(members of the pool).
        With `additive_only`, members the request does not name stay as they are."""
        op = Operation(lb_id=lb["id"])
        stamp = now_iso()
        for fields in wanted:
            current = existing.pop((fields["address"], fields["protocol_port"]), None)
            if current is None:
                self.o.insert_member(self.o.new_member(fields, pool, stamp), op)
                continue
            if BATCH_VALUES(fields) != BATCH_ATTRIBUTES(current):
                changes = {name: fields[name] for name in BATCH_FIELDS}
                self.o.members.touch(current, {**changes, "provisioning_status": "PENDING_UPDATE"})
                op.activate_members.append(current)
        for member in [] if additive else existing.values():
            member.provisioning_status = "PENDING_DELETE"
            op.remove_members.append(member)
        self.o.lock_pool(op, pool)
        self.o.start(lb, op, lb_status="PENDING_UPDATE")

    # health monitors
    def monitors(self, req: Req) -> Reply:
        return self.listing(req, self.o.healthmonitors, "healthmonitors")

    def monitor(self, req: Req) -> Reply:
        row = self.o.healthmonitors.require(req.match["id"], HM_MISSING)
        return ok({"healthmonitor": self.o.render(self.o.healthmonitors, row)})

    def create_monitor(self, req: Req) -> Reply:
        body = self.o.check_fields(_root_of(req.body, "healthmonitor"), HM_CREATE, "healthmonitor")
        pool_id = body.get("pool_id")
        pool = self.o.pools.get(str(pool_id))
        if pool is None:
            raise POOL_MISSING(str(pool_id))
        lb = self.o.mutable_pool(pool)
        monitor = self.o.new_monitor(body, pool)
        op = Operation(lb_id=lb["id"])
        self.o.lock_pool(op, pool)
        self.o.insert_monitor(monitor, pool, op)
        self.o.start(lb, op, lb_status="PENDING_UPDATE")
        return created({"healthmonitor": self.o.render(self.o.healthmonitors, monitor)})

    def update_monitor(self, req: Req) -> Reply:
        monitor = self.o.healthmonitors.require(req.match["id"], HM_MISSING)
        body = self.o.check_fields(_root_of(req.body, "healthmonitor"), HM_UPDATE, "healthmonitor")
        pool = self.o.pools.rows[monitor["_pool_id"]]
        lb = self.o.mutable_pool(pool)
        candidate = dict(monitor)
        _apply_timing(candidate, body, creating=False)
        changes = {k: candidate[k] for k in ("delay", "timeout", "max_retries", "max_retries_down")}
        for name in (
            "name",
            "url_path",
            "http_method",
            "expected_codes",
            "http_version",
            "domain_name",
            "admin_state_up",
            "tags",
        ):
            if name in body:
                changes[name] = body[name]
        self.o.healthmonitors.touch(monitor, {**changes, "updated_at": now_iso()})
        op = Operation(lb_id=lb["id"])
        self.o.lock(op, self.o.healthmonitors, monitor)
        self.o.lock_pool(op, pool)
        self.o.start(lb, op, lb_status="PENDING_UPDATE")
        return ok({"healthmonitor": self.o.render(self.o.healthmonitors, monitor)})

    def delete_monitor(self, req: Req) -> Reply:
        monitor = self.o.healthmonitors.require(req.match["id"], HM_MISSING)
        pool = self.o.pools.rows[monitor["_pool_id"]]
        lb = self.o.mutable_pool(pool)
        op = Operation(lb_id=lb["id"], remove=[(self.o.healthmonitors, monitor["id"])])
        self.o.lock_pool(op, pool)
        monitor["provisioning_status"] = "PENDING_DELETE"
        self.o.start(lb, op, lb_status="PENDING_UPDATE")
        return NO_CONTENT

    # read-only catalogues the openstack CLI asks for
    def providers(self, req: Req) -> Reply:
        return ok({"providers": [{"name": n, "description": d} for n, d in PROVIDERS.items()]})


def routes(octavia: Octavia, knobs: Knobs) -> list[Route]:
    """Octavia's routes, under both `/load-balancer/v2` and `/load-balancer/v2.0`."""
    api = OctaviaApi(octavia, knobs)

    def versions(req: Req) -> Reply:
        return _version_list(req, knobs)

    table = [
        Route("GET", path, versions, auth=False) for path in ("/load-balancer", "/load-balancer/")
    ]
    for prefix in PREFIXES:
        p = f"{prefix}/lbaas"
        table.append(Route("GET", prefix, versions, auth=False))
        table.append(Route("GET", f"{prefix}/", versions, auth=False))
        crud: dict[str, tuple[Handler, Handler, Handler, Handler, Handler]] = {
            "loadbalancers": (api.lbs, api.lb, api.create_lb, api.update_lb, api.delete_lb),
            "listeners": (
                api.listeners_,
                api.listener,
                api.create_listener,
                api.update_listener,
                api.delete_listener,
            ),
            "pools": (api.pools_, api.pool, api.create_pool, api.update_pool, api.delete_pool),
            "healthmonitors": (
                api.monitors,
                api.monitor,
                api.create_monitor,
                api.update_monitor,
                api.delete_monitor,
            ),
            "pools/{pool_id}/members": (
                api.members_,
                api.member,
                api.create_member,
                api.update_member,
                api.delete_member,
            ),
        }
        for name, (listing, get, create, update, delete) in crud.items():
            table += [
                Route("GET", f"{p}/{name}", listing),
                Route("POST", f"{p}/{name}", create),
                Route("GET", f"{p}/{name}/{{id}}", get),
                Route("PUT", f"{p}/{name}/{{id}}", update),
                Route("DELETE", f"{p}/{name}/{{id}}", delete),
            ]
        table += [
            Route("PUT", f"{p}/pools/{{pool_id}}/members", api.batch_members),
            Route("GET", f"{p}/loadbalancers/{{id}}/status", api.lb_status_tree),
            Route("GET", f"{p}/providers", api.providers),
            *octavia.catalog.routes(p, octavia.lb_uses),
        ]
    return table
