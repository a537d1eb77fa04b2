"""A deterministic in-memory cloud for controller unit tests.

It implements every capability of `provider.interface` over plain dictionaries, with the
same error semantics as the real provider, and knobs a test turns to script the cloud:
servers that are missing or shut down, the next N calls of a method failing with a given
error, per-method delays (through an injectable `sleep`, so a fake clock can be used), load
balancers that stay "provisioning" for N syncs (`RetryAfter`), and a forced-internal mode
that returns a Warning event. Every call is recorded in `calls` so a test can assert what
a controller asked for. Ids and addresses are derived from names and counters, never from
randomness, so two runs of a test see the same values.

Each process gets its own copy: multi-process runs use the `openstack` provider against
the OpenStack simulator instead (docs/architecture.md#design-provider).
"""

from __future__ import annotations

import ipaddress
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import yaml

from pyccm.protocol.views import LoadBalancerIngress, Node, NodeAddress, Service
from pyccm.provider.errors import (
    AmbiguousInstance,
    CloudNotFound,
    ConfigError,
    InstanceNotFound,
    InvalidProviderId,
    ProviderError,
    RetryAfter,
)
from pyccm.provider.interface import (
    InstanceListing,
    InstanceMetadata,
    Instances,
    LoadBalancerOutcome,
    LoadBalancerPlan,
    LoadBalancers,
    NodeSelector,
    OwnedResource,
    PlannedChange,
    ProviderEvent,
    ProviderId,
    Route,
    RouteFailure,
    Routes,
    selects,
)
from pyccm.provider.route_claims import claimed_by, claims, claims_for
from pyccm.provider.settings import ProviderSettings

FakeMethod = Literal[
    "instance_exists",
    "instance_shutdown",
    "instance_metadata",
    "instance_listing",
    "instances_metadata",
    "lb_get",
    "lb_ensure",
    "lb_update",
    "lb_ensure_deleted",
    "lb_plan",
    "lb_owned",
    "lb_delete_owned",
    "routes_list",
    "routes_create",
    "routes_delete",
    "routes_create_many",
    "routes_delete_many",
    "routes_claim",
]

PROVIDER_ID_PREFIX = "fake:///"
ANNOTATION_LB_ID = "loadbalancer.openstack.org/load-balancer-id"
ANNOTATION_LB_ADDRESS = "loadbalancer.openstack.org/load-balancer-address"
# `k=v,k2`: only the nodes with these labels become members (as the real provider's
# node-selector annotation, under the fake's own name).
ANNOTATION_NODE_SELECTOR = "fake.pyccm.io/node-selector"
# Ids are uuid5 of the name in this namespace: stable across runs and processes.
_ID_NAMESPACE = uuid.UUID("5f0c6a2e-3f43-4a43-9a53-2f6f6c6b7a01")
_FLOATING_NETWORK = ipaddress.IPv4Network("172.24.4.0/22")
_VIP_NETWORK = ipaddress.IPv4Network("10.0.254.0/23")


def stable_id(kind: str, name: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, f"{kind}/{name}"))


@dataclass(frozen=True)
class FakeServer:
    name: str
    server_id: str
    addresses: tuple[NodeAddress, ...]
    instance_type: str = "m1.small"
    zone: str = "nova"
    shutdown: bool = False


@dataclass(frozen=True)
class FakeLoadBalancer:
    lb_id: str
    service_key: str
    address: str
    ports: tuple[int, ...]
    members: tuple[str, ...]
    # Syncs left before the load balancer is ACTIVE; each ensure while > 0 gets RetryAfter.
    pending_syncs: int = 0


@dataclass(frozen=True)
class FakeCall:
    method: FakeMethod
    subject: str


@dataclass
class _Knobs:
    failures: dict[FakeMethod, list[Exception]] = field(default_factory=dict)
    delays: dict[FakeMethod, float] = field(default_factory=dict)
    lb_pending_syncs: int = 0
    lb_retry_delay: float = 1.0
    forced_internal: bool = False
    # Most routes the router holds (Neutron's max_routes); None = no limit.
    route_limit: int | None = None


class FakeCloud:
    """The fake provider. Thread-safe: workers call it from several sync threads."""

    def __init__(
        self,
        *,
        region: str = "RegionOne",
        offer_load_balancers: bool = True,
        offer_routes: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        cluster_id: str = "",
    ) -> None:
        self.region = region
        self.cluster_id = cluster_id
        self._offer_load_balancers = offer_load_balancers
        self._offer_routes = offer_routes
        self._sleep = sleep
        self._lock = threading.Lock()
        self._knobs = _Knobs()
        self._servers: dict[str, FakeServer] = {}
        self._load_balancers: dict[str, FakeLoadBalancer] = {}
        self._routes: dict[str, str] = {}  # destination CIDR -> next hop
        # The router's tags: `pyccm-routes` claims (provider.route_claims).
        self._router_tags: list[str] = []
        self._addresses_allocated = 0
        self.calls: list[FakeCall] = []
        self._instances = _FakeInstances(self)
        self._lbs = _FakeLoadBalancers(self)
        self._route_table = _FakeRoutes(self)

    # --- Cloud ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return "fake"

    def instances(self) -> Instances | None:
        return self._instances

    def load_balancers(self) -> LoadBalancers | None:
        return self._lbs if self._offer_load_balancers else None

    def routes(self) -> Routes | None:
        return self._route_table if self._offer_routes else None

    def close(self) -> None:
        return None

    # --- knobs ---------------------------------------------------------------------------
    def add_server(
        self,
        name: str,
        *,
        internal_ip: str = "",
        external_ip: str = "",
        instance_type: str = "m1.small",
        zone: str = "nova",
        shutdown: bool = False,
    ) -> FakeServer:
        addresses = [NodeAddress(type="InternalIP", address=internal_ip)] if internal_ip else []
        if external_ip:
            addresses.append(NodeAddress(type="ExternalIP", address=external_ip))
        addresses.append(NodeAddress(type="Hostname", address=name))
        server = FakeServer(
            name=name,
            server_id=stable_id("server", name),
            addresses=tuple(addresses),
            instance_type=instance_type,
            zone=zone,
            shutdown=shutdown,
        )
        with self._lock:
            self._servers[server.server_id] = server
        return server

    def remove_server(self, name: str) -> None:
        with self._lock:
            for server_id in [s.server_id for s in self._servers.values() if s.name == name]:
                del self._servers[server_id]

    def set_shutdown(self, name: str, shutdown: bool = True) -> None:
        with self._lock:
            for server in [s for s in self._servers.values() if s.name == name]:
                self._servers[server.server_id] = replace(server, shutdown=shutdown)

    def fail_next(self, method: FakeMethod, error: Exception, *, times: int = 1) -> None:
        """The next `times` calls of `method` raise `error` (before touching any state); any
        exception, so tests can play a library failing in a way nobody foresaw."""
        with self._lock:
            self._knobs.failures.setdefault(method, []).extend([error] * times)

    def set_delay(self, method: FakeMethod, seconds: float) -> None:
        """Every call of `method` first sleeps `seconds` through the injected `sleep`."""
        with self._lock:
            self._knobs.delays[method] = seconds

    def set_lb_provisioning(self, *, syncs: int, retry_delay: float = 1.0) -> None:
        """New load balancers stay provisioning for `syncs` ensures (each gets RetryAfter)."""
        with self._lock:
            self._knobs.lb_pending_syncs = syncs
            self._knobs.lb_retry_delay = retry_delay

    def set_route_limit(self, limit: int | None) -> None:
        """The router holds at most `limit` routes: creates beyond it fail with the limit."""
        with self._lock:
            self._knobs.route_limit = limit

    def set_forced_internal(self, forced: bool = True) -> None:
        """No floating network: ingress is the VIP and each ensure returns a Warning event."""
        with self._lock:
            self._knobs.forced_internal = forced

    # --- inspection ----------------------------------------------------------------------
    def load_balancer(self, service_key: str) -> FakeLoadBalancer | None:
        with self._lock:
            return self._load_balancers.get(service_key)

    def route_table(self) -> dict[str, str]:
        with self._lock:
            return dict(self._routes)

    def router_tags(self) -> list[str]:
        with self._lock:
            return list(self._router_tags)

    def tag_router(self, tag: str) -> None:
        """Another cluster's claim (or any tag) on the router, as a test scripts it."""
        with self._lock:
            if tag not in self._router_tags:
                self._router_tags.append(tag)

    def calls_of(self, method: FakeMethod) -> list[str]:
        with self._lock:
            return [c.subject for c in self.calls if c.method == method]

    # --- shared by the capability views --------------------------------------------------
    def _enter(self, method: FakeMethod, subject: str) -> None:
        """Record the call, apply its delay, raise its scripted failure if any."""
        with self._lock:
            self.calls.append(FakeCall(method=method, subject=subject))
            delay = self._knobs.delays.get(method, 0.0)
            pending = self._knobs.failures.get(method)
            failure = pending.pop(0) if pending else None
        if delay:
            self._sleep(delay)
        if failure is not None:
            raise failure

    def _find_server(self, node: Node) -> FakeServer:
        provider_id = node.spec.provider_id
        with self._lock:
            if provider_id:
                if not provider_id.startswith(PROVIDER_ID_PREFIX):
                    raise InvalidProviderId(f"providerID {provider_id!r} is not a fake:/// id")
                server = self._servers.get(provider_id.removeprefix(PROVIDER_ID_PREFIX))
                if server is None:
                    raise InstanceNotFound(f"no server with id {provider_id}")
                return server
            matches = [s for s in self._servers.values() if s.name == node.name]
        if not matches:
            raise InstanceNotFound(f"no server named {node.name!r}")
        if len(matches) > 1:
            raise AmbiguousInstance(f"{len(matches)} servers are named {node.name!r}")
        return matches[0]

    def _allocate_address(self, network: ipaddress.IPv4Network) -> str:
        self._addresses_allocated += 1
        return str(network.network_address + 10 + self._addresses_allocated)


class _FakeInstances:
    def __init__(self, cloud: FakeCloud) -> None:
        self._cloud = cloud

    def instance_exists(self, *, node: Node) -> bool:
        self._cloud._enter("instance_exists", node.name)
        try:
            self._cloud._find_server(node)
        except InstanceNotFound:
            return False
        return True

    def instance_shutdown(self, *, node: Node) -> bool:
        self._cloud._enter("instance_shutdown", node.name)
        return self._cloud._find_server(node).shutdown

    def instance_metadata(self, *, node: Node) -> InstanceMetadata:
        self._cloud._enter("instance_metadata", node.name)
        return self._metadata(self._cloud._find_server(node))

    def instances_metadata(
        self,
        *,
        nodes: Sequence[Node],
        deliver: Callable[[dict[str, InstanceMetadata]], None] | None = None,
    ) -> dict[str, InstanceMetadata]:
        """One call for every node, delivered in one part; a node whose server is missing,
        ambiguous or not ours is left out (the caller asks about it alone), as the OpenStack
        provider does."""
        self._cloud._enter("instances_metadata", f"{len(nodes)} nodes")
        found: dict[str, InstanceMetadata] = {}
        for node in nodes:
            try:
                found[node.name] = self._metadata(self._cloud._find_server(node))
            except ProviderError:
                continue
        if deliver is not None:
            deliver(found)
        return found

    def _metadata(self, server: FakeServer) -> InstanceMetadata:
        return InstanceMetadata(
            provider_id=ProviderId(PROVIDER_ID_PREFIX + server.server_id),
            instance_type=server.instance_type,
            node_addresses=server.addresses,
            zone=server.zone,
            region=self._cloud.region,
        )

    def instance_listing(self, *, nodes: Sequence[Node]) -> InstanceListing:
        """One call for every node; a node whose server is missing, ambiguous or not ours is
        left out (the caller asks about it alone), as the OpenStack provider does."""
        self._cloud._enter("instance_listing", f"{len(nodes)} nodes")
        found: set[str] = set()
        shutdown: set[str] = set()
        for node in nodes:
            try:
                server = self._cloud._find_server(node)
            except ProviderError:
                continue
            found.add(node.name)
            if server.shutdown:
                shutdown.add(node.name)
        return InstanceListing(found=frozenset(found), shutdown=frozenset(shutdown))


def _member_names(nodes: Sequence[Node], selector: NodeSelector = ()) -> tuple[str, ...]:
    usable = (
        n
        for n in nodes
        if any(a.type == "InternalIP" for a in n.status.addresses)
        and selects(selector, n.metadata.labels)
    )
    return tuple(sorted(n.name for n in usable))


def _node_selector(service: Service) -> NodeSelector:
    text = service.metadata.annotations.get(ANNOTATION_NODE_SELECTOR, "")
    terms = (part.strip().partition("=") for part in text.split(",") if part.strip())
    return tuple((key.strip(), value.strip() or None) for key, _, value in terms)


class _FakeLoadBalancers:
    def __init__(self, cloud: FakeCloud) -> None:
        self._cloud = cloud

    def get(self, *, service: Service) -> tuple[LoadBalancerIngress, ...] | None:
        self._cloud._enter("lb_get", service.key)
        lb = self._cloud.load_balancer(service.key)
        return None if lb is None else (LoadBalancerIngress(ip=lb.address, ip_mode="VIP"),)

    def ensure(self, *, service: Service, nodes: Sequence[Node]) -> LoadBalancerOutcome:
        cloud = self._cloud
        cloud._enter("lb_ensure", service.key)
        ports = tuple(p.port for p in service.spec.ports)
        with cloud._lock:
            knobs = cloud._knobs
            lb = cloud._load_balancers.get(service.key)
            if lb is None:
                network = _VIP_NETWORK if knobs.forced_internal else _FLOATING_NETWORK
                lb = FakeLoadBalancer(
                    lb_id=stable_id("loadbalancer", service.key),
                    service_key=service.key,
                    address=cloud._allocate_address(network),
                    ports=ports,
                    members=_member_names(nodes, _node_selector(service)),
                    pending_syncs=knobs.lb_pending_syncs,
                )
            elif lb.pending_syncs > 0:
                lb = replace(lb, pending_syncs=lb.pending_syncs - 1)
            else:
                lb = replace(lb, ports=ports, members=_member_names(nodes, _node_selector(service)))
            cloud._load_balancers[service.key] = lb
            retry_delay, forced_internal = knobs.lb_retry_delay, knobs.forced_internal
        if lb.pending_syncs > 0:
            raise RetryAfter(f"load balancer {lb.lb_id} is PENDING_CREATE", delay=retry_delay)
        events: tuple[ProviderEvent, ...] = ()
        if forced_internal:
            message = "no floating network: the load balancer is internal"
            events = (
                ProviderEvent(type="Warning", reason="LoadBalancerForcedInternal", message=message),
            )
        return LoadBalancerOutcome(
            ingress=(LoadBalancerIngress(ip=lb.address, ip_mode="VIP"),),
            annotations_to_set={ANNOTATION_LB_ID: lb.lb_id, ANNOTATION_LB_ADDRESS: lb.address},
            events=events,
        )

    def update(self, *, service: Service, nodes: Sequence[Node]) -> tuple[ProviderEvent, ...]:
        cloud = self._cloud
        cloud._enter("lb_update", service.key)
        with cloud._lock:
            lb = cloud._load_balancers.get(service.key)
            if lb is None:
                raise CloudNotFound(f"no load balancer for Service {service.key}")
            members = _member_names(nodes, _node_selector(service))
            cloud._load_balancers[service.key] = replace(lb, members=members)
        return ()

    def ensure_deleted(self, *, service: Service) -> tuple[ProviderEvent, ...]:
        cloud = self._cloud
        cloud._enter("lb_ensure_deleted", service.key)
        with cloud._lock:
            cloud._load_balancers.pop(service.key, None)
        return ()

    def node_selector(self, *, service: Service) -> NodeSelector:
        # Not a cloud call: not recorded, never failed by a knob (as the real one).
        return _node_selector(service)

    def plan(self, *, service: Service, nodes: Sequence[Node]) -> LoadBalancerPlan:
        """What `ensure` would change: the load balancer, or its ports and members."""
        self._cloud._enter("lb_plan", service.key)
        ports = tuple(p.port for p in service.spec.ports)
        members = _member_names(nodes, _node_selector(service))
        with self._cloud._lock:
            lb = self._cloud._load_balancers.get(service.key)
        if lb is None:
            create = PlannedChange(
                action="create",
                kind="load balancer",
                target=service.key,
                fields={"ports": list(ports), "members": list(members)},
            )
            return LoadBalancerPlan(service=service.key, changes=(create,))
        fields: dict[str, object] = {}
        if lb.ports != ports:
            fields["ports"] = list(ports)
        if lb.members != members:
            fields["members"] = list(members)
        changes = (
            PlannedChange(action="update", kind="load balancer", target=lb.lb_id, fields=fields),
        )
        return LoadBalancerPlan(service=service.key, changes=changes if fields else ())

    def owned(self) -> tuple[OwnedResource, ...]:
        """Every fake load balancer: the fake cloud holds only this cluster's."""
        self._cloud._enter("lb_owned", "")
        with self._cloud._lock:
            lbs = list(self._cloud._load_balancers.values())
        return tuple(
            OwnedResource(kind="load balancer", id=lb.lb_id, services=(lb.service_key,))
            for lb in lbs
        )

    def delete_owned(self, resource: OwnedResource) -> None:
        self._cloud._enter("lb_delete_owned", resource.id)
        with self._cloud._lock:
            for key, lb in list(self._cloud._load_balancers.items()):
                if lb.lb_id == resource.id:
                    del self._cloud._load_balancers[key]


def _next_hop(route: Route) -> str:
    version = ipaddress.ip_network(route.destination_cidr, strict=False).version
    for address in route.target_node_addresses:
        if (
            address.type == "InternalIP"
            and ipaddress.ip_address(address.address).version == version
        ):
            return address.address
    raise ProviderError(f"no address found for host {route.target_node}")


class _FakeRoutes:
    def __init__(self, cloud: FakeCloud) -> None:
        self._cloud = cloud

    def list(self, *, nodes: Sequence[Node]) -> tuple[Route, ...]:
        self._cloud._enter("routes_list", "")
        owners = {a.address: n for n in nodes for a in n.status.addresses}
        routes = []
        found = claims(self._cloud.router_tags())
        for destination, next_hop in sorted(self._cloud.route_table().items()):
            owner = owners.get(next_hop)
            routes.append(
                Route(
                    name=destination,
                    target_node=owner.name if owner else next_hop,
                    destination_cidr=destination,
                    blackhole=owner is None,
                    target_node_addresses=owner.status.addresses if owner else (),
                    claimed_by=claimed_by(destination, found, cluster_id=self._cloud.cluster_id),
                )
            )
        return tuple(routes)

    def claim(self, *, cluster_cidrs: Sequence[str]) -> None:
        """`RouteClaims`: the real provider's tags, on the fake router; a call is made
        (and recorded) only for a tag the router lacks, as the real provider's once."""
        if not self._cloud.cluster_id:
            return
        have = set(self._cloud.router_tags())
        missing = [
            c.tag for c in claims_for(self._cloud.cluster_id, cluster_cidrs) if c.tag not in have
        ]
        if not missing:
            return
        self._cloud._enter("routes_claim", ",".join(missing))
        for tag in missing:
            self._cloud.tag_router(tag)

    def create(self, *, name_hint: str, route: Route) -> None:
        self._cloud._enter("routes_create", route.destination_cidr)
        next_hop = _next_hop(route)
        with self._cloud._lock:
            limit = self._cloud._knobs.route_limit
            table = self._cloud._routes
            if limit is not None and route.destination_cidr not in table and len(table) >= limit:
                raise RouteLimit(limit)
            table[route.destination_cidr] = next_hop

    def delete(self, *, route: Route) -> None:
        self._cloud._enter("routes_delete", route.destination_cidr)
        with self._cloud._lock:
            self._cloud._routes.pop(route.destination_cidr, None)

    # A batch is recorded as one `routes_*_many` call (subject: how many routes), then as
    # each of its routes' `routes_create`/`routes_delete`, so a test sees both the number of
    # cloud calls and which routes were asked for, and `fail_next("routes_create")` fails one
    # route of a batch, as a cloud refuses one bad route.
    def create_many(self, *, routes: Sequence[tuple[str, Route]]) -> tuple[RouteFailure, ...]:
        self._cloud._enter("routes_create_many", f"{len(routes)} routes")
        return _each(lambda pair: self.create(name_hint=pair[0], route=pair[1]), routes)

    def delete_many(self, *, routes: Sequence[Route]) -> tuple[RouteFailure, ...]:
        self._cloud._enter("routes_delete_many", f"{len(routes)} routes")
        return _each(lambda pair: self.delete(route=pair[1]), [("", r) for r in routes])


class RouteLimit(ProviderError):
    """The fake router is full (its `set_route_limit`)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"The number of routes exceeds the maximum {limit}.")
        self.limit = limit


def _each(
    call: Callable[[tuple[str, Route]], None], routes: Sequence[tuple[str, Route]]
) -> tuple[RouteFailure, ...]:
    failures = []
    for pair in routes:
        try:
            call(pair)
        except Exception as error:  # any scripted failure fails this route only
            limit = error.limit if isinstance(error, RouteLimit) else None
            failures.append(RouteFailure(route=pair[1], error=str(error), route_limit=limit))
    return tuple(failures)


def _seed_from_file(cloud: FakeCloud, path: Path) -> None:
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the fake cloud's seed file ({exc})") from exc
    servers = (document or {}).get("servers", [])
    if not isinstance(servers, list):
        raise ConfigError(f"{path}: servers: expected a list")
    for entry in servers:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfigError(f"{path}: servers: each entry needs a name")
        cloud.add_server(
            entry["name"],
            internal_ip=str(entry.get("internal_ip", "")),
            external_ip=str(entry.get("external_ip", "")),
            instance_type=str(entry.get("instance_type", "m1.small")),
            zone=str(entry.get("zone", "nova")),
            shutdown=bool(entry.get("shutdown", False)),
        )


def create_cloud(*, settings: ProviderSettings) -> FakeCloud:
    """The registry's factory: an empty fake cloud, or one seeded from a YAML file given as
    `--cloud-config` (`servers: [{name, internal_ip, external_ip, instance_type, zone,
    shutdown}]`)."""
    cloud = FakeCloud(cluster_id=settings.cluster_id)
    if settings.cloud_config is not None:
        _seed_from_file(cloud, settings.cloud_config)
    return cloud
