"""Everything a sync needs to know about one Service, resolved once
(docs/upstream.md#service-resolution).

`cloud.conf`, the Service's `[LoadBalancerClass]`, its annotations and spec, and the
Octavia feature gates are folded into one frozen `ServiceConfig`, in upstream's
precedence. Resolution is pure except for two autodetections that need the cloud (the VIP
subnet from the first node's port, the floating network from Neutron's external
networks), which `Resolver` does and caches where upstream would repeat them.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pyccm.protocol.views import Node, Service, ServicePort
from pyccm.provider.errors import CloudError, InvalidProviderId
from pyccm.provider.openstack.common.features import CloudFeatures, OctaviaFeatures
from pyccm.provider.openstack.common.provider_ids import parse_provider_id
from pyccm.provider.openstack.config import (
    LiveSettings,
    LoadBalancerClass,
    LoadBalancerSettings,
)
from pyccm.provider.openstack.loadbalancer import naming
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm.provider.openstack.loadbalancer.api import NETWORKS, SUBNETS, Api
from pyccm.provider.openstack.loadbalancer.members import (
    ADDRESS_TYPES,
    MemberChoice,
    Selector,
    member_address,
    node_matches,
    parse_selector,
)

log = logging.getLogger(__name__)

ALGORITHMS = ("ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT")
PROXY_VALUES = {"true": "PROXY", "v1": "PROXY", "v2": "PROXYV2", "false": ""}
ALLOW_ALL = {4: "0.0.0.0/0", 6: "::/0"}
# kube-proxy's health server on every node (`--healthz-bind-address`'s default port): its
# `/healthz` fails while kube-proxy is down and while the node is being deleted (KEP-3836).
KUBE_PROXY_PORT = 10256


@dataclass(frozen=True, kw_only=True)
class MonitorConfig:
    delay: int
    timeout: int
    max_retries: int
    max_retries_down: int
    # HTTP GET /healthz on this port of each node instead of the Service's port: the
    # health-check node port (externalTrafficPolicy Local) or kube-proxy's (Cluster).
    http_port: int = 0
    # `http_port` is kube-proxy's: the monitors check the node, not the Service.
    kube_proxy: bool = False
    # The kube-proxy monitors are the default, not asked for by the Service: a load
    # balancer whose pools have monitors of their port's protocol (upstream's, an older
    # pyccm's) keeps that kind (`port_monitors`), so a takeover writes no monitor.
    yields: bool = False

    def port_monitors(self) -> MonitorConfig:
        """The monitors of the port's protocol (TCP, UDP-CONNECT, SCTP), as upstream's."""
        return replace(self, http_port=0, kube_proxy=False, yields=False)


@dataclass(frozen=True, kw_only=True)
class FloatingSubnet:
    """How to choose the floating IP's subnet: an id, or a name pattern and/or tags."""

    subnet_id: str = ""
    name_pattern: str = ""
    tags: str = ""

    @property
    def is_matcher(self) -> bool:
        return not self.subnet_id and bool(self.name_pattern or self.tags)


@dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    name: str
    legacy_name: str
    description: str
    fip_description: str
    cluster: str
    ip_version: int
    internal: bool
    lb_id: str
    # A `load-balancer-id` annotation that cannot name a load balancer (not a UUID): an
    # ensure refuses to run rather than build a new load balancer by name.
    bad_lb_id: str
    vip_subnet_id: str
    vip_network_id: str
    vip_port_id: str
    member_subnet_id: str
    # `member-subnet-id` is configured (annotation, class or `[LoadBalancer]`), not the VIP's
    # subnet by default: members are the nodes' addresses in it.
    member_subnet_chosen: bool
    # `node-address-type`: the only node address type members have ("" upstream's order).
    node_address_type: str
    floating_network_id: str
    floating_subnet: FloatingSubnet
    keep_floatingip: bool
    load_balancer_ip: str
    connection_limit: int
    lb_method: str
    lb_provider: str
    proxy: str
    # The X-Forwarded annotations set to "true" (`x-forwarded-for`, `-port`, `-proto`), in
    # `a.FORWARDED_HEADERS` order: each inserts its header, and any makes the listener HTTP.
    forwarded: tuple[str, ...]
    timeouts: dict[str, int] | None
    # The Service's source ranges (allow-all when it has none); enforced by the listeners'
    # `allowed_cidrs` where Octavia has them, else by security-group rules with ovn.
    source_ranges: tuple[str, ...]
    allowed_cidrs: tuple[str, ...] | None
    flavor_id: str
    availability_zone: str
    tls_ref: str
    monitor: MonitorConfig | None
    session_persistence: bool
    hostname: str
    hostname_suffix: str
    features: OctaviaFeatures
    node_selector: Selector
    serial: bool
    cascade_delete: bool
    max_shared_lb: int
    manage_security_groups: bool
    # This cluster's id (`--cluster-id`), "" when none is known: ownership by name alone.
    cluster_id: str = ""
    # A dual-stack Service on one load balancer (Octavia 2.26 `additional_vips`): the
    # other family's version, VIP subnet and member subnet (0 / "": single family).
    extra_version: int = 0
    extra_vip_subnet_id: str = ""
    extra_member_subnet_id: str = ""
    # The load balancer of a dual-stack Service's second family (named with `_ipv<v>`).
    secondary: bool = False
    # The user's tags (`load-balancer-tags`, `listener-tags`, `pool-tags`), added beside
    # pyccm's own; () below Octavia 2.5.
    lb_tags: tuple[str, ...] = ()
    listener_tags: tuple[str, ...] = ()
    pool_tags: tuple[str, ...] = ()

    @property
    def owner_tag(self) -> str:
        """The tag that marks a resource as this cluster's ("" without a cluster id)."""
        return naming.owner_tag(self.cluster_id) if self.cluster_id else ""

    @property
    def versions(self) -> tuple[int, ...]:
        """The IP families this load balancer serves, its VIP's first."""
        return (self.ip_version, self.extra_version) if self.extra_version else (self.ip_version,)

    def source_ranges_unenforced(self) -> bool:
        """Restricting source ranges that nothing here could enforce."""
        allow_all = tuple(ALLOW_ALL[v] for v in self.versions)
        if self.source_ranges == allow_all or self.allowed_cidrs is not None:
            return False
        return not (self.lb_provider == "ovn" and self.manage_security_groups)

    def listener_protocol(self, port: ServicePort) -> str:
        """Upstream's mapping: a TLS ref terminates HTTPS, X-Forwarded-For needs HTTP."""
        if self.tls_ref:
            return "TERMINATED_HTTPS"
        return "HTTP" if self.forwarded else port.protocol

    def pool_protocol(self, listener_protocol: str) -> str:
        if self.proxy:
            return self.proxy
        return "HTTP" if self.forwarded or self.tls_ref else listener_protocol

    def refusal(self, service: Service) -> str:
        """Why an ensure must not touch the cloud at all, or "" when it may. An input that
        pyccm cannot serve as asked is an error, never a reason to build something else."""
        if self.bad_lb_id:
            return (
                f"annotation {a.LOAD_BALANCER_ID}={self.bad_lb_id[:64]!r} is not a load balancer id"
            )
        if self.source_ranges_unenforced():
            # Upstream warns and creates the load balancer open to every address; a Service
            # that asked for source ranges must not get a less secure load balancer.
            ovn = " (with ovn, set manage-security-groups)" if self.lb_provider == "ovn" else ""
            return (
                f"{service.key} restricts its source ranges: enforcing them "
                f"{self.features.lacking('vip_acl')}{ovn}"
            )
        for port in service.spec.ports:
            if why := self._port_refusal(service, port):
                return why
        return ""

    def _port_refusal(self, service: Service, port: ServicePort) -> str:
        """Upstream passes an SCTP port to any Octavia (below 2.23 the create fails with a
        400) and turns a UDP or SCTP port into an HTTP, HTTPS or PROXY listener or pool
        when asked to (Octavia refuses the pool, or serves the port over TCP)."""
        where = f"{port.protocol} port {port.port}"
        if port.protocol == "SCTP" and not self.features.sctp:
            return f"{where} {self.features.lacking('sctp')}"
        listener = self.listener_protocol(port)
        pool = self.pool_protocol(listener)
        if port.protocol == "TCP" or listener == pool == port.protocol:
            return ""
        tls = a.DEFAULT_TLS_CONTAINER_REF
        if not service.metadata.annotations.get(tls):
            tls = "[LoadBalancer] default-tls-container-ref"
        causes = (
            (tls, self.tls_ref),
            *((key, True) for key in self.forwarded),
            (a.PROXY_PROTOCOL, self.proxy),
        )
        named = " and ".join(name for name, on in causes if on)
        return (
            f"{named} cannot apply to {where}: its listener would be {listener} and its pool "
            f"{pool}; Octavia serves {port.protocol} only with {port.protocol} listeners and pools"
        )


def _lb_class(settings: LoadBalancerSettings, ann: a.Annotations) -> LoadBalancerClass:
    name = ann.string(a.CLASS)
    if not name:
        return LoadBalancerClass(monitor_kube_proxy=settings.monitor_kube_proxy)
    found = settings.classes.get(name)
    if found is None:
        # Upstream refuses too: guessing the networks could expose an internal Service.
        raise CloudError(f"unknown [LoadBalancerClass {name!r}] in {a.CLASS}", retryable=False)
    return found


def _first(*values: str) -> str:
    return next((v for v in values if v), "")


def _vip_network_and_subnet(
    networks: tuple[str, str, str], subnets: tuple[str, str, str]
) -> tuple[str, str]:
    """The VIP network and subnet, each from its most specific source (annotation, then
    `[LoadBalancerClass]`, then `[LoadBalancer]`). A network asked for more specifically than
    the subnet comes alone, and Octavia picks a subnet of it: the broader subnet (say
    `cloud.conf`'s `subnet-id`, on the nodes' network) would not be on that network, and
    Octavia refuses a subnet that is not on `vip_network_id` (upstream sends both, and fails)."""
    network_level = next((i for i, v in enumerate(networks) if v), len(networks))
    subnet_level = next((i for i, v in enumerate(subnets) if v), len(subnets))
    network, subnet = _first(*networks), _first(*subnets)
    if network and subnet_level > network_level:
        subnet = ""
    return network, subnet


def _ip_version(service: Service) -> int:
    families = service.spec.ip_families
    return 6 if families and families[0] == "IPv6" else 4


def _source_ranges(
    service: Service, events: a.Events, ann: a.Annotations, version: int
) -> tuple[str, ...]:
    """Spec field, else the annotation, else allow-all. Upstream fails the sync on an
    invalid CIDR; here it is dropped with a Warning (all invalid: allow-all, the default)."""
    where = "spec.loadBalancerSourceRanges"
    raw = list(service.spec.load_balancer_source_ranges)
    if not raw:
        where = a.SOURCE_RANGES
        raw = [part.strip() for part in ann.string(a.SOURCE_RANGES).split(",") if part.strip()]
    valid: list[str] = []
    for cidr in raw:
        try:
            valid.append(str(ipaddress.ip_network(cidr.strip(), strict=False)))
        except ValueError:
            events.warn(
                "LoadBalancerSourceRangesInvalid", f"{where}: {cidr!r} is not a CIDR; dropped"
            )
    return tuple(valid) or (ALLOW_ALL[version],)


def _proxy_and_forwarded(ann: a.Annotations) -> tuple[str, tuple[str, ...]]:
    """The PROXY protocol and the X-Forwarded annotations that are on; PROXY wins (a
    header is inserted into HTTP, which a PROXY pool does not speak)."""
    raw = ann.string(a.PROXY_PROTOCOL, "false")
    proxy = PROXY_VALUES.get(raw)
    if proxy is None:
        ann.invalid(a.PROXY_PROTOCOL, raw, "is not true, v1, v2 or false", "false")
        proxy = ""
    forwarded = tuple(key for key in a.FORWARDED_HEADERS if ann.boolean(key, False))
    if proxy:
        for key in forwarded:
            ann.invalid(key, "true", "cannot be combined with PROXY protocol", False)
        forwarded = ()
    return proxy, forwarded


def _node_address_type(ann: a.Annotations) -> str:
    kind = ann.string(a.NODE_ADDRESS_TYPE)
    if kind and kind not in ADDRESS_TYPES:
        ann.invalid(a.NODE_ADDRESS_TYPE, kind, "is not InternalIP or ExternalIP", "")
        return ""
    return kind


def _lb_method(settings: LoadBalancerSettings, ann: a.Annotations) -> str:
    method = ann.string(a.LB_METHOD, settings.lb_method)
    if method not in ALGORITHMS:
        ann.invalid(a.LB_METHOD, method, "is not an Octavia algorithm", settings.lb_method)
        return settings.lb_method
    return method


def _timeouts(ann: a.Annotations, features: OctaviaFeatures) -> dict[str, int] | None:
    if not features.timeouts:
        return None
    return {
        "timeout_client_data": ann.integer(a.TIMEOUT_CLIENT_DATA, 50000),
        "timeout_member_connect": ann.integer(a.TIMEOUT_MEMBER_CONNECT, 5000),
        "timeout_member_data": ann.integer(a.TIMEOUT_MEMBER_DATA, 50000),
        "timeout_tcp_inspect": ann.integer(a.TIMEOUT_TCP_INSPECT, 0),
    }


def _flavor(ann: a.Annotations, default: str, features: OctaviaFeatures, events: a.Events) -> str:
    """The annotation, else the class's, else `[LoadBalancer]`'s (`default`)."""
    flavor = ann.string(a.FLAVOR_ID, default)
    if flavor and not features.flavors:
        events.warn(
            "LoadBalancerFlavorIgnored",
            f"flavor {flavor!r} ignored: it {features.lacking('flavors')}",
        )
        return ""
    return flavor


UserTags = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
TAG_ANNOTATIONS = (a.LOAD_BALANCER_TAGS, a.LISTENER_TAGS, a.POOL_TAGS)


def _user_tags(ann: a.Annotations, features: OctaviaFeatures, events: a.Events) -> UserTags:
    """The load balancer's, listeners' and pools' user tags; none below Octavia 2.5."""
    lb, listener, pool = (ann.tags(key) for key in TAG_ANNOTATIONS)
    if (lb or listener or pool) and not features.tags:
        given = zip(TAG_ANNOTATIONS, (lb, listener, pool), strict=True)
        named = ", ".join(key for key, tags in given if tags)
        events.warn("LoadBalancerTagsIgnored", f"{named} ignored: it {features.lacking('tags')}")
        return (), (), ()
    return lb, listener, pool


def _monitor(
    service: Service,
    settings: LoadBalancerSettings,
    ann: a.Annotations,
    features: OctaviaFeatures,
    events: a.Events,
    *,
    monitor_kube_proxy: bool,
) -> MonitorConfig | None:
    """`monitor_kube_proxy`: the class's (else `[LoadBalancer]`'s)."""
    spec = service.spec
    local = spec.external_traffic_policy == "Local" and spec.health_check_node_port > 0
    # Upstream creates a monitor only when asked to (the annotation, else `create-monitor`,
    # false by default), so an ETP Local load balancer keeps sending traffic to nodes
    # without an endpoint of the Service, which drop it
    # (kubernetes/cloud-provider-openstack#2866). Here such a Service gets one unless its own
    # annotation says "false": `create-monitor` is a default for every Service, not a choice
    # about this one.
    if not ann.boolean(a.ENABLE_HEALTH_MONITOR, settings.create_monitor or local):
        if local:
            # Only the annotation "false" gets here (with `local`, anything else is on).
            events.warn(
                a.NO_HEALTH_MONITOR,
                f"annotation {a.ENABLE_HEALTH_MONITOR}=false on a Service with "
                "externalTrafficPolicy Local: without a health monitor, traffic will reach "
                "nodes without local endpoints, which drop it",
            )
        return None
    delay = ann.integer(a.HEALTH_MONITOR_DELAY, settings.monitor_delay, minimum=1)
    timeout = ann.integer(a.HEALTH_MONITOR_TIMEOUT, settings.monitor_timeout, minimum=1)
    if timeout > delay:
        # Octavia refuses it (400) and the Service would never get its load balancer.
        ann.invalid(a.HEALTH_MONITOR_TIMEOUT, str(timeout), f"exceeds the delay {delay}", delay)
        timeout = delay
    monitor = MonitorConfig(
        delay=delay,
        timeout=timeout,
        max_retries=ann.integer(
            a.HEALTH_MONITOR_MAX_RETRIES, settings.monitor_max_retries, minimum=1
        ),
        max_retries_down=ann.integer(
            a.HEALTH_MONITOR_MAX_RETRIES_DOWN, settings.monitor_max_retries_down, minimum=1
        ),
    )
    # An HTTP monitor of another port: not with ovn (no HTTP monitors, and its driver
    # refuses members' monitor_port), nor on a UDP pool below Octavia 2.16.
    why_not = ""
    if not features.member_monitor_port:
        why_not = features.lacking("member_monitor_port")
    elif any(p.protocol == "UDP" for p in spec.ports) and not features.http_monitors_on_udp:
        why_not = features.lacking("http_monitors_on_udp")
    if local:
        return monitor if why_not else replace(monitor, http_port=spec.health_check_node_port)
    asked = service.metadata.annotations.get(a.HEALTH_MONITOR_KUBE_PROXY) == "true"
    if not ann.boolean(a.HEALTH_MONITOR_KUBE_PROXY, monitor_kube_proxy):
        return monitor
    if why_not:
        if asked:
            events.warn(
                a.KUBE_PROXY_MONITOR_UNAVAILABLE,
                f"annotation {a.HEALTH_MONITOR_KUBE_PROXY}=true ignored: a monitor of "
                f"kube-proxy's port {why_not}; the monitors check the Service's ports",
            )
        return monitor
    return replace(monitor, http_port=KUBE_PROXY_PORT, kube_proxy=True, yields=not asked)


def _floating_subnet(
    lb_class: LoadBalancerClass, settings: LoadBalancerSettings, ann: a.Annotations
) -> FloatingSubnet:
    for source in (
        FloatingSubnet(
            subnet_id=lb_class.floating_subnet_id,
            name_pattern=lb_class.floating_subnet,
            tags=lb_class.floating_subnet_tags,
        ),
        FloatingSubnet(
            subnet_id=ann.string(a.FLOATING_SUBNET_ID),
            name_pattern=ann.string(a.FLOATING_SUBNET),
            tags=ann.string(a.FLOATING_SUBNET_TAGS),
        ),
    ):
        if source.subnet_id or source.is_matcher:
            return source
    return FloatingSubnet(
        subnet_id=settings.floating_subnet_id,
        name_pattern=settings.floating_subnet,
        tags=settings.floating_subnet_tags,
    )


class Resolver:
    """Builds `ServiceConfig`s; owns the (cached) autodetections that need the cloud."""

    def __init__(
        self,
        *,
        api: Api,
        settings: LiveSettings,
        features: CloudFeatures,
        cluster: str,
        cluster_id: str = "",
    ) -> None:
        self._api = api
        self._live = settings
        self._features = features
        self._cluster = cluster
        self._cluster_id = cluster_id
        self._lock = threading.Lock()
        self._floating_network: str | None = None

    @property
    def _settings(self) -> LoadBalancerSettings:
        """`[LoadBalancer]` in force now: a reload of `cloud.conf` applies from the next
        sync (each resolve reads it once)."""
        return self._live.current.load_balancer

    def resolve(
        self, service: Service, nodes: Sequence[Node], events: a.Events, *, lookups: bool = True
    ) -> ServiceConfig:
        """`lookups=False` skips every cloud call (for delete and get, which need no subnets)."""
        settings = self._settings
        ann = a.Annotations(service.metadata.annotations, events)
        lb_class = _lb_class(settings, ann)
        # The class's Octavia provider, else `[LoadBalancer]`'s: the feature gates follow it.
        provider = lb_class.lb_provider or settings.lb_provider
        features = self._features.octavia(lb_provider=provider)
        version = _ip_version(service)
        internal = settings.internal_lb or ann.boolean(a.INTERNAL, False)
        networks = (ann.string(a.NETWORK_ID), lb_class.network_id, settings.network_id)
        subnets = (ann.string(a.SUBNET_ID), lb_class.subnet_id, settings.subnet_id)
        vip_network, vip_subnet = _vip_network_and_subnet(networks, subnets)
        member_subnet = _first(settings.subnet_id, vip_subnet)
        if lookups and not vip_network and not vip_subnet:
            vip_subnet = member_subnet = self._subnet_of_first_node(nodes, version)
        chosen = (
            ann.string(a.MEMBER_SUBNET_ID),
            lb_class.member_subnet_id,
            settings.member_subnet_id,
        )
        member_subnet = _first(*chosen, member_subnet)
        proxy, forwarded = _proxy_and_forwarded(ann)
        lb_tags, listener_tags, pool_tags = _user_tags(ann, features, events)
        lb_id = ann.matching(a.LOAD_BALANCER_ID, a.UUID, "is not a load balancer id")
        ranges = _source_ranges(service, events, ann, version)
        floating_network = ""
        # A dual-stack Service with IPv6 first still has an IPv4 load balancer to expose.
        dual = service.spec.ip_family_policy in ("PreferDualStack", "RequireDualStack")
        if not internal and (version == 4 or (dual and "IPv4" in service.spec.ip_families)):
            floating_network = _first(
                lb_class.floating_network_id,
                ann.string(a.FLOATING_NETWORK_ID),
                settings.floating_network_id,
            )
            if not floating_network and lookups:
                floating_network = self._autodetect_floating_network(events)
        return ServiceConfig(
            name=naming.lb_name(service, cluster=self._cluster),
            legacy_name=naming.legacy_lb_name(service),
            description=naming.lb_description(service, cluster=self._cluster),
            fip_description=naming.fip_description(service, cluster=self._cluster),
            cluster=self._cluster,
            ip_version=version,
            internal=internal,
            lb_id=lb_id,
            bad_lb_id="" if lb_id else ann.string(a.LOAD_BALANCER_ID),
            vip_subnet_id=vip_subnet,
            vip_network_id=vip_network,
            vip_port_id=ann.string(a.PORT_ID),
            member_subnet_id=member_subnet,
            member_subnet_chosen=any(chosen),
            node_address_type=_node_address_type(ann),
            floating_network_id=floating_network,
            floating_subnet=_floating_subnet(lb_class, settings, ann),
            keep_floatingip=ann.boolean(a.KEEP_FLOATINGIP, False),
            load_balancer_ip=service.spec.load_balancer_ip,
            connection_limit=ann.integer(a.CONNECTION_LIMIT, -1, minimum=-1),
            lb_method=_lb_method(settings, ann),
            lb_provider=provider,
            proxy=proxy,
            forwarded=forwarded,
            timeouts=_timeouts(ann, features),
            source_ranges=ranges,
            allowed_cidrs=ranges if features.vip_acl else None,
            flavor_id=_flavor(ann, lb_class.flavor_id or settings.flavor_id, features, events),
            availability_zone=self._zone(ann, lb_class, features, events),
            tls_ref=ann.string(a.DEFAULT_TLS_CONTAINER_REF, settings.default_tls_container_ref),
            monitor=_monitor(
                service,
                settings,
                ann,
                features,
                events,
                monitor_kube_proxy=lb_class.monitor_kube_proxy,
            ),
            session_persistence=service.spec.session_affinity == "ClientIP",
            hostname=ann.matching(a.HOSTNAME, a.DNS_SUBDOMAIN, "is not a DNS name (RFC 1123)"),
            hostname_suffix=(
                settings.ingress_hostname_suffix if settings.enable_ingress_hostname else ""
            ),
            features=features,
            node_selector=self.node_selector(service, events),
            serial=settings.provider_requires_serial_api_calls,
            cascade_delete=settings.cascade_delete,
            max_shared_lb=settings.max_shared_lb,
            manage_security_groups=settings.manage_security_groups,
            cluster_id=self._cluster_id,
            lb_tags=lb_tags,
            listener_tags=listener_tags,
            pool_tags=pool_tags,
        )

    def resolve_features(self) -> OctaviaFeatures:
        """The Octavia feature gates of the configured provider (no per-Service input)."""
        return self._features.octavia(lb_provider=self._settings.lb_provider)

    def node_selector(self, service: Service, events: a.Events) -> Selector:
        """The annotation, else `[LoadBalancer] node-selector`; no cloud call."""
        ann = a.Annotations(service.metadata.annotations, events)
        return parse_selector(
            ann.matching(
                a.NODE_SELECTOR,
                a.NODE_SELECTOR_FORMAT,
                "is not a list of label=value selectors",
                default=self._settings.node_selector,
            )
        )

    def _zone(
        self,
        ann: a.Annotations,
        lb_class: LoadBalancerClass,
        features: OctaviaFeatures,
        events: a.Events,
    ) -> str:
        """The annotation, else the class's, else `[LoadBalancer]`'s."""
        zone = ann.matching(
            a.AVAILABILITY_ZONE,
            a.ZONE_NAME,
            "is not an availability zone name (1 to 255 printable characters)",
            default=lb_class.availability_zone or self._settings.availability_zone,
        )
        if zone and not features.availability_zones:
            events.warn(
                "LoadBalancerAvailabilityZonesIgnored",
                f"availability zone {zone!r} ignored: it {features.lacking('availability_zones')}",
            )
            return ""
        return zone

    def _subnet_of_first_node(self, nodes: Sequence[Node], version: int) -> str:
        """Upstream's autodetection: the subnet of the first node's address, from its port."""
        choice = MemberChoice(version)
        node = next((n for n in nodes if member_address(n, choice)), None)
        if node is None:
            raise CloudError("no node address to find the load balancer's subnet from")
        try:
            _, server_id = parse_provider_id(node.spec.provider_id)
        except InvalidProviderId as exc:
            raise CloudError(
                f"set [LoadBalancer] subnet-id: node {node.name} has no usable providerID"
            ) from exc
        address = member_address(node, choice)
        for port in self._api.ports({"device_id": server_id}):
            for fixed in port.fixed_ips:
                if fixed.ip_address == address and fixed.subnet_id:
                    return fixed.subnet_id
        raise CloudError(f"no port of node {node.name} holds {address}: set subnet-id")

    def _autodetect_floating_network(self, events: a.Events) -> str:
        """The first external network with an IPv4 subnet; cached for the process."""
        with self._lock:
            if self._floating_network is not None:
                return self._floating_network
        try:
            found = self._search_external_network()
        except CloudError as exc:
            events.warn(
                "LoadBalancerExternalNetworkSearchFailed",
                f"failed to find an external network: {exc}",
            )
            return ""
        if found:
            with self._lock:
                self._floating_network = found
        return found

    def _search_external_network(self) -> str:
        for network in self._api.find(NETWORKS, {"router:external": "true"}):
            subnets = self._api.find(SUBNETS, {"network_id": network.id})
            # A network whose subnets the project cannot see still counts (upstream).
            if not subnets or any(s.ip_version == 4 for s in subnets):
                return network.id
        return ""


def eligible_nodes(cfg: ServiceConfig, nodes: Sequence[Node]) -> list[Node]:
    return [n for n in nodes if node_matches(n, cfg.node_selector)]
