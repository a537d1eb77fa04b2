"""Taking over from upstream's openstack-cloud-controller-manager (v1.36) with zero churn, and
handing back, on the real Keystone, Nova, Neutron and Octavia (docs/migration.md).

`what_upstream_left` (tests/provider_lb/test_takeover_from_upstream.py) builds with
openstacksdk what the Go controller leaves for a cluster: three load balancers (one with two
ports, one with monitors, one internal), a Service sharing the first through
`load-balancer-id`, floating IPs with upstream's description, `lb-sg-…` security groups with
upstream's rules on the nodes' ports. The Kubernetes simulator holds the Services as upstream
and the service controller left them (finalizer, nodePorts, the `load-balancer-id` and
`load-balancer-address` annotations, `status.loadBalancer.ingress`) and the nodes as its node
controller left them (providerID, no uninitialized taint). Then the supervisord tree (manager,
workers, openstack provider; `manage-security-groups = true`, no `[Route]`) starts on it.

Asserted from the real services: no object deleted, recreated or changed but for tags gaining
the cluster's ownership tag; the access logs' writes are exactly those tag writes, also
through a periodic resync; every Service keeps its ingress (with pyccm's ipMode) and
annotations. Then the reverse: upstream's own predicates (`upstream_would_adopt`) find
nothing to change on what pyccm leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from pyccm.provider.openstack.loadbalancer.service_annotations import HEALTH_MONITOR_KUBE_PROXY
from pyccm_sim.demo import World, child, process_tree
from pyccm_sim.scenario import CLUSTER_CIDR, seed_node
from tests.conformance.realcloud import RealCloud
from tests.provider_lb.test_takeover_from_upstream import (
    EXTERNAL,
    FINALIZER,
    OWNERS,
    SERVICES,
    UpstreamNode,
    UpstreamService,
    changes,
    upstream_lb_name,
    upstream_would_adopt,
    what_upstream_left,
)
from tests.support.tree import Kube
from tests.support.waiting import wait_for

pytestmark = pytest.mark.conformance

CLUSTER = "takeover"
NODES = ["node-0000", "node-0001", "node-0002"]
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
RESYNC_S = 10
CONVERGE = 180.0


@dataclass(frozen=True)
class TakenOver:
    cloud: RealCloud
    kube: Kube
    world: World
    services: tuple[UpstreamService, ...]
    nodes: tuple[UpstreamNode, ...]
    before: dict[str, dict[str, dict[str, Any]]]
    upstream_services: dict[str, dict[str, Any]]  # as upstream left them in Kubernetes
    mark: int  # the access logs' length when the tree started

    def rows(self, kind: str) -> list[dict[str, Any]]:
        return rows_of(self.cloud.connection("ccm"), kind)


def rows_of(conn: Any, kind: str) -> list[dict[str, Any]]:
    """The real services' objects as `changes` compares them (openstacksdk's dicts); only
    this test's cluster's load balancers and what hangs off them, and the `lb-sg-` groups."""
    octavia, neutron = conn.load_balancer, conn.network
    prefix = f"kube_service_{CLUSTER}_"
    lbs = [lb for lb in octavia.load_balancers() if (lb.name or "").startswith(prefix)]
    ids = {lb.id for lb in lbs}
    pools = [p for p in octavia.pools() if any(r["id"] in ids for r in p.loadbalancers or [])]
    groups = [g for g in neutron.security_groups() if g.name.startswith("lb-sg-")]
    group_ids = {g.id for g in groups}
    found: dict[str, Callable[[], list[Any]]] = {
        "loadbalancer": lambda: lbs,
        "listener": lambda: [
            li for li in octavia.listeners() if any(r["id"] in ids for r in li.load_balancers or [])
        ],
        "pool": lambda: pools,
        "member": lambda: [m for p in pools for m in octavia.members(p.id)],
        "healthmonitor": lambda: [
            octavia.get_health_monitor(p.health_monitor_id) for p in pools if p.health_monitor_id
        ],
        "floatingip": lambda: [f for lb in lbs for f in neutron.ips(port_id=lb.vip_port_id)],
        "security_group": lambda: groups,
        "security_group_rule": lambda: [
            r for r in neutron.security_group_rules() if r.security_group_id in group_ids
        ],
    }
    return [_plain(resource) for resource in found[kind]()]


def _plain(resource: Any) -> dict[str, Any]:
    row: dict[str, Any] = resource.to_dict(computed=False)
    row.pop("location", None)
    return row


def _node_objects(kube: Kube, cloud: RealCloud) -> tuple[UpstreamNode, ...]:
    """The nodes as upstream's node controller left them: providerID, no taint."""
    found = []
    for index, name in enumerate(NODES):
        server = cloud.seeded.servers[name]
        node = kube.node(name)
        assert node is not None
        taints = [t for t in node["spec"].get("taints") or [] if t["key"] != UNINITIALIZED]
        kube.patch(
            f"/api/v1/nodes/{name}",
            {"spec": {"providerID": f"openstack:///{server}", "taints": taints}},
        )
        found.append(UpstreamNode(name, seed_node(index).internal_ip, server))
    return tuple(found)


def _create_services(kube: Kube) -> tuple[UpstreamService, ...]:
    """The simulator test's Services, created before the cloud objects (their UIDs name
    the groups)."""
    made = []
    for shape in SERVICES:
        name, ports = shape.name, shape.ports
        local: dict[str, Any] = {"externalTrafficPolicy": "Cluster"}
        if shape.health_check_node_port:
            local = {
                "externalTrafficPolicy": "Local",
                "healthCheckNodePort": shape.health_check_node_port,
            }
        body = {
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": shape.annotations(),
                "finalizers": [FINALIZER],
            },
            "spec": {
                "type": "LoadBalancer",
                "sessionAffinity": shape.affinity,
                "loadBalancerSourceRanges": list(shape.source_ranges),
                **local,
                "ports": [
                    {
                        "name": f"p{p}",
                        "port": p,
                        "protocol": shape.protocol,
                        "targetPort": p,
                        "nodePort": np,
                    }
                    for p, np in ports
                ],
            },
        }
        kube.client.request("POST", "/api/v1/namespaces/default/services", body=body)
        created = kube.service(name)
        assert created is not None
        made.append(replace(shape, uid=created["metadata"]["uid"]))
    return tuple(made)


def _stock_default_rules(real_cloud: RealCloud, stack: ExitStack) -> None:
    """A stock Neutron gives every new security group two egress rules (the templates its
    database migration seeds); the conformance stack builds its schema without them. Added
    for this module's groups, removed after it."""
    admin = real_cloud.connection("admin").network
    for ethertype in ("IPv4", "IPv6"):
        template = admin.create_default_security_group_rule(
            direction="egress",
            ethertype=ethertype,
            used_in_default_sg=False,
            used_in_non_default_sg=True,
        )
        stack.callback(admin.delete_default_security_group_rule, template)


def _cloud_conf(real_cloud: RealCloud, workdir: Path) -> Path:
    """The session's `cloud.conf` without `[Route]` (no route writes in the access logs),
    with `manage-security-groups = true`, as the upstream controller ran."""
    text = real_cloud.cloud_conf_path.read_text().split("[Route]")[0]
    text = text.replace("[LoadBalancer]\n", "[LoadBalancer]\nmanage-security-groups = true\n")
    path = workdir / "cloud.conf"
    path.write_text(text)
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def taken_over(
    real_cloud: RealCloud, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TakenOver]:
    workdir = tmp_path_factory.mktemp("takeover")
    kubeconfig = workdir / "kubeconfig"
    with ExitStack() as stack:
        kube_url = stack.enter_context(
            child(
                [
                    *("sim", "kube", "--seed-nodes", str(len(NODES))),
                    *("--kubeconfig-out", str(kubeconfig)),
                ],
                workdir / "kube.log",
            )
        )
        kube = Kube(kubeconfig)
        stack.callback(kube.client.close)
        _stock_default_rules(real_cloud, stack)
        upstream_nodes = _node_objects(kube, real_cloud)
        services = _create_services(kube)
        conn = real_cloud.connection("ccm")
        left = what_upstream_left(
            conn,
            cluster=CLUSTER,
            services=services,
            node_list=upstream_nodes,
            subnet_id=real_cloud.seeded.subnet_id,
            floating_network_id=real_cloud.seeded.external_network_id,
            security_groups=True,
        )
        for svc in services:
            kube.patch_service(svc.name, {"metadata": {"annotations": left.annotations(svc.name)}})
            kube.patch(
                f"/api/v1/namespaces/default/services/{svc.name}/status",
                {"status": {"loadBalancer": {"ingress": left.ingress(svc)}}},
            )
        upstream_services = {svc.name: kube.service(svc.name) or {} for svc in services}
        # The state is what upstream itself would leave alone.
        problems = upstream_would_adopt(
            conn,
            cluster=CLUSTER,
            services=services,
            node_list=upstream_nodes,
            subnet_id=real_cloud.seeded.subnet_id,
            security_groups=True,
        )
        assert problems == []
        before = {kind: {r["id"]: r for r in rows_of(conn, kind)} for kind in KINDS}
        world = World(
            workdir=workdir,
            kube_url=kube_url,
            kubeconfig=kubeconfig,
            cloud_conf=_cloud_conf(real_cloud, workdir),
        )
        mark = real_cloud.mark()
        stack.enter_context(
            process_tree(
                world,
                cluster_cidr=CLUSTER_CIDR,
                worker_args=f"--cluster-name={CLUSTER} --lb-resync-period={RESYNC_S}s "
                "--node-status-update-frequency=2s",
            )
        )
        yield TakenOver(
            cloud=real_cloud,
            kube=kube,
            world=world,
            services=services,
            nodes=upstream_nodes,
            before=before,
            upstream_services=upstream_services,
            mark=mark,
        )


KINDS = (
    "loadbalancer",
    "listener",
    "pool",
    "member",
    "healthmonitor",
    "floatingip",
    "security_group",
    "security_group_rule",
)


def _owner(taken: TakenOver) -> str:
    return f"pyccm-cluster:{taken.world.cluster_id}"


def _tagged(taken: TakenOver) -> bool:
    """pyccm has adopted everything: the ownership tag on every load balancer, floating IP
    and group upstream made."""
    owner = _owner(taken)
    kinds = ("loadbalancer", "floatingip", "security_group")
    return all(owner in (row.get("tags") or []) for kind in kinds for row in taken.rows(kind))


def _short(path: str) -> str:
    """`/v2/lbaas/loadbalancers/<id>` → `lbaas/loadbalancers/{id}`."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p and not p.startswith("v2")]
    return "/".join("{id}" if len(p) == 36 and p.count("-") == 4 else p for p in parts)


def test_pyccm_takes_over_writing_only_its_ownership_tags(taken_over: TakenOver) -> None:
    taken = taken_over
    wait_for(lambda: _tagged(taken), timeout=CONVERGE, what="upstream's objects adopted")
    # Then one periodic resync of every Service (each load balancer read again): a
    # re-ensure after the adoption writes nothing either.
    resync = taken.cloud.mark()
    lb_ids = {row["id"] for row in taken.rows("loadbalancer")}

    def reread() -> bool:
        read = {
            c.path.rstrip("/").rsplit("/", 1)[-1]
            for c in taken.cloud.calls(since=resync)
            if c.method == "GET"
            and "/lbaas/loadbalancers/" in c.path
            and c.user_agent.startswith("pyccm/")
        }
        return lb_ids <= read

    wait_for(reread, timeout=CONVERGE, what="a resync reading every load balancer")
    # Nothing deleted, recreated or changed, but for tags gaining the ownership tag.
    after = {kind: {r["id"]: r for r in taken.rows(kind)} for kind in KINDS}
    assert changes(taken.before, after, cluster_id=taken.world.cluster_id) == []
    # The writes, from the real services' access logs: one tags write per load balancer
    # (web's, shared by guest, once), floating IP and group.
    written = sorted(
        (c.method, _short(c.path), c.status) for c in taken.cloud.writes(since=taken.mark)
    )
    assert written == sorted(
        [("PUT", "lbaas/loadbalancers/{id}", 200)] * len(OWNERS)
        + [("PUT", "floatingips/{id}/tags", 200)] * len(EXTERNAL)
        + [("PUT", "security-groups/{id}/tags", 200)] * len(taken.services)
    )
    # Every Service keeps its ingress (with pyccm's ipMode: Proxy for X-Forwarded-For too)
    # and upstream's annotations, and gets nothing else.
    for svc in taken.services:
        now = taken.kube.service(svc.name) or {}
        then = taken.upstream_services[svc.name]
        ingress = then["status"]["loadBalancer"]["ingress"]
        kept = {"ingress": [{**i, "ipMode": svc.pyccm_ip_mode} for i in ingress]}
        assert now["status"]["loadBalancer"] == kept, svc.name
        assert now["metadata"]["annotations"] == then["metadata"]["annotations"], svc.name
        assert now["metadata"]["finalizers"] == [FINALIZER]


def test_upstream_takes_back_what_pyccm_leaves(taken_over: TakenOver) -> None:
    taken = taken_over
    wait_for(lambda: _tagged(taken), timeout=CONVERGE, what="upstream's objects adopted")
    problems = upstream_would_adopt(
        taken.cloud.connection("ccm"),
        cluster=CLUSTER,
        services=taken.services,
        node_list=taken.nodes,
        subnet_id=taken.cloud.seeded.subnet_id,
        security_groups=True,
    )
    assert problems == []
    # pyccm's one addition, which upstream's code never reads: the ownership tag beside
    # upstream's name tags (upstream counts only `kube_service_` tags as sharers).
    web = upstream_lb_name(CLUSTER, taken.services[0])
    guest = upstream_lb_name(CLUSTER, taken.services[2])
    (lb,) = [r for r in taken.rows("loadbalancer") if r["name"] == web]
    assert sorted(lb["tags"]) == sorted([web, guest, _owner(taken)])


def test_upstream_takes_over_what_pyccm_creates(taken_over: TakenOver) -> None:
    """A Service made while pyccm runs: its load balancer, floating IP and group (whose
    Neutron default egress rules pyccm deletes, as upstream does) are what upstream's
    predicates accept without a write."""
    taken = taken_over
    shape = UpstreamService("default", "fresh", "", ((7000, 30700), (7001, 30701)), monitor=True)
    body = {
        "metadata": {
            "name": "fresh",
            "namespace": "default",
            # Monitors of the port, as upstream's: pyccm's default ones check kube-proxy.
            "annotations": shape.annotations() | {HEALTH_MONITOR_KUBE_PROXY: "false"},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": f"p{p}", "port": p, "protocol": "TCP", "targetPort": p, "nodePort": np}
                for p, np in shape.ports
            ],
        },
    }
    taken.kube.client.request("POST", "/api/v1/namespaces/default/services", body=body)
    created = taken.kube.service("fresh") or {}
    fresh = replace(shape, uid=created["metadata"]["uid"])
    conn = taken.cloud.connection("ccm")

    last = ["not served yet"]

    def settled() -> bool:
        service = taken.kube.service("fresh") or {}
        if not (service.get("status", {}).get("loadBalancer") or {}).get("ingress"):
            return False
        last[:] = upstream_would_adopt(
            conn,
            cluster=CLUSTER,
            services=[fresh],
            node_list=taken.nodes,
            subnet_id=taken.cloud.seeded.subnet_id,
            security_groups=True,
        )
        return not last

    try:
        wait_for(settled, timeout=CONVERGE, what="upstream would take the new Service as it is")
    finally:
        assert last == [], last
