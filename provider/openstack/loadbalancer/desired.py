"""The Octavia objects a Service should have: listeners, pools, members, monitors (§3.5).

Built from a `ServiceConfig`, the Service's ports and the eligible nodes, as plain frozen
specs. They render the request bodies (the fully populated create, a separate listener or
pool create, the batch member list) and answer "does this existing object match?", so the
same description drives creation and reconciliation and the two can never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protocol.views import Node, Service, ServicePort
from provider.openstack.loadbalancer import naming
from provider.openstack.loadbalancer.members import member_address
from provider.openstack.loadbalancer.resources import HealthMonitor, Listener, Member, Pool
from provider.openstack.loadbalancer.service_config import ServiceConfig, eligible_nodes

Body = dict[str, Any]
XFF = "X-Forwarded-For"


@dataclass(frozen=True)
class MemberSpec:
    name: str
    address: str
    protocol_port: int
    subnet_id: str = ""
    monitor_port: int | None = None

    @property
    def key(self) -> str:
        """Upstream's comparison key: name, address, port and monitor port."""
        return f"{self.name}-{self.address}-{self.protocol_port}-{self.monitor_port}"

    def body(self) -> Body:
        body: Body = {"name": self.name, "address": self.address}
        body["protocol_port"] = self.protocol_port
        if self.subnet_id:
            body["subnet_id"] = self.subnet_id
        if self.monitor_port is not None:
            body["monitor_port"] = self.monitor_port
        return body


def member_key(member: Member) -> str:
    return f"{member.name}-{member.address}-{member.protocol_port}-{member.monitor_port}"


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


@dataclass(frozen=True)
class PoolSpec:
    name: str
    protocol: str
    lb_algorithm: str
    persistence: bool
    members: tuple[MemberSpec, ...]
    monitor: MonitorSpec | None

    def body(self) -> Body:
        """The pool alone: a standalone `POST /pools` must not carry members or a monitor
        (Octavia's schema accepts them, but it never builds them and answers 500)."""
        body: Body = {
            "name": self.name,
            "protocol": self.protocol,
            "lb_algorithm": self.lb_algorithm,
        }
        if self.persistence:
            body["session_persistence"] = {"type": "SOURCE_IP"}
        return body

    def populated_body(self) -> Body:
        """The pool with its members and monitor, for the fully populated LB create only."""
        body = self.body() | {"members": [m.body() for m in self.members]}
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
        return changes

    @property
    def member_keys(self) -> frozenset[str]:
        return frozenset(m.key for m in self.members)


@dataclass(frozen=True)
class ListenerSpec:
    index: int
    name: str
    protocol: str
    port: int
    connection_limit: int
    tag: str | None
    timeouts: dict[str, int] | None
    xff: bool
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
        if self.tag is not None:
            body["tags"] = [self.tag]
        body |= self._settable()
        return body

    def create_body(self) -> Body:
        """A listener of the fully populated create: with its default pool inside."""
        return self.body() | {"default_pool": self.pool.populated_body()}

    def _settable(self) -> Body:
        body: Body = {}
        if self.timeouts is not None:
            body |= self.timeouts
        if self.xff:
            body["insert_headers"] = {XFF: "true"}
        if self.tls_ref:
            body["default_tls_container_ref"] = self.tls_ref
        if self.allowed_cidrs is not None:
            body["allowed_cidrs"] = list(self.allowed_cidrs)
        return body

    def changes(self, current: Listener) -> Body:
        """The PUT body that brings `current` in line, or {} when it already is."""
        changes: Body = {}
        if self.tag is not None and self.tag not in current.tags:
            changes["tags"] = [*current.tags, self.tag]
        if current.connection_limit != self.connection_limit:
            changes["connection_limit"] = self.connection_limit
        headers = current.insert_headers or {}
        if (headers.get(XFF) == "true") != self.xff:
            changes["insert_headers"] = {XFF: "true"} if self.xff else {}
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


def _members(
    cfg: ServiceConfig, port: ServicePort, nodes: Sequence[Node]
) -> tuple[MemberSpec, ...]:
    if port.node_port == 0:
        return ()  # allocateLoadBalancerNodePorts: false
    monitor_port = cfg.monitor.http_port if cfg.monitor and cfg.monitor.http_port else None
    members = []
    for node in nodes:
        address = member_address(node, cfg.ip_version)
        if address:
            members.append(
                MemberSpec(
                    name=node.name,
                    address=address,
                    protocol_port=port.node_port,
                    subnet_id=cfg.member_subnet_id,
                    monitor_port=monitor_port,
                )
            )
    return tuple(members)


def desired_listeners(
    cfg: ServiceConfig, service: Service, nodes: Sequence[Node]
) -> list[ListenerSpec]:
    members_of = eligible_nodes(cfg, nodes)
    specs = []
    for index, port in enumerate(service.spec.ports):
        protocol = cfg.listener_protocol(port)
        pool = PoolSpec(
            name=naming.child_name("pool", index, cfg.name),
            protocol=cfg.pool_protocol(protocol),
            lb_algorithm=cfg.lb_method,
            persistence=cfg.session_persistence,
            members=_members(cfg, port, members_of),
            monitor=_monitor(cfg, index, port),
        )
        specs.append(
            ListenerSpec(
                index=index,
                name=naming.child_name("listener", index, cfg.name),
                protocol=protocol,
                port=port.port,
                connection_limit=cfg.connection_limit,
                tag=cfg.name if cfg.features.tags else None,
                timeouts=cfg.timeouts,
                xff=cfg.xff,
                tls_ref=cfg.tls_ref,
                allowed_cidrs=cfg.allowed_cidrs,
                pool=pool,
            )
        )
    return specs
