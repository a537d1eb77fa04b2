"""Taking over from upstream's openstack-cloud-controller-manager (v1.36) and handing back,
on the OpenStack simulator (docs/migration.md).

`what_upstream_left` builds, with openstacksdk alone, the cloud a Go controller leaves for a
cluster: load balancers named `kube_service_<cluster>_<ns>_<name>` from one fully populated
create (listeners `listener_<i>_…` tagged with the load balancer's name, upstream's four
listener timeouts and `allowed_cidrs`, pools `pool_<i>_…`, members named after their node,
monitors `monitor_<i>_…`), a Service sharing a load balancer through `load-balancer-id`
(its own listener, pool and members, its name in the load balancer's tags), floating IPs
with upstream's description on the VIP ports, and `lb-sg-<uid>-<ns>-<name>` security groups
holding only upstream's ingress rules (upstream deletes Neutron's default egress rules, which
it does not want) attached to the nodes' ports. The same helper builds it on the real
services (tests/conformance/test_takeover_from_upstream_on_real_openstack.py).

pyccm's provider is then run on it, and the tests assert: nothing deleted or recreated, the
only writes its ownership tags; and what pyccm leaves is still found and accepted by upstream's
own predicates (`upstream_would_adopt`): name lookup, listener key and tags, pool per listener,
the member set key, monitor fields, floating-IP description, security-group rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec
import pytest

from pyccm.protocol.views import (
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    Service,
    ServiceStatus,
)
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import (
    MakeLbs,
    converge,
    ensure,
    nodes,
    service,
    vip_subnet,
    with_annotations,
    with_status,
)
from tests.support.lb import _shape as shape
from tests.support.waiting import wait_for

CLUSTER = "kubernetes"
CLUSTER_ID = "33333333-3333-4333-8333-333333333333"
LB_ID = "loadbalancer.openstack.org/load-balancer-id"
FINALIZER = "service.kubernetes.io/load-balancer-cleanup"
LB_ADDRESS = "loadbalancer.openstack.org/load-balancer-address"
MONITOR = "loadbalancer.openstack.org/enable-health-monitor"
INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
PROXY = "loadbalancer.openstack.org/proxy-protocol"
CONNECTION_LIMIT = "loadbalancer.openstack.org/connection-limit"
LB_METHOD = "loadbalancer.openstack.org/lb-method"
FIP_MARK = "Floating IP for Kubernetes external service"
SG_CONF = "[LoadBalancer]\nmanage-security-groups = true"
# upstream's defaults (docs/reference/cloud-conf.md, docs/upstream.md#octavia-objects): listener
# timeouts in ms, monitor numbers.
TIMEOUTS = {
    "timeout_client_data": 50000,
    "timeout_member_connect": 5000,
    "timeout_member_data": 50000,
    "timeout_tcp_inspect": 0,
}
MONITOR_BODY = {"delay": 5, "timeout": 3, "max_retries": 1, "max_retries_down": 3}
XFF = "loadbalancer.openstack.org/x-forwarded-for"


# --- what upstream left --------------------------------------------------------------------------


@dataclass(frozen=True)
class UpstreamService:
    """A `type: LoadBalancer` Service as upstream's controller served it: TCP ports as
    (port, nodePort); `shares` names the Service whose load balancer it joined."""

    namespace: str
    name: str
    uid: str
    ports: tuple[tuple[int, int], ...]
    monitor: bool = False
    shares: str = ""
    internal: bool = False
    # PROXY protocol, a connection limit, an algorithm and ClientIP affinity.
    tuned: bool = False
    protocol: str = "TCP"  # of every port
    xff: bool = False  # `x-forwarded-for`: an HTTP listener inserting the header
    source_ranges: tuple[str, ...] = ()  # spec.loadBalancerSourceRanges
    # `externalTrafficPolicy: Local` with this healthCheckNodePort (0: Cluster).
    health_check_node_port: int = 0

    def annotations(self) -> dict[str, str]:
        """The annotations its user gave it (upstream adds the id and the address)."""
        given = {MONITOR: "true"} if self.monitor else {}
        if self.internal:
            given[INTERNAL] = "true"
        if self.tuned:
            given |= {PROXY: "true", CONNECTION_LIMIT: "1000", LB_METHOD: "LEAST_CONNECTIONS"}
        if self.xff:
            given[XFF] = "true"
        return given

    @property
    def listener_protocol(self) -> str:
        return "HTTP" if self.xff else self.protocol

    @property
    def allowed_cidrs(self) -> list[str]:
        """The source ranges, 0.0.0.0/0 by default, which upstream sends as an ACL."""
        return list(self.source_ranges) or ["0.0.0.0/0"]

    @property
    def http_monitor(self) -> bool:
        """An HTTP monitor on the healthCheckNodePort: asked for, Local, TCP (Octavia 2.16
        allows UDP pools too; not used here)."""
        return self.monitor and bool(self.health_check_node_port) and self.protocol == "TCP"

    @property
    def monitor_port(self) -> int:
        """The members' `monitor_port`, 0 for none (svcConf.healthCheckNodePort)."""
        return self.health_check_node_port if self.http_monitor else 0

    @property
    def monitor_fields(self) -> dict[str, Any]:
        if self.http_monitor:
            return {
                "type": "HTTP",
                "url_path": "/healthz",
                "http_method": "GET",
                "expected_codes": "200",
            }
        return {"type": "UDP-CONNECT" if self.protocol == "UDP" else self.protocol}

    @property
    def monitor_type(self) -> str:
        return str(self.monitor_fields["type"])

    @property
    def affinity(self) -> str:
        return "ClientIP" if self.tuned else "None"

    @property
    def connection_limit(self) -> int:
        return 1000 if self.tuned else -1

    @property
    def pool(self) -> dict[str, Any]:
        """The pool fields upstream sends (buildPoolCreateOpt), without its name."""
        if not self.tuned:
            return {"protocol": self.listener_protocol, "lb_algorithm": "ROUND_ROBIN"}
        return {
            "protocol": "PROXY",
            "lb_algorithm": "LEAST_CONNECTIONS",
            "session_persistence": {"type": "SOURCE_IP"},
        }

    @property
    def ip_mode(self) -> str:
        """Upstream's: Proxy for PROXY protocol only."""
        return "Proxy" if self.tuned else "VIP"

    @property
    def pyccm_ip_mode(self) -> str:
        """pyccm's: Proxy also where an HTTP listener inserts X-Forwarded-For (the one
        status write of a takeover, docs/migration.md)."""
        return "Proxy" if self.tuned or self.xff else "VIP"


@dataclass(frozen=True)
class UpstreamNode:
    name: str
    address: str
    server_id: str


@dataclass
class Left:
    """Ids of what `what_upstream_left` built, and what upstream wrote on each Service."""

    lb_of: dict[str, str] = field(default_factory=dict)  # Service name -> load balancer id
    address_of: dict[str, str] = field(default_factory=dict)  # Service name -> floating IP
    sg_of: dict[str, str] = field(default_factory=dict)  # Service name -> security group id

    def annotations(self, name: str) -> dict[str, str]:
        return {LB_ID: self.lb_of[name], LB_ADDRESS: self.address_of[name]}

    def ingress(self, svc: UpstreamService) -> list[dict[str, str]]:
        return [{"ip": self.address_of[svc.name], "ipMode": svc.ip_mode}]


def upstream_lb_name(cluster: str, svc: UpstreamService) -> str:
    return f"kube_service_{cluster}_{svc.namespace}_{svc.name}"[:255]


def _request(proxy: Any, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
    from openstack import exceptions

    answer = proxy.request(path, method, json=body)
    exceptions.raise_from_response(answer)
    return answer.json() if answer.content else None


def _wait_active(octavia: Any, lb_id: str, timeout: float) -> None:
    """upstream polls after every Octavia write until the load balancer is ACTIVE again."""
    wait_for(
        lambda: octavia.get_load_balancer(lb_id).provisioning_status == "ACTIVE",
        timeout=timeout,
        what=f"load balancer {lb_id} ACTIVE",
    )


def _listener_body(
    svc: UpstreamService, name: str, index: int, port: int, *, vip_acl: bool
) -> dict[str, Any]:  # buildListenerCreateOpt
    body: dict[str, Any] = {
        "name": f"listener_{index}_{name}",
        "protocol": svc.listener_protocol,
        "protocol_port": port,
        "connection_limit": svc.connection_limit,
        "tags": [name],
        **TIMEOUTS,
    }
    if svc.xff:
        body["insert_headers"] = {"X-Forwarded-For": "true"}
    if vip_acl:
        body["allowed_cidrs"] = svc.allowed_cidrs
    return body


def _members(
    svc: UpstreamService, node_list: Sequence[UpstreamNode], node_port: int, subnet_id: str
) -> list[Any]:
    """buildBatchUpdateMemberOpts: one member per node, named after it."""
    extra = {"monitor_port": svc.monitor_port} if svc.monitor_port else {}
    return [
        {
            "address": n.address,
            "protocol_port": node_port,
            "name": n.name,
            "subnet_id": subnet_id,
            **extra,
        }
        for n in node_list
    ]


def what_upstream_left(
    conn: Any,
    *,
    cluster: str,
    services: Sequence[UpstreamService],
    node_list: Sequence[UpstreamNode],
    subnet_id: str,
    floating_network_id: str,
    security_groups: bool,
    vip_acl: bool = True,
    timeout: float = 120.0,
) -> Left:
    """The cloud state openstack-cloud-controller-manager v1.36 leaves for `services`, built
    call by call as its EnsureLoadBalancer makes it (`cloud.conf`: `subnet-id`,
    `floating-network-id`, `manage-security-groups` as given, Octavia tags and VIP ACLs)."""
    octavia, neutron = conn.load_balancer, conn.network
    left = Left()
    cidr = neutron.get_subnet(subnet_id).cidr
    for svc in services:
        name = upstream_lb_name(cluster, svc)
        if not svc.shares:  # one fully populated create
            listeners = []
            for index, (port, node_port) in enumerate(svc.ports):
                pool: dict[str, Any] = {
                    "name": f"pool_{index}_{name}",
                    **svc.pool,
                    "members": _members(svc, node_list, node_port, subnet_id),
                }
                if svc.monitor:
                    pool["healthmonitor"] = {
                        "name": f"monitor_{index}_{name}",
                        **svc.monitor_fields,
                        **MONITOR_BODY,
                    }
                listener = _listener_body(svc, name, index, port, vip_acl=vip_acl)
                listeners.append({**listener, "default_pool": pool})
            created = _request(
                octavia,
                "POST",
                "/lbaas/loadbalancers",
                {
                    "loadbalancer": {
                        "name": name,
                        "description": f"Kubernetes external service {svc.namespace}/{svc.name}"
                        f" from cluster {cluster}",
                        "provider": "amphora",
                        "tags": [name],
                        "vip_subnet_id": subnet_id,
                        "listeners": listeners,
                    }
                },
            )["loadbalancer"]
            lb_id = created["id"]
            _wait_active(octavia, lb_id, timeout)
            lb = octavia.get_load_balancer(lb_id)
            left.lb_of[svc.name] = lb_id
            left.address_of[svc.name] = lb.vip_address
            if not svc.internal:
                fip = neutron.create_ip(
                    floating_network_id=floating_network_id,
                    port_id=lb.vip_port_id,
                    description=f"{FIP_MARK} {svc.namespace}/{svc.name} from cluster {cluster}",
                )
                left.address_of[svc.name] = fip.floating_ip_address
        else:  # a listener, its pool and members added to the owner's, then the LB's tags
            lb_id = left.lb_of[svc.shares]
            for index, (port, node_port) in enumerate(svc.ports):
                body = {
                    **_listener_body(svc, name, index, port, vip_acl=vip_acl),
                    "loadbalancer_id": lb_id,
                }
                listener = _request(octavia, "POST", "/lbaas/listeners", {"listener": body})
                _wait_active(octavia, lb_id, timeout)
                pool_body = {
                    "name": f"pool_{index}_{name}",
                    **svc.pool,
                    "listener_id": listener["listener"]["id"],
                }
                pool = _request(octavia, "POST", "/lbaas/pools", {"pool": pool_body})["pool"]
                _wait_active(octavia, lb_id, timeout)
                members = {"members": _members(svc, node_list, node_port, subnet_id)}
                _request(octavia, "PUT", f"/lbaas/pools/{pool['id']}/members", members)
                _wait_active(octavia, lb_id, timeout)
            tags = list(octavia.get_load_balancer(lb_id).tags or [])
            _request(
                octavia,
                "PUT",
                f"/lbaas/loadbalancers/{lb_id}",
                {"loadbalancer": {"tags": [*tags, name]}},
            )
            _wait_active(octavia, lb_id, timeout)
            left.lb_of[svc.name] = lb_id
            left.address_of[svc.name] = left.address_of[svc.shares]
        if security_groups:
            left.sg_of[svc.name] = _security_group(
                neutron, cluster, svc, node_list, subnet_id, cidr
            )
    return left


def _security_group(  # noqa: PLR0917
    neutron: Any,
    cluster: str,
    svc: UpstreamService,
    node_list: Sequence[UpstreamNode],
    subnet_id: str,
    cidr: str,
) -> str:
    """ensureAndUpdateOctaviaSecurityGroup: the group, exactly the wanted ingress rules (the
    default egress rules do not match any and are deleted), the group on each node's port
    that holds its member address."""
    group = neutron.create_security_group(
        name=f"lb-sg-{svc.uid}-{svc.namespace}-{svc.name}"[:255],
        description=f"Security Group for {svc.namespace}/{svc.name} Service LoadBalancer "
        f"in cluster {cluster}",
    )
    for rule in list(neutron.security_group_rules(security_group_id=group.id)):
        neutron.delete_security_group_rule(rule)
    wanted = [(svc.protocol.lower(), node_port) for _, node_port in svc.ports]
    if svc.health_check_node_port:
        wanted.insert(0, ("tcp", svc.health_check_node_port))
    for protocol, node_port in wanted:
        neutron.create_security_group_rule(
            security_group_id=group.id,
            direction="ingress",
            protocol=protocol,
            ethertype="IPv4",
            remote_ip_prefix=cidr,
            port_range_min=node_port,
            port_range_max=node_port,
        )
    for node in node_list:
        for port in neutron.ports(device_id=node.server_id):
            held = any(
                ip["ip_address"] == node.address and ip["subnet_id"] == subnet_id
                for ip in port.fixed_ips
            )
            if port.is_port_security_enabled and held and group.id not in port.security_group_ids:
                neutron.update_port(port, security_groups=[*port.security_group_ids, group.id])
    return str(group.id)


# --- what upstream's code would find and accept ------------------------------------------------


def upstream_would_adopt(
    conn: Any,
    *,
    cluster: str,
    services: Sequence[UpstreamService],
    node_list: Sequence[UpstreamNode],
    subnet_id: str,
    security_groups: bool,
) -> list[str]:
    """What upstream's EnsureLoadBalancer would change on this cloud, by the predicates its
    code uses (docs/upstream.md#octavia-objects and the two sections after it,
    docs/upstream.md#security-groups); [] = it takes the Services back without a write. Each entry
    names the object and the predicate that fails."""
    octavia, neutron = conn.load_balancer, conn.network
    problems: list[str] = []
    cidr = neutron.get_subnet(subnet_id).cidr
    by_name = {s.name: s for s in services}
    for svc in services:
        name = upstream_lb_name(cluster, svc)
        owner = by_name[svc.shares] if svc.shares else svc
        owner_name = upstream_lb_name(cluster, owner)
        # getLoadBalancerByName: exactly one, not DELETED / PENDING_DELETE.
        found = [
            lb
            for lb in octavia.load_balancers(name=owner_name)
            if lb.provisioning_status not in ("DELETED", "PENDING_DELETE")
        ]
        if len(found) != 1:
            problems.append(f"{svc.name}: {len(found)} load balancers named {owner_name}")
            continue
        lb = found[0]
        if name not in (lb.tags or []):  # else upstream PUTs the LB's tags
            problems.append(f"{svc.name}: load balancer tags {lb.tags} lack {name}")
        listeners = [
            li for li in octavia.listeners() if any(r["id"] == lb.id for r in li.load_balancers)
        ]
        pools = [p for p in octavia.pools() if any(r["id"] == lb.id for r in p.loadbalancers)]
        for index, (port, node_port) in enumerate(svc.ports):
            key = (svc.listener_protocol, port)
            keyed = [li for li in listeners if (li.protocol, li.protocol_port) == key]
            if len(keyed) != 1:
                problems.append(f"{svc.name}: {len(keyed)} TCP listeners on {port}")
                continue
            problems += _port_problems(
                octavia,
                svc,
                index,
                keyed[0],
                pools,
                name=name,
                node_port=node_port,
                node_list=node_list,
            )
        # Leftover listeners upstream deletes: tagged with this Service's name, or untagged
        # on the owner's load balancer, and on no port of the Service.
        wanted = {(svc.listener_protocol, port) for port, _ in svc.ports}
        for li in listeners:
            ours = name in (li.tags or []) or (not svc.shares and not li.tags)
            if ours and (li.protocol, li.protocol_port) not in wanted:
                problems.append(f"{svc.name}: leftover listener {li.name} would be deleted")
        fips = list(neutron.ips(port_id=lb.vip_port_id))
        if svc.internal and fips:
            problems.append(f"{svc.name}: internal with floating IPs {fips}")
        external = not svc.shares and not svc.internal
        if external and (len(fips) != 1 or FIP_MARK not in (fips[0].description or "")):
            problems.append(f"{svc.name}: floating IPs {[f.description for f in fips]}")
        if security_groups:
            problems += _group_problems(neutron, svc, node_list, cidr)
    return problems


def _port_problems(
    octavia: Any,
    svc: UpstreamService,
    index: int,
    listener: Any,
    pools: Sequence[Any],
    *,
    name: str,
    node_port: int,
    node_list: Sequence[UpstreamNode],
) -> list[str]:
    """Service port `index`'s listener (found by upstream's key, protocol and port), its
    pool, members and monitor."""
    problems = []
    if name not in (listener.tags or []):
        problems.append(f"{svc.name}: listener {listener.name} tags {listener.tags}")
    if listener.connection_limit != svc.connection_limit:
        problems.append(f"{svc.name}: connection_limit {listener.connection_limit}")
    problems += [
        f"{svc.name}: {key} {getattr(listener, key)}"
        for key, value in TIMEOUTS.items()
        if getattr(listener, key) != value
    ]
    if set(listener.allowed_cidrs or ()) != set(svc.allowed_cidrs):
        problems.append(f"{svc.name}: allowed_cidrs {listener.allowed_cidrs}")
    if bool((listener.insert_headers or {}).get("X-Forwarded-For")) != svc.xff:
        problems.append(f"{svc.name}: insert_headers {listener.insert_headers}")
    if listener.name != f"listener_{index}_{name}":  # upstream's name kept
        problems.append(f"{svc.name}: listener named {listener.name}")
    # getPoolByListener: the one pool whose `listeners` hold the listener.
    mine = [p for p in pools if any(r["id"] == listener.id for r in p.listeners)]
    if len(mine) != 1:
        return [*problems, f"{svc.name}: {len(mine)} pools on listener {listener.name}"]
    pool = mine[0]
    # A pool of another protocol is re-made, another algorithm updated; the name and the
    # session persistence upstream made are kept (it never compares them).
    wanted = (f"pool_{index}_{name}", svc.pool["protocol"], svc.pool["lb_algorithm"])
    if (pool.name, pool.protocol, pool.lb_algorithm) != wanted:
        problems.append(f"{svc.name}: pool {pool.name} {pool.protocol} {pool.lb_algorithm}")
    persistence = (pool.session_persistence or {}).get("type")
    if persistence != svc.pool.get("session_persistence", {}).get("type"):
        problems.append(f"{svc.name}: session persistence {pool.session_persistence}")
    # The member set key: "<name>-<address>-<protocol_port>-<monitor_port>" (0 without
    # healthCheckNodePort); any difference is one batch PUT.
    have = {
        f"{m.name}-{m.address}-{m.protocol_port}-{m.monitor_port or 0}"
        for m in octavia.members(pool.id)
    }
    want = {f"{n.name}-{n.address}-{node_port}-{svc.monitor_port}" for n in node_list}
    if have != want:
        problems.append(f"{svc.name}: members {sorted(have)} != {sorted(want)}")
    return problems + _monitor_problems(octavia, svc, index, name, pool)


def _monitor_problems(
    octavia: Any, svc: UpstreamService, index: int, name: str, pool: Any
) -> list[str]:
    if not svc.monitor:
        return (
            [f"{svc.name}: monitor on {pool.name} would be deleted"]
            if pool.health_monitor_id
            else []
        )
    if not pool.health_monitor_id:
        return [f"{svc.name}: no monitor on {pool.name}"]
    monitor = octavia.get_health_monitor(pool.health_monitor_id)
    seen = {
        "name": monitor.name,
        "type": monitor.type,
        "delay": monitor.delay,
        "timeout": monitor.timeout,
        "max_retries": monitor.max_retries,
        "max_retries_down": monitor.max_retries_down,
    }
    wanted = {"name": f"monitor_{index}_{name}", "type": svc.monitor_type, **MONITOR_BODY}
    return [] if seen == wanted else [f"{svc.name}: monitor {seen} != {wanted}"]


def _group_problems(
    neutron: Any, svc: UpstreamService, node_list: Sequence[UpstreamNode], cidr: str
) -> list[str]:
    name = f"lb-sg-{svc.uid}-{svc.namespace}-{svc.name}"[:255]
    groups = list(neutron.security_groups(name=name))
    if len(groups) != 1:
        return [f"{svc.name}: {len(groups)} groups named {name}"]
    group = groups[0]
    # compareSecurityGroupRuleAndCreateOpts: every rule not wanted is deleted, every wanted
    # one missing is created.
    have = {
        (
            r.direction,
            (r.protocol or "").lower(),
            r.ether_type,
            r.remote_ip_prefix,
            r.port_range_min,
            r.port_range_max,
        )
        for r in neutron.security_group_rules(security_group_id=group.id)
    }
    protocol = svc.protocol.lower()
    want = {("ingress", protocol, "IPv4", cidr, np, np) for _, np in svc.ports}
    if svc.health_check_node_port:
        hc = svc.health_check_node_port
        want.add(("ingress", "tcp", "IPv4", cidr, hc, hc))
    problems = [] if have == want else [f"{svc.name}: rules {sorted(have, key=str)}"]
    for node in node_list:
        ports = [
            p
            for p in neutron.ports(device_id=node.server_id)
            if any(ip["ip_address"] == node.address for ip in p.fixed_ips)
        ]
        if not all(group.id in p.security_group_ids for p in ports):
            problems.append(f"{svc.name}: group not on {node.name}'s port")
    return problems


# --- on the simulator ----------------------------------------------------------------------------

SERVICES = (
    UpstreamService("default", "web", "0000-default-web", ((80, 30080), (443, 30443))),
    UpstreamService("default", "mon", "0000-default-mon", ((8080, 31080),), monitor=True),
    UpstreamService("default", "guest", "0000-default-guest", ((9000, 31900),), shares="web"),
    UpstreamService("default", "inside", "0000-default-inside", ((5432, 31432),), internal=True),
    UpstreamService("default", "tuned", "0000-default-tuned", ((8443, 32443),), tuned=True),
    UpstreamService(
        "default", "dns", "0000-default-dns", ((53, 30053),), monitor=True, protocol="UDP"
    ),
    UpstreamService(
        "default",
        "http",
        "0000-default-http",
        ((8000, 30800),),
        xff=True,
        source_ranges=("203.0.113.0/24", "198.51.100.7/32"),
    ),
    UpstreamService(
        "default",
        "local",
        "0000-default-local",
        ((8081, 30081),),
        monitor=True,
        health_check_node_port=32081,
    ),
)
OWNERS = [s for s in SERVICES if not s.shares]
EXTERNAL = [s for s in OWNERS if not s.internal]


def sim_nodes(sim: OpenStackSimHandle, count: int) -> tuple[list[Node], list[UpstreamNode]]:
    views = nodes(count, sim=sim)
    return views, [
        UpstreamNode(
            n.metadata.name, n.status.addresses[0].address, n.spec.provider_id.rsplit("/", 1)[1]
        )
        for n in views
    ]


def new_service(svc: UpstreamService, annotations: dict[str, str]) -> Service:
    """The Service as its user made it, before any controller served it."""
    built = service(
        svc.name,
        namespace=svc.namespace,
        ports=tuple((p, np, svc.protocol) for p, np in svc.ports),
        annotations=annotations,
        session_affinity=svc.affinity,
        load_balancer_source_ranges=svc.source_ranges,
        external_traffic_policy="Local" if svc.health_check_node_port else "Cluster",
        health_check_node_port=svc.health_check_node_port,
    )
    assert built.metadata.uid == svc.uid
    return built


def pyccm_service(svc: UpstreamService, left: Left) -> Service:
    """The Service as upstream left it in Kubernetes: its annotations and ingress."""
    annotations = svc.annotations()
    if svc.shares:
        annotations[LB_ID] = left.lb_of[svc.shares]
    built = new_service(svc, annotations)
    ingress = tuple(LoadBalancerIngress(ip=i["ip"], ip_mode=i["ipMode"]) for i in left.ingress(svc))
    status = ServiceStatus(load_balancer=LoadBalancerStatus(ingress=ingress))
    return msgspec.structs.replace(
        with_annotations(built, left.annotations(svc.name)), status=status
    )


def after_takeover(svc: UpstreamService, left: Left) -> Service:
    """The Service as pyccm leaves it: upstream's, with pyccm's ipMode."""
    taken = pyccm_service(svc, left)
    ingress = tuple(
        msgspec.structs.replace(i, ip_mode=svc.pyccm_ip_mode)
        for i in taken.status.load_balancer.ingress
    )
    status = ServiceStatus(load_balancer=LoadBalancerStatus(ingress=ingress))
    return msgspec.structs.replace(taken, status=status)


# Fields a write moves without changing the object: the status and revision counters.
VOLATILE = frozenset({"updated_at", "provisioning_status", "operating_status", "revision_number"})


def inventory(rows: Callable[[str], list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Every Octavia and Neutron object a takeover could delete, recreate or change, by
    kind and id (the upstream groups and their rules only)."""
    kinds = ("loadbalancer", "listener", "pool", "member", "healthmonitor", "floatingip")
    found = {kind: {row["id"]: row for row in rows(kind)} for kind in kinds}
    groups = {g["id"]: g for g in rows("security_group") if g["name"].startswith("lb-sg-")}
    found["security_group"] = groups
    found["security_group_rule"] = {
        r["id"]: r for r in rows("security_group_rule") if r["security_group_id"] in groups
    }
    return found


def changes(
    before: dict[str, dict[str, dict[str, Any]]],
    after: dict[str, dict[str, dict[str, Any]]],
    *,
    cluster_id: str,
) -> list[str]:
    """What differs between two inventories other than tags gaining the ownership tag:
    [] when nothing was deleted, recreated or changed."""
    owner = f"pyccm-cluster:{cluster_id}"
    found: list[str] = []
    for kind, rows in before.items():
        if set(rows) != set(after[kind]):
            found.append(f"{kind}: {sorted(rows)} -> {sorted(after[kind])}")
            continue
        for key, row in rows.items():
            now = after[kind][key]
            for name in sorted((set(row) | set(now)) - VOLATILE):
                old, new = row.get(name), now.get(name)
                if name == "tags" and (new or []) in (old or [], [*(old or []), owner]):
                    continue
                if old != new:
                    found.append(f"{kind} {key} {name}: {old!r} -> {new!r}")
    return found


def _adopt(
    sim: OpenStackSimHandle, make_lbs: MakeLbs, *, security_groups: bool
) -> tuple[Left, list[UpstreamNode]]:
    views, upstream_nodes = sim_nodes(sim, 3)
    conn = sim.connection()
    left = what_upstream_left(
        conn,
        cluster=CLUSTER,
        services=SERVICES,
        node_list=upstream_nodes,
        subnet_id=vip_subnet(sim),
        floating_network_id=_floating_network(sim),
        security_groups=security_groups,
    )
    assert (
        upstream_would_adopt(
            conn,
            cluster=CLUSTER,
            services=SERVICES,
            node_list=upstream_nodes,
            subnet_id=vip_subnet(sim),
            security_groups=security_groups,
        )
        == []
    )  # the helper builds what upstream itself accepts
    before = inventory(sim.resources)
    mark = sim.mark()
    lbs = make_lbs(SG_CONF if security_groups else "", cluster_id=CLUSTER_ID)
    for svc in SERVICES:
        current = pyccm_service(svc, left)
        outcome = ensure(lbs, current, views)
        # Same ingress (but its ipMode for X-Forwarded-For), same annotations.
        assert with_status(current, outcome) == after_takeover(svc, left), svc.name
    assert (
        changes(before, inventory(sim.resources), cluster_id=CLUSTER_ID) == []
    )  # nothing deleted or recreated
    written = sorted((c.method, shape(c.path)) for c in sim.writes(since=mark))
    # One tags write per load balancer (web's, shared by guest, is tagged once), floating IP
    # and group upstream made: the ownership tag (naming.owner_tag).
    tag_writes = [("PUT", "lbaas/loadbalancers/{id}")] * len(OWNERS)
    tag_writes += [("PUT", "floatingips/{id}/tags")] * len(EXTERNAL)
    if security_groups:
        tag_writes += [("PUT", "security-groups/{id}/tags")] * len(SERVICES)
    assert written == sorted(tag_writes), written
    return left, upstream_nodes


def _floating_network(sim: OpenStackSimHandle) -> str:
    (public,) = [n for n in sim.resources("network") if n.get("router:external")]
    return str(public["id"])


def test_pyccm_takes_over_upstream_load_balancers_writing_only_its_ownership_tags(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    _adopt(sim, make_lbs, security_groups=False)


def test_pyccm_takes_over_upstream_security_groups_writing_only_their_tags(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    _adopt(sim, make_lbs, security_groups=True)


def test_what_pyccm_leaves_upstream_takes_back_without_a_write(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    _, upstream_nodes = _adopt(sim, make_lbs, security_groups=True)
    problems = upstream_would_adopt(
        sim.connection(),
        cluster=CLUSTER,
        services=SERVICES,
        node_list=upstream_nodes,
        subnet_id=vip_subnet(sim),
        security_groups=True,
    )
    assert problems == []
    # pyccm's one addition, never read by upstream (it counts only `kube_service_` tags as
    # the Services sharing a load balancer): the ownership tag.
    web, guest = upstream_lb_name(CLUSTER, SERVICES[0]), upstream_lb_name(CLUSTER, SERVICES[2])
    (lb,) = [row for row in sim.resources("loadbalancer") if row["name"] == web]
    assert lb["tags"] == [web, guest, f"pyccm-cluster:{CLUSTER_ID}"]


# --- a deliberate difference: `externalTrafficPolicy: Local` --------------------------------

# Local, without the monitor annotation: upstream made no monitor.
LOCAL = UpstreamService(
    "default", "quiet", "0000-default-quiet", ((80, 30080),), health_check_node_port=32000
)


@pytest.mark.parametrize("monitor_annotation", ["", "false"])
def test_a_local_traffic_service_gets_its_monitor_unless_its_annotation_says_false(
    sim: OpenStackSimHandle, make_lbs: MakeLbs, monitor_annotation: str
) -> None:
    """upstream serves an `externalTrafficPolicy: Local` Service without a monitor unless
    asked (kubernetes/cloud-provider-openstack#2866); pyccm adds the HTTP monitor on its
    healthCheckNodePort on takeover (a monitor create, then the members' `monitor_port`), and leaves
    it as upstream made it when the Service says `enable-health-monitor: "false"`."""
    views, upstream_nodes = sim_nodes(sim, 3)
    left = what_upstream_left(
        sim.connection(),
        cluster=CLUSTER,
        services=[LOCAL],
        node_list=upstream_nodes,
        subnet_id=vip_subnet(sim),
        floating_network_id=_floating_network(sim),
        security_groups=False,
    )
    current = pyccm_service(LOCAL, left)
    if monitor_annotation:
        current = with_annotations(current, {MONITOR: monitor_annotation})
    before = inventory(sim.resources)
    mark = sim.mark()
    ensure(make_lbs(cluster_id=CLUSTER_ID), current, views)
    written = sorted((c.method, shape(c.path)) for c in sim.writes(since=mark))
    tags = [("PUT", "floatingips/{id}/tags"), ("PUT", "lbaas/loadbalancers/{id}")]
    if monitor_annotation == "false":
        assert written == tags
        assert changes(before, inventory(sim.resources), cluster_id=CLUSTER_ID) == []
    else:
        monitor = [("POST", "lbaas/healthmonitors"), ("PUT", "lbaas/pools/{id}/members")]
        assert written == sorted(tags + monitor)
        (made,) = sim.resources("healthmonitor")
        assert (made["type"], made["name"]) == (
            "HTTP",
            f"monitor_0_{upstream_lb_name(CLUSTER, LOCAL)}",
        )


def test_a_plan_before_the_takeover_shows_only_the_ownership_tags(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    """`pyccm plan service NS/NAME` on upstream's cloud (docs/migration.md, step 4): the
    changes it lists are the tag writes the takeover makes, and it writes nothing."""
    views, upstream_nodes = sim_nodes(sim, 3)
    left = what_upstream_left(
        sim.connection(),
        cluster=CLUSTER,
        services=SERVICES,
        node_list=upstream_nodes,
        subnet_id=vip_subnet(sim),
        floating_network_id=_floating_network(sim),
        security_groups=True,
    )
    lbs = make_lbs(SG_CONF, cluster_id=CLUSTER_ID)
    mark = sim.mark()
    owner = f"pyccm-cluster:{CLUSTER_ID}"
    for svc in SERVICES:
        plan = lbs.plan(service=pyccm_service(svc, left), nodes=views)
        seen = [(c.action, c.kind, sorted(c.fields)) for c in plan.changes]
        wanted = [] if svc.shares else [("update", "load balancer", ["tags"])]
        wanted += [] if svc.shares or svc.internal else [("update", "floating IP", ["tags"])]
        wanted += [("update", "security group", ["tags"])]
        assert sorted(seen) == sorted(wanted), svc.name
        assert all(owner in c.fields["tags"] for c in plan.changes)
        assert plan.ingress == after_takeover(svc, left).status.load_balancer.ingress
    assert sim.writes(since=mark) == []


def test_what_pyccm_creates_upstream_takes_over_without_a_write(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    """The other way round from scratch: the same Services served by pyccm alone (no
    upstream before it); upstream's predicates find nothing to change on what it made once
    `monitor-kube-proxy = false` has turned its kube-proxy monitors into upstream's."""
    views, upstream_nodes = sim_nodes(sim, 3)
    lbs = make_lbs(SG_CONF, cluster_id=CLUSTER_ID)
    lb_ids: dict[str, str] = {}
    for svc in SERVICES:
        given = svc.annotations() | ({LB_ID: lb_ids[svc.shares]} if svc.shares else {})
        outcome = ensure(lbs, new_service(svc, given), views)
        lb_ids[svc.name] = outcome.annotations_to_set[LB_ID]

    def upstream_problems() -> list[str]:
        return upstream_would_adopt(
            sim.connection(),
            cluster=CLUSTER,
            services=SERVICES,
            node_list=upstream_nodes,
            subnet_id=vip_subnet(sim),
            security_groups=True,
        )

    # pyccm's own monitors of externalTrafficPolicy Cluster Services check kube-proxy:
    # upstream would re-make them, their members' monitor port and the group's rules.
    assert upstream_problems() != []
    handing_back = make_lbs(SG_CONF + "\nmonitor-kube-proxy = false", cluster_id=CLUSTER_ID)
    for svc in SERVICES:
        again = new_service(svc, svc.annotations() | {LB_ID: lb_ids[svc.name]})
        converge(partial(handing_back.ensure, service=again, nodes=views), max_syncs=40)
    problems = upstream_problems()
    assert problems == []
