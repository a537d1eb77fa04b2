"""The Octavia objects a Service should have: listeners, pools, members, monitors
(docs/upstream.md#octavia-objects).

Built from a `ServiceConfig`, the Service's ports and its member nodes, as plain frozen
specs. They render the request bodies (the fully populated create, a separate listener or
pool create, the batch member list) and answer "does this existing object match?", so the
same description drives creation and reconciliation and the two can never disagree.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import msgspec

from pyccm.protocol.views import Service, ServicePort
from pyccm.provider.openstack.loadbalancer import naming
from pyccm.provider.openstack.loadbalancer.members import (
    CACHED_NODE_SETS,
    Backend,
    address_version,
)
from pyccm.provider.openstack.loadbalancer.resources import (
    HealthMonitor,
    Listener,
    Member,
    MemberKey,
    Pool,
)
from pyccm.provider.openstack.loadbalancer.service_annotations import FORWARDED_HEADERS
from pyccm.provider.openstack.loadbalancer.service_config import ServiceConfig

Body = dict[str, Any]
FORWARDED = frozenset(FORWARDED_HEADERS.values())
_encode = msgspec.json.encode


def added_tags(current: Sequence[str], wanted: Sequence[str]) -> list[str] | None:
    """The tag list a PUT sets to add what `current` lacks of `wanted`, or None when it has
    them all. Tags are only ever added (upstream's merge): a tag that left an annotation
    stays, and so do tags others wrote."""
    missing = [t for t in wanted if t not in current]
    return [*(t for t in current if t), *missing] if missing else None


@dataclass(frozen=True)
class MonitorSpec:
    name: str
    type: str
    delay: int
    timeout: int
    max_retries: int
    max_retries_down: int

    def body(self) -> Body:
        body: Body = {
            "name": self.name,
            "type": self.type,
            "delay": self.delay,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "max_retries_down": self.max_retries_down,
        }
        if self.type == "HTTP":
            body |= {"url_path": "/healthz", "http_method": "GET", "expected_codes": "200"}
        return body

    def changes(self, current: HealthMonitor) -> Body:
        """Fields a PUT must change (a different type needs delete + create instead)."""
        wanted = self.body()
        return {
            k: wanted[k]
            for k in ("name", "delay", "timeout", "max_retries", "max_retries_down")
            if getattr(current, k) != wanted[k]
        }


@dataclass(frozen=True, kw_only=True)
class PoolSpec:
    name: str
    protocol: str
    lb_algorithm: str
    persistence: bool
    # The member nodes, shared by every pool of every Service with the same node set. Not
    # in the repr, which stands for the whole spec when comparing (`fingerprint`): their
    # hash is (5,000 of them would make a 300 KB repr).
    backends: tuple[Backend, ...] = field(repr=False)
    backends_hash: int
    # The members' port: the Service port's node port; 0 means no members
    # (allocateLoadBalancerNodePorts: false).
    member_port: int
    member_subnet_id: str = ""
    # One load balancer serving both families (additional VIPs): the members whose address
    # is of `other_version` go in this subnet (0, "": every member in `member_subnet_id`).
    other_version: int = 0
    other_member_subnet_id: str = ""
    monitor_port: int | None = None
    monitor: MonitorSpec | None = None
    # The user's `pool-tags` (pyccm tags no pool itself).
    tags: tuple[str, ...] = ()

    def body(self) -> Body:
        """The pool alone: a standalone `POST /pools` must not carry members or a monitor
        (Octavia's schema accepts them, but it never builds them and answers 500)."""
        body: Body = {
            "name": self.name,
            "protocol": self.protocol,
            "lb_algorithm": self.lb_algorithm,
        }
        if self.tags:
            body["tags"] = list(self.tags)
        if self.persistence:
            body["session_persistence"] = {"type": "SOURCE_IP"}
        return body

    def populated_body(self, *, with_members: bool = True) -> Body:
        """The pool with its members and monitor, for the fully populated LB create only
        (`with_members=False`: without them, for a cloud whose body limit refuses them)."""
        body = self.body() | {"members": self.member_list() if with_members else []}
        if self.monitor is not None:
            body["healthmonitor"] = self.monitor.body()
        return body

    def changes(self, current: Pool) -> Body:
        changes: Body = {}
        if current.lb_algorithm != self.lb_algorithm:
            changes["lb_algorithm"] = self.lb_algorithm
        has = current.session_persistence is not None and bool(current.session_persistence.type)
        if has != self.persistence:
            changes["session_persistence"] = {"type": "SOURCE_IP"} if self.persistence else None
        if (tags := added_tags(current.tags, self.tags)) is not None:
            changes["tags"] = tags
        return changes

    @property
    def member_count(self) -> int:
        return len(self.backends) if self.member_port else 0

    @property
    def members_print(self) -> tuple[object, ...]:
        """Stands for the member list (equal prints, equal lists)."""
        return (
            self.member_count,
            self.backends_hash,
            self.member_port,
            self.member_subnet_id,
            self.other_member_subnet_id,
            self.monitor_port,
        )

    @cached_property
    def wanted(self) -> frozenset[Backend]:
        """The wanted members' (name, address) pairs: their nodes' (none without a port)."""
        return _pairs(self.backends) if self.member_port else frozenset()

    def has(self, member: Member | MemberKey) -> bool:
        """Whether `member` is a wanted one by upstream's comparison key: name, address,
        port and monitor port (`member_key`)."""
        return (
            member.protocol_port == self.member_port
            and member.monitor_port == self.monitor_port
            and (member.name, member.address) in self.wanted
        )

    def member_body(self, backend: Backend) -> Body:
        """One member's request body (a member created alone)."""
        name, address = backend
        body: Body = {"name": name, "address": address, "protocol_port": self.member_port}
        if subnet := self.subnet_of(address):
            body["subnet_id"] = subnet
        if self.monitor_port is not None:
            body["monitor_port"] = self.monitor_port
        return body

    def member_list(self, backends: Iterable[Backend] | None = None) -> msgspec.Raw:
        """The JSON list of the members' bodies (all wanted ones, or those of `backends`),
        written straight into one buffer: no dict or string per member is kept while it
        is built or sent, so a 5,000-member pool costs its ~400 KB of JSON and no more.
        The bytes are `member_body`'s, as msgspec would encode them."""
        if backends is None:
            backends = self.backends if self.member_port else ()
        buf = bytearray(b"[")
        for backend in backends:
            if len(buf) > 1:
                buf += b","
            self.write_member(buf, backend)
        buf += b"]"
        return msgspec.Raw(buf)

    def write_member(self, buf: bytearray, backend: Backend) -> None:
        """Append one member's body (`member_body`'s JSON) to `buf`."""
        name, address = backend
        buf += b'{"name":'
        buf += _encode(name)
        buf += b',"address":'
        buf += _encode(address)
        buf += self._tails[self.subnet_of(address)]

    @cached_property
    def _tails(self) -> dict[str, bytes]:
        """What follows a member's address in its JSON body, by its subnet."""
        tails = {}
        for subnet in {self.member_subnet_id, self.other_member_subnet_id}:
            tail = b',"protocol_port":%d' % self.member_port
            if subnet:
                tail += b',"subnet_id":' + _encode(subnet)
            if self.monitor_port is not None:
                tail += b',"monitor_port":%d' % self.monitor_port
            tails[subnet] = tail + b"}"
        return tails

    def subnet_of(self, address: str) -> str:
        if self.other_version and address_version(address) == self.other_version:
            return self.other_member_subnet_id
        return self.member_subnet_id


@functools.lru_cache(maxsize=CACHED_NODE_SETS)
def _pairs(backends: tuple[Backend, ...]) -> frozenset[Backend]:
    # Every pool of every Service with the same node set shares one (its tuples are the
    # backends' own).
    return frozenset(backends)


@dataclass(frozen=True)
class ListenerSpec:
    index: int
    name: str
    protocol: str
    port: int
    connection_limit: int
    # The Service's name tag and the user's `listener-tags`; () below Octavia 2.5.
    tags: tuple[str, ...]
    timeouts: dict[str, int] | None
    # The `insert_headers` keys turned on ("X-Forwarded-For", ...).
    headers: tuple[str, ...]
    tls_ref: str
    allowed_cidrs: tuple[str, ...] | None
    pool: PoolSpec

    @property
    def key(self) -> tuple[str, int]:
        return (self.protocol, self.port)

    def body(self) -> Body:
        body: Body = {
            "name": self.name,
            "protocol": self.protocol,
            "protocol_port": self.port,
            "connection_limit": self.connection_limit,
        }
        if self.tags:
            body["tags"] = list(self.tags)
        body |= self._settable()
        return body

    def create_body(self, *, with_members: bool = True) -> Body:
        """A listener of the fully populated create: with its default pool inside."""
        return self.body() | {"default_pool": self.pool.populated_body(with_members=with_members)}

    def _settable(self) -> Body:
        body: Body = {}
        if self.timeouts is not None:
            body |= self.timeouts
        if self.headers:
            body["insert_headers"] = dict.fromkeys(self.headers, "true")
        if self.tls_ref:
            body["default_tls_container_ref"] = self.tls_ref
        if self.allowed_cidrs is not None:
            body["allowed_cidrs"] = list(self.allowed_cidrs)
        return body

    def changes(self, current: Listener) -> Body:
        """The PUT body that brings `current` in line, or {} when it already is."""
        changes: Body = {}
        if (tags := added_tags(current.tags, self.tags)) is not None:
            changes["tags"] = tags
        if current.connection_limit != self.connection_limit:
            changes["connection_limit"] = self.connection_limit
        headers = current.insert_headers or {}
        if {k for k in FORWARDED if headers.get(k) == "true"} != set(self.headers):
            # The other headers (set by hand) stay.
            kept = {k: v for k, v in headers.items() if k not in FORWARDED}
            changes["insert_headers"] = kept | dict.fromkeys(self.headers, "true")
        if (current.default_tls_container_ref or "") != self.tls_ref:
            changes["default_tls_container_ref"] = self.tls_ref or None
        for name, value in (self.timeouts or {}).items():
            if getattr(current, name) != value:
                changes[name] = value
        if self.allowed_cidrs is not None and set(current.allowed_cidrs or ()) != set(
            self.allowed_cidrs
        ):
            changes["allowed_cidrs"] = list(self.allowed_cidrs)
        return changes


def _monitor(cfg: ServiceConfig, index: int, port: ServicePort) -> MonitorSpec | None:
    monitor = cfg.monitor
    if monitor is None:
        return None
    if monitor.http_port:
        kind = "HTTP"
    else:
        kind = {"UDP": "UDP-CONNECT", "SCTP": "SCTP"}.get(port.protocol, "TCP")
    return MonitorSpec(
        name=naming.child_name("monitor", index, cfg.name),
        type=kind,
        delay=monitor.delay,
        timeout=monitor.timeout,
        max_retries=monitor.max_retries,
        max_retries_down=monitor.max_retries_down,
    )


def desired_listeners(
    cfg: ServiceConfig, service: Service, backends: tuple[Backend, ...]
) -> list[ListenerSpec]:
    """The Service's listeners; `backends` are its member nodes (`members.Backends`)."""
    backends_hash = hash(backends)
    monitor_port = cfg.monitor.http_port if cfg.monitor and cfg.monitor.http_port else None
    specs = []
    for index, port in enumerate(service.spec.ports):
        protocol = cfg.listener_protocol(port)
        pool = PoolSpec(
            name=naming.child_name("pool", index, cfg.name),
            protocol=cfg.pool_protocol(protocol),
            lb_algorithm=cfg.lb_method,
            persistence=cfg.session_persistence,
            backends=backends,
            backends_hash=backends_hash,
            member_port=port.node_port,
            member_subnet_id=cfg.member_subnet_id,
            other_version=cfg.extra_version,
            other_member_subnet_id=cfg.extra_member_subnet_id,
            monitor_port=monitor_port,
            monitor=_monitor(cfg, index, port),
            tags=cfg.pool_tags,
        )
        specs.append(
            ListenerSpec(
                index=index,
                name=naming.child_name("listener", index, cfg.name),
                protocol=protocol,
                port=port.port,
                connection_limit=cfg.connection_limit,
                tags=(cfg.name, *cfg.listener_tags) if cfg.features.tags else (),
                timeouts=cfg.timeouts,
                headers=tuple(FORWARDED_HEADERS[key] for key in cfg.forwarded),
                tls_ref=cfg.tls_ref,
                allowed_cidrs=cfg.allowed_cidrs,
                pool=pool,
            )
        )
    return specs


def fingerprint(specs: Sequence[ListenerSpec]) -> str:
    """Stands for the specs when comparing them with the ones a load balancer was built
    or last verified from (the members by their node set's hash)."""
    return repr(specs)
