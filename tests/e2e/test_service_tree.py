"""The service worker in the real process tree (supervisord: manager + node, lifecycle,
service and route workers, openstack provider) against both simulators.

The cluster has nodes node-0000..node-0002; the cloud has servers node-0000..node-0003, so
a test can add node-0003 to the cluster. Each test uses its own Services, so they do not
depend on each other, except the last: it deletes every Service and expects the cloud to
be back to what was seeded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from tests.support.tree import (
    FINALIZER,
    LB_ID,
    LB_KINDS,
    Cloud,
    Tree,
    ingress_ips,
    initialized,
    kill_program,
    node_port,
    running_tree,
    service_port,
    supervisorctl,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

NODES = ["node-0000", "node-0001", "node-0002"]
NODE_IPS = {"node-0000": "10.0.0.10", "node-0001": "10.0.0.11", "node-0002": "10.0.0.12"}
EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
TIMEOUT_CLIENT_DATA = "loadbalancer.openstack.org/timeout-client-data"
HEALTH_MONITOR = "loadbalancer.openstack.org/enable-health-monitor"
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
SERVICE_WORKER = "worker-service:worker-service-0"
# The simulator's default; tests that slow Octavia down put it back.
FAST_PROVISIONING = 0.05
CONVERGE = 60.0


@dataclass(frozen=True)
class Seeded:
    tree: Tree
    inventory: dict[str, int]


@pytest.fixture(scope="module")
def seeded(request: pytest.FixtureRequest) -> Iterator[Seeded]:
    with running_tree(request, nodes=3, servers=4) as tree:
        wait_for(lambda: initialized(tree.kube, NODES), timeout=CONVERGE, what="nodes initialized")
        yield Seeded(tree=tree, inventory=tree.cloud.inventory())


@pytest.fixture(scope="module")
def tree(seeded: Seeded) -> Tree:
    return seeded.tree


@pytest.fixture
def slow_octavia(tree: Tree) -> Iterator[Cloud]:
    """Octavia takes a second per write, as a real one takes several: long enough for
    the controller to meet PENDING_* load balancers and 409s."""
    tree.cloud.set_knobs(provisioning_delay_s=1.0)
    yield tree.cloud
    tree.cloud.set_knobs(provisioning_delay_s=FAST_PROVISIONING)


def lb_name(service: str) -> str:
    return f"kube_service_demo_default_{service}"


@dataclass(frozen=True)
class Balanced:
    """A Service as the controller leaves it once done: one ACTIVE load balancer, a
    floating IP on its VIP port, that address as the Service's ingress, the finalizer."""

    service: dict[str, Any]
    lb: dict[str, Any]
    address: str


def balanced(tree: Tree, name: str, *, internal: bool = False) -> Balanced | None:
    service = tree.kube.service(name)
    lbs = tree.cloud.lbs_named(lb_name(name))
    if service is None or len(lbs) != 1 or lbs[0]["provisioning_status"] != "ACTIVE":
        return None
    lb = lbs[0]
    if internal:
        address = lb["vip_address"]
    else:
        fips = tree.cloud.floating_ips_on(lb["vip_port_id"])
        if len(fips) != 1:
            return None
        address = fips[0]["floating_ip_address"]
    if ingress_ips(service) != [address] or FINALIZER not in service["metadata"].get(
        "finalizers", []
    ):
        return None
    # The ensure's last write: the status patch lands first, the annotations after it.
    if service["metadata"].get("annotations", {}).get(LB_ID) != lb["id"]:
        return None
    return Balanced(service=service, lb=lb, address=address)


def wait_balanced(tree: Tree, name: str, *, internal: bool = False) -> Balanced:
    return wait_for(
        lambda: balanced(tree, name, internal=internal),
        timeout=CONVERGE,
        what=f"Service {name} has one load balancer and its address as ingress",
    )


def listener_ports(cloud: Cloud, lb_id: str) -> set[int]:
    return {listener.protocol_port for listener in cloud.listeners_of(lb_id)}


def members(ports: tuple[int, ...], nodes: dict[str, str]) -> set[tuple[str, int]]:
    return {(address, node_port(port)) for address in nodes.values() for port in ports}


def gone(tree: Tree, name: str, lb: dict[str, Any]) -> bool:
    """Nothing of the Service's load balancer is left: not it, not its children (named
    after it), not its VIP port, not a floating IP on that port."""
    cloud = tree.cloud
    suffix = "_" + lb_name(name)
    children = [
        row
        for kind in ("listener", "pool", "healthmonitor")
        for row in cloud.rows(kind)
        if row["name"].endswith(suffix)
    ]
    ports = [p for p in cloud.rows("port") if p["id"] == lb["vip_port_id"]]
    return not (
        cloud.lbs_named(lb_name(name))
        or children
        or ports
        or cloud.floating_ips_on(lb["vip_port_id"])
    )


def test_a_load_balancer_service_gets_one_load_balancer_and_its_floating_ip_as_ingress(
    tree: Tree,
) -> None:
    tree.kube.create_service("web", ports=(80,))
    done = wait_balanced(tree, "web")
    assert done.service["metadata"]["annotations"][LB_ID] == done.lb["id"]
    assert listener_ports(tree.cloud, done.lb["id"]) == {80}
    assert tree.cloud.members_of(done.lb["id"]) == members((80,), NODE_IPS)
    ensured = tree.kube.events("EnsuredLoadBalancer")
    assert any(e["involvedObject"]["name"] == "web" for e in ensured)


def test_a_new_port_gets_a_listener_and_members_on_the_same_load_balancer(tree: Tree) -> None:
    tree.kube.create_service("ports", ports=(80,))
    before = wait_balanced(tree, "ports")
    tree.kube.patch_service("ports", {"spec": {"ports": [service_port(80), service_port(443)]}})
    wait_for(
        lambda: listener_ports(tree.cloud, before.lb["id"]) == {80, 443},
        timeout=CONVERGE,
        what="a listener on 443",
    )
    wait_for(
        lambda: tree.cloud.members_of(before.lb["id"]) == members((80, 443), NODE_IPS),
        timeout=CONVERGE,
        what="members on both node ports",
    )
    assert [lb["id"] for lb in tree.cloud.lbs_named(lb_name("ports"))] == [before.lb["id"]]


def test_annotation_changes_reach_the_listeners_and_health_monitors(tree: Tree) -> None:
    tree.kube.create_service("tuned", ports=(80, 443))
    lb_id = wait_balanced(tree, "tuned").lb["id"]
    assert not tree.cloud.monitors_of(lb_id)
    annotations = {TIMEOUT_CLIENT_DATA: "12345", HEALTH_MONITOR: "true"}
    tree.kube.patch_service("tuned", {"metadata": {"annotations": annotations}})
    wait_for(
        lambda: {li.timeout_client_data for li in tree.cloud.listeners_of(lb_id)} == {12345},
        timeout=CONVERGE,
        what="timeout_client_data 12345 on both listeners",
    )
    wait_for(
        lambda: len(tree.cloud.monitors_of(lb_id)) == 2,
        timeout=CONVERGE,
        what="a health monitor on each of the two pools",
    )


def test_members_follow_excluded_added_and_deleted_nodes(tree: Tree) -> None:
    tree.kube.create_service("backends", ports=(80,))
    lb_id = wait_balanced(tree, "backends").lb["id"]

    def members_become(nodes: dict[str, str], what: str) -> None:
        wanted = members((80,), nodes)
        wait_for(lambda: tree.cloud.members_of(lb_id) == wanted, timeout=CONVERGE, what=what)

    tree.kube.patch("/api/v1/nodes/node-0001", {"metadata": {"labels": {EXCLUDE: "true"}}})
    nodes = {k: v for k, v in NODE_IPS.items() if k != "node-0001"}
    members_become(nodes, "node-0001 excluded")
    # node-0003 has a server; its Node joins the cluster as a kubelet would register it.
    taint = {"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}
    node = {"metadata": {"name": "node-0003"}, "spec": {"taints": [taint]}}
    tree.kube.client.request("POST", "/api/v1/nodes", body=node)
    nodes["node-0003"] = "10.0.0.13"
    members_become(nodes, "node-0003 a member once it has its address")
    tree.kube.patch("/api/v1/nodes/node-0001", {"metadata": {"labels": {EXCLUDE: None}}})
    nodes["node-0001"] = NODE_IPS["node-0001"]
    members_become(nodes, "node-0001 a member again")
    tree.kube.delete("/api/v1/nodes/node-0002")
    del nodes["node-0002"]
    members_become(nodes, "deleted node-0002 no longer a member")


def test_a_deleted_service_leaves_no_load_balancer_no_floating_ip_and_goes_away(
    tree: Tree,
) -> None:
    tree.kube.create_service("doomed", ports=(80, 443))
    lb = wait_balanced(tree, "doomed").lb
    tree.kube.delete("/api/v1/namespaces/default/services/doomed")
    wait_for(
        lambda: tree.kube.service("doomed") is None and gone(tree, "doomed", lb),
        timeout=CONVERGE,
        what="Service doomed and every piece of its load balancer gone",
    )


def test_an_internal_service_is_reached_on_its_vip_until_it_is_made_external(tree: Tree) -> None:
    tree.kube.create_service("private", ports=(80,), annotations={INTERNAL: "true"})
    internal = wait_balanced(tree, "private", internal=True)
    assert internal.address.startswith("10.0.")
    assert not tree.cloud.floating_ips_on(internal.lb["vip_port_id"])
    tree.kube.patch_service("private", {"metadata": {"annotations": {INTERNAL: None}}})
    external = wait_balanced(tree, "private")
    assert external.lb["id"] == internal.lb["id"]
    assert external.address.startswith("172.24.")


def test_a_second_service_shares_the_first_ones_load_balancer(tree: Tree) -> None:
    tree.kube.create_service("owner", ports=(8080,))
    first = wait_balanced(tree, "owner")
    lb_id = first.lb["id"]
    tree.kube.create_service("guest", ports=(8081,), annotations={LB_ID: lb_id})
    wait_for(
        lambda: ingress_ips(tree.kube.service("guest")) == [first.address],
        timeout=CONVERGE,
        what="the guest Service reached at the owner's floating IP",
    )
    assert listener_ports(tree.cloud, lb_id) == {8080, 8081}
    assert not tree.cloud.lbs_named(lb_name("guest"))
    assert len(tree.cloud.floating_ips_on(first.lb["vip_port_id"])) == 1
    tree.kube.delete("/api/v1/namespaces/default/services/guest")
    wait_for(
        lambda: tree.kube.service("guest") is None and listener_ports(tree.cloud, lb_id) == {8080},
        timeout=CONVERGE,
        what="the guest gone with its listener, the owner's load balancer kept",
    )
    assert wait_balanced(tree, "owner").lb["id"] == lb_id


def test_switching_to_cluster_ip_removes_the_load_balancer_status_and_finalizer(
    tree: Tree,
) -> None:
    tree.kube.create_service("switch", ports=(80,))
    lb = wait_balanced(tree, "switch").lb
    # As the API server's own type change does, the node port goes with the type.
    port = {k: v for k, v in service_port(80).items() if k != "nodePort"}
    tree.kube.patch_service("switch", {"spec": {"type": "ClusterIP", "ports": [port]}})

    def cleaned() -> bool:
        service = tree.kube.service("switch")
        return (
            service is not None
            and not ingress_ips(service)
            and FINALIZER not in service["metadata"].get("finalizers", [])
            and gone(tree, "switch", lb)
        )

    wait_for(cleaned, timeout=CONVERGE, what="no load balancer, no ingress, no finalizer")


def test_a_load_balancer_in_error_is_replaced_by_a_new_one(tree: Tree) -> None:
    created = tree.cloud.created("loadbalancer")
    mark = tree.cloud.mark()
    tree.cloud.set_knobs(force_error_next_lbs=1)
    tree.kube.create_service("phoenix", ports=(80,))
    done = wait_balanced(tree, "phoenix")
    deleted = [
        c["path"]
        for c in tree.cloud.calls(mark)
        if c["method"] == "DELETE" and "/lbaas/loadbalancers/" in c["path"]
    ]
    assert tree.cloud.created("loadbalancer") - created == 2
    assert len(deleted) == 1
    assert done.lb["id"] not in deleted[0]


def test_two_changes_at_once_never_meet_a_pending_load_balancer(
    tree: Tree, slow_octavia: Cloud
) -> None:
    names = [f"busy-{i}" for i in range(3)]
    for name in names:
        tree.kube.create_service(name, ports=(80,))
    lbs = {name: wait_balanced(tree, name).lb["id"] for name in names}
    mark = slow_octavia.mark()
    # Two changes at once, a new listener and a new timeout: a sync writes once and comes
    # back when the load balancer is ACTIVE again, so no write meets it PENDING_UPDATE
    # (Octavia's 409; that one is still absorbed: tests/provider_lb).
    change = {
        "metadata": {"annotations": {TIMEOUT_CLIENT_DATA: "7000"}},
        "spec": {"ports": [service_port(80), service_port(443)]},
    }
    for name in names:
        tree.kube.patch_service(name, change)

    def updated(name: str) -> bool:
        listeners = slow_octavia.listeners_of(lbs[name])
        return {li.protocol_port for li in listeners} == {80, 443} and {
            li.timeout_client_data for li in listeners
        } == {7000}

    for name in names:
        wait_for(partial(updated, name), timeout=CONVERGE, what=f"{name} updated")
        assert [lb["id"] for lb in slow_octavia.lbs_named(lb_name(name))] == [lbs[name]]
    assert [c for c in slow_octavia.calls(mark) if c["status"] == 409] == []


def test_a_service_worker_killed_mid_rollout_loses_and_duplicates_nothing(
    tree: Tree, slow_octavia: Cloud
) -> None:
    names = [f"bulk-{i:02d}" for i in range(30)]
    lbs_before = slow_octavia.created("loadbalancer")
    fips_before = slow_octavia.created("floatingip")
    for name in names:
        tree.kube.create_service(name, ports=(80,))

    def ten_with_ingress() -> int:
        listed = tree.kube.items("/api/v1/namespaces/default/services")
        count = sum(1 for s in listed if s["metadata"]["name"] in names and ingress_ips(s))
        return count if count >= 10 else 0

    count_at_kill = wait_for(ten_with_ingress, timeout=CONVERGE, what="10 Services with ingress")
    pid = kill_program(tree.world, SERVICE_WORKER)
    for name in names:
        done = wait_balanced(tree, name)
        assert len(slow_octavia.floating_ips_on(done.lb["vip_port_id"])) == 1
    assert count_at_kill < len(names), "the kill came after the rollout"
    assert slow_octavia.created("loadbalancer") - lbs_before == len(names)
    assert slow_octavia.created("floatingip") - fips_before == len(names)
    assert not [f for f in slow_octavia.rows("floatingip") if not f["port_id"]]
    assert int(supervisorctl(tree.world, "pid", SERVICE_WORKER).strip()) != pid


def test_deleting_every_service_leaves_the_cloud_as_it_was_seeded(seeded: Seeded) -> None:
    tree = seeded.tree
    for service in tree.kube.items("/api/v1/namespaces/default/services"):
        if service["spec"]["type"] == "LoadBalancer":
            tree.kube.delete(f"/api/v1/namespaces/default/services/{service['metadata']['name']}")

    def clean() -> dict[str, int] | None:
        left = tree.kube.items("/api/v1/namespaces/default/services")
        holding = [s for s in left if FINALIZER in s["metadata"].get("finalizers", [])]
        inventory = tree.cloud.inventory()
        if holding or any(inventory[k] != seeded.inventory[k] for k in LB_KINDS):
            return None
        return inventory

    assert (
        wait_for(clean, timeout=CONVERGE * 2, what="every load balancer gone") == seeded.inventory
    )
