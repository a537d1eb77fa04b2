"""pyccm's main job on the real OpenStack services: the supervisord tree (manager + node,
lifecycle, service and route workers, openstack provider) against real Keystone, Nova,
Neutron and Octavia, and the Kubernetes simulator.

The cluster has nodes node-0000..node-0002; the cloud has servers node-0000..node-0003, so a
test can add node-0003. What a test checks is read from the real services (openstacksdk as
the tenant user) and their own access logs, never from pyccm's metrics. Each test uses its
own Services; the last one deletes them all and expects the cloud as it was seeded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from pyccm.kubeapi.client import STRATEGIC_MERGE_PATCH
from pyccm_sim.demo import World, child, process_tree
from pyccm_sim.scenario import CLUSTER_CIDR, seed_node
from tests.conformance.realcloud import RealCloud
from tests.support.tree import (
    FINALIZER,
    LB_ID,
    Kube,
    ingress_ips,
    initialized,
    node_port,
    service_port,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.conformance

NODES = ["node-0000", "node-0001", "node-0002"]
SPARE = "node-0003"
INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
TIMEOUT_CLIENT_DATA = "loadbalancer.openstack.org/timeout-client-data"
HEALTH_MONITOR = "loadbalancer.openstack.org/enable-health-monitor"
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"
# Real services on sqlite, one request at a time each, 0.5 s provisioning: slower than the
# simulator, so every wait is generous; none of them is a timing target.
CONVERGE = 120.0
# The resync period of the no-op test: every LB Service is re-ensured this often.
RESYNC = "20s"


@dataclass(frozen=True)
class Tree:
    world: World
    kube: Kube
    cloud: RealCloud
    octavia: Any
    neutron: Any

    def lb_name(self, service: str) -> str:
        return f"kube_service_conformance_default_{service}"

    def lbs_named(self, name: str) -> list[Any]:
        return list(self.octavia.load_balancers(name=name))

    def lb_of(self, service: str) -> Any:
        found = self.lbs_named(self.lb_name(service))
        return found[0] if len(found) == 1 else None

    def listeners_of(self, lb_id: str) -> list[Any]:
        return [
            li
            for li in self.octavia.listeners()
            if any(ref["id"] == lb_id for ref in li.load_balancers or [])
        ]

    def pools_of(self, lb_id: str) -> list[Any]:
        return [
            pool
            for pool in self.octavia.pools()
            if any(ref["id"] == lb_id for ref in pool.loadbalancers or [])
        ]

    def members_of(self, lb_id: str) -> set[tuple[str, int]]:
        return {
            (member.address, member.protocol_port)
            for pool in self.pools_of(lb_id)
            for member in self.octavia.members(pool.id)
        }

    def floating_ips_on(self, port_id: str) -> list[Any]:
        return list(self.neutron.ips(port_id=port_id))

    def routes(self) -> set[tuple[str, str]]:
        router = self.neutron.get_router(self.cloud.seeded.router_id)
        return {(r["destination"], r["nexthop"]) for r in router.routes or []}

    def pairs_on(self, address: str) -> set[str]:
        ports = self.neutron.ports(fixed_ips=f"ip_address={address}")
        return {pair["ip_address"] for p in ports for pair in p.allowed_address_pairs or []}


@pytest.fixture(scope="module")
def tree(real_cloud: RealCloud, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    workdir = tmp_path_factory.mktemp("tree")
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
        world = World(
            workdir=workdir,
            kube_url=kube_url,
            kubeconfig=kubeconfig,
            cloud_conf=real_cloud.cloud_conf_path,
        )
        stack.enter_context(
            process_tree(
                world,
                cluster_cidr=CLUSTER_CIDR,
                manager_args="",
                worker_args=f"--cluster-name=conformance --lb-resync-period={RESYNC} "
                "--node-status-update-frequency=2s",
            )
        )
        kube = Kube(kubeconfig)
        stack.callback(kube.client.close)
        connection = real_cloud.connection("ccm")
        yield Tree(
            world=world,
            kube=kube,
            cloud=real_cloud,
            octavia=connection.load_balancer,
            neutron=connection.network,
        )


def create_service(tree: Tree, name: str, **kwargs: Any) -> dict[str, Any]:
    tree.kube.create_service(name, **kwargs)
    return converged(tree, name)


def converged(tree: Tree, name: str) -> dict[str, Any]:
    """Wait for the Service's ingress and its ACTIVE load balancer; return the Service."""

    def ready() -> dict[str, Any] | None:
        service = tree.kube.service(name)
        lb = tree.lb_of(name)
        if not ingress_ips(service) or lb is None or lb.provisioning_status != "ACTIVE":
            return None
        # The ensure's last write: the status patch lands first, the annotations after it.
        if (service or {})["metadata"].get("annotations", {}).get(LB_ID) != lb.id:
            return None
        return service

    return wait_for(ready, timeout=CONVERGE, what=f"Service {name} has its load balancer")


# --- nodes and routes ---------------------------------------------------------------------------


def test_nodes_are_initialized_from_real_nova(tree: Tree) -> None:
    wait_for(lambda: initialized(tree.kube, NODES), timeout=CONVERGE, what="nodes initialized")
    servers = tree.cloud.seeded.servers
    for index, name in enumerate(NODES):
        node = tree.kube.node(name)
        assert node is not None
        assert node["spec"]["providerID"] == f"openstack:///{servers[name]}"
        labels = node["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "m1.medium"
        assert labels["topology.kubernetes.io/zone"] == "nova"
        assert labels["topology.kubernetes.io/region"] == "RegionOne"
        addresses = {(a["type"], a["address"]) for a in node["status"]["addresses"]}
        assert ("InternalIP", seed_node(index).internal_ip) in addresses
        assert not [t for t in node["spec"].get("taints") or [] if t["key"] == UNINITIALIZED]


def test_every_node_gets_its_route_and_address_pair_on_the_real_router(tree: Tree) -> None:
    wanted = {(seed_node(i).pod_cidr, seed_node(i).internal_ip) for i in range(len(NODES))}
    wait_for(lambda: tree.routes() >= wanted, timeout=CONVERGE, what="a route per node")
    for index in range(len(NODES)):
        seed = seed_node(index)
        assert seed.pod_cidr in tree.pairs_on(seed.internal_ip)


# --- load balancers ------------------------------------------------------------------------------


def test_a_load_balancer_service_gets_one_lb_tree_and_its_floating_ip_as_ingress(
    tree: Tree,
) -> None:
    service = create_service(tree, "web")
    lb = tree.lb_of("web")
    assert service["metadata"]["annotations"][LB_ID] == lb.id
    assert FINALIZER in service["metadata"]["finalizers"]
    (fip,) = tree.floating_ips_on(lb.vip_port_id)
    assert ingress_ips(service) == [fip.floating_ip_address]
    (listener,) = tree.listeners_of(lb.id)
    assert listener.protocol_port == 80
    wanted = {(seed_node(i).internal_ip, node_port(80)) for i in range(len(NODES))}
    assert tree.members_of(lb.id) == wanted
    assert tree.kube.events("EnsuredLoadBalancer")


def test_a_new_port_gets_a_listener_a_bare_pool_then_its_members(tree: Tree) -> None:
    create_service(tree, "grow")
    lb = tree.lb_of("grow")
    mark = tree.cloud.mark()
    tree.kube.patch_service("grow", {"spec": {"ports": [service_port(80), service_port(443)]}})
    wanted = {
        (seed_node(i).internal_ip, node_port(p)) for i in range(len(NODES)) for p in (80, 443)
    }
    wait_for(lambda: tree.members_of(lb.id) == wanted, timeout=CONVERGE, what="members on 443")
    assert tree.lbs_named(tree.lb_name("grow"))[0].id == lb.id
    server_errors = [c for c in tree.cloud.calls(since=mark) if c.status >= 500]
    assert server_errors == []


def test_annotations_change_timeouts_and_monitors(tree: Tree) -> None:
    create_service(tree, "tuned")
    lb = tree.lb_of("tuned")
    tree.kube.patch_service(
        "tuned",
        {"metadata": {"annotations": {TIMEOUT_CLIENT_DATA: "70000", HEALTH_MONITOR: "true"}}},
    )

    def tuned() -> bool:
        listeners = tree.listeners_of(lb.id)
        pools = tree.pools_of(lb.id)
        return (
            bool(listeners and pools)
            and all(li.timeout_client_data == 70000 for li in listeners)
            and all(pool.health_monitor_id for pool in pools)
        )

    wait_for(tuned, timeout=CONVERGE, what="timeouts and a monitor on every pool")


def test_a_second_service_shares_the_first_ones_load_balancer(tree: Tree) -> None:
    create_service(tree, "owner")
    lb = tree.lb_of("owner")
    tree.kube.create_service(
        "guest", ports=(8080,), annotations={"loadbalancer.openstack.org/load-balancer-id": lb.id}
    )
    wait_for(
        lambda: {li.protocol_port for li in tree.listeners_of(lb.id)} == {80, 8080},
        timeout=CONVERGE,
        what="the guest's listener on the owner's load balancer",
    )
    tree.kube.delete("/api/v1/namespaces/default/services/guest")
    wait_for(
        lambda: {li.protocol_port for li in tree.listeners_of(lb.id)} == {80},
        timeout=CONVERGE,
        what="only the guest's listener gone",
    )
    assert tree.lb_of("owner").id == lb.id


def test_an_internal_service_is_reached_on_its_vip_without_a_floating_ip(tree: Tree) -> None:
    service = create_service(tree, "inside", annotations={INTERNAL: "true"})
    lb = tree.lb_of("inside")
    assert ingress_ips(service) == [lb.vip_address]
    assert tree.floating_ips_on(lb.vip_port_id) == []


def test_members_and_routes_follow_node_add_shutdown_and_delete(tree: Tree) -> None:
    create_service(tree, "follow")
    lb = tree.lb_of("follow")
    spare = seed_node(len(NODES))
    tree.kube.client.request(
        "POST",
        "/api/v1/nodes",
        body={
            "metadata": {"name": SPARE},
            "spec": {
                "podCIDR": spare.pod_cidr,
                "taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}],
            },
            "status": {
                "addresses": [{"type": "InternalIP", "address": spare.internal_ip}],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    wait_for(
        lambda: (spare.internal_ip, node_port(80)) in tree.members_of(lb.id),
        timeout=CONVERGE,
        what="the new node is a member",
    )
    wait_for(
        lambda: (spare.pod_cidr, spare.internal_ip) in tree.routes(),
        timeout=CONVERGE,
        what="the new node's route",
    )

    # The server stops; its kubelet stops reporting: the lifecycle controller asks Nova.
    tree.cloud.set_server_status(SPARE, "SHUTOFF")
    tree.kube.patch(
        f"/api/v1/nodes/{SPARE}/status",
        {"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "Test"}]}},
        content_type=STRATEGIC_MERGE_PATCH,
    )
    wait_for(
        lambda: any(
            t["key"] == SHUTDOWN
            for t in (tree.kube.node(SPARE) or {}).get("spec", {}).get("taints") or []
        ),
        timeout=CONVERGE,
        what="the shut-down node tainted",
    )

    tree.kube.delete(f"/api/v1/nodes/{SPARE}")
    wait_for(
        lambda: (spare.internal_ip, node_port(80)) not in tree.members_of(lb.id),
        timeout=CONVERGE,
        what="the deleted node is no member",
    )
    wait_for(
        lambda: (
            (spare.pod_cidr, spare.internal_ip) not in tree.routes()
            and spare.pod_cidr not in tree.pairs_on(spare.internal_ip)
        ),
        timeout=CONVERGE,
        what="the deleted node's route and address pair gone",
    )


def test_a_load_balancer_octavia_puts_in_error_is_replaced(tree: Tree) -> None:
    # The settler turns this Service's load balancers to ERROR until the pattern is cleared:
    # pyccm deletes each and creates another (upstream's recovery), then converges.
    name = "broken"
    tree.cloud.force_error(f"^{tree.lb_name(name)}$")
    mark = tree.cloud.mark()
    tree.kube.create_service(name)

    def lb_creates() -> int:
        return sum(
            1
            for c in tree.cloud.calls(since=mark)
            if c.method == "POST" and c.path.endswith("/lbaas/loadbalancers") and c.status == 201
        )

    wait_for(lambda: lb_creates() >= 2, timeout=CONVERGE, what="an ERROR load balancer replaced")
    tree.cloud.clear_errors()
    converged(tree, name)
    assert len(tree.lbs_named(tree.lb_name(name))) == 1
    deletes = [
        c
        for c in tree.cloud.calls(since=mark)
        if c.method == "DELETE" and "/lbaas/loadbalancers/" in c.path
    ]
    assert len(deletes) >= 1


def test_a_resync_period_of_converged_services_makes_no_write(tree: Tree) -> None:
    names = ["quiet-a", "quiet-b"]
    for name in names:
        create_service(tree, name)
    # Let every earlier test's Services settle, then watch a whole resync period and more.
    wait_for(
        lambda: all(lb.provisioning_status == "ACTIVE" for lb in tree.octavia.load_balancers()),
        timeout=CONVERGE,
        what="every load balancer ACTIVE",
    )
    ids = {tree.lb_of(name).id for name in names}
    mark = tree.cloud.mark()
    wait_for(
        lambda: ids <= _load_balancers_read(tree, mark),
        timeout=90,
        what="a resync has read every quiet Service's load balancer",
    )
    assert [(c.service, c.method, c.path) for c in tree.cloud.writes(since=mark)] == []


def _load_balancers_read(tree: Tree, mark: int) -> set[str]:
    """Ids of the load balancers GET by id since `mark` (a resync reads each once)."""
    marker = "/lbaas/loadbalancers/"
    return {
        c.path.split(marker, 1)[1]
        for c in tree.cloud.calls(since=mark)
        if c.method == "GET" and marker in c.path
    }


def test_deleting_every_service_leaves_nothing_behind(tree: Tree) -> None:
    services = tree.kube.items("/api/v1/namespaces/default/services")
    for service in services:
        if service["spec"].get("type") == "LoadBalancer":
            tree.kube.delete(f"/api/v1/namespaces/default/services/{service['metadata']['name']}")
    wait_for(
        lambda: (
            not [
                s
                for s in tree.kube.items("/api/v1/namespaces/default/services")
                if s["spec"].get("type") == "LoadBalancer"
            ]
        ),
        timeout=CONVERGE,
        what="every LoadBalancer Service gone",
    )
    assert list(tree.octavia.load_balancers()) == []
    assert list(tree.octavia.listeners()) == []
    assert list(tree.octavia.pools()) == []
    assert list(tree.octavia.health_monitors()) == []
    assert list(tree.neutron.ips()) == []
    assert [p for p in tree.neutron.ports() if p.device_owner == "Octavia"] == []
    assert [g.name for g in tree.neutron.security_groups() if g.name.startswith("lb-sg-")] == []
