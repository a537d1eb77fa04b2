"""Two of docs/features.md#beyond-upstream in the real process tree against both simulators.

* An `externalTrafficPolicy: Local` Service gets an HTTP health monitor on its
  `healthCheckNodePort` without asking (kubernetes/cloud-provider-openstack#2866); with its
  annotation `enable-health-monitor: "false"` it gets none and one Warning event, however many syncs
  follow; an ETP Cluster Service gets no monitor, as before.
* A label change on a Node moves it into or out of the pools of exactly the Services whose
  `node-selector` it now matches or no longer matches (kubernetes/kubernetes#133165): one
  member update per such Service, no other write to the cloud.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.tree import (
    FINALIZER,
    LB_ID,
    Tree,
    ingress_ips,
    initialized,
    node_port,
    running_tree,
    service_port,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

NODES = ["node-0000", "node-0001", "node-0002"]
NODE_IPS = {"node-0000": "10.0.0.10", "node-0001": "10.0.0.11", "node-0002": "10.0.0.12"}
P = "loadbalancer.openstack.org/"
HEALTH_CHECK_PORT = 32100
NO_MONITOR = "LoadBalancerWithoutHealthMonitor"
CONVERGE = 60.0


@pytest.fixture(scope="module")
def tree(request: pytest.FixtureRequest) -> Iterator[Tree]:
    with running_tree(request, nodes=3) as tree:
        wait_for(lambda: initialized(tree.kube, NODES), timeout=CONVERGE, what="nodes initialized")
        yield tree


def create(
    tree: Tree,
    name: str,
    *,
    annotations: dict[str, str] | None = None,
    ports: tuple[int, ...] = (80, 443),
    **spec: Any,
) -> None:
    body = {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"type": "LoadBalancer", "ports": [service_port(p) for p in ports], **spec},
    }
    tree.kube.client.request("POST", "/api/v1/namespaces/default/services", body=body)


def balanced(tree: Tree, name: str) -> dict[str, Any]:
    """The Service's ACTIVE load balancer, once its address is the ingress and the
    controller's last write (the id annotation) landed."""

    def probe() -> dict[str, Any] | None:
        service = tree.kube.service(name)
        lbs = tree.cloud.lbs_named(f"kube_service_demo_default_{name}")
        if service is None or len(lbs) != 1 or lbs[0]["provisioning_status"] != "ACTIVE":
            return None
        meta = service["metadata"]
        if not ingress_ips(service) or FINALIZER not in meta.get("finalizers", []):
            return None
        lb: dict[str, Any] = lbs[0]
        return lb if meta.get("annotations", {}).get(LB_ID) == lb["id"] else None

    return wait_for(probe, timeout=CONVERGE, what=f"Service {name} balanced")


def events_about(tree: Tree, reason: str, name: str) -> list[dict[str, Any]]:
    return [e for e in tree.kube.events(reason) if e["involvedObject"]["name"] == name]


def member_addresses(tree: Tree, lb_id: str) -> set[str]:
    return {address for address, _ in tree.cloud.members_of(lb_id)}


def test_a_local_service_gets_http_monitors_on_its_health_check_port(tree: Tree) -> None:
    create(tree, "local", externalTrafficPolicy="Local", healthCheckNodePort=HEALTH_CHECK_PORT)
    lb_id = balanced(tree, "local")["id"]

    monitors = tree.cloud.monitors_of(lb_id)
    assert (
        sorted((m.type, m.url_path, m.http_method) for m in monitors)
        == [("HTTP", "/healthz", "GET")] * 2
    )
    members = [m for pool in tree.cloud.pools_of(lb_id) for m in pool_members(tree, pool.id)]
    assert {m.monitor_port for m in members} == {HEALTH_CHECK_PORT}
    assert events_about(tree, NO_MONITOR, "local") == []


def pool_members(tree: Tree, pool_id: str) -> list[Any]:
    return list(tree.cloud.api().load_balancer.members(pool_id))


def test_a_local_service_without_its_monitor_gets_one_warning_however_many_syncs(
    tree: Tree,
) -> None:
    create(
        tree,
        "unmonitored",
        annotations={P + "enable-health-monitor": "false"},
        externalTrafficPolicy="Local",
        healthCheckNodePort=HEALTH_CHECK_PORT + 1,
    )
    lb_id = balanced(tree, "unmonitored")["id"]
    assert tree.cloud.monitors_of(lb_id) == []
    (warning,) = wait_for(
        lambda: events_about(tree, NO_MONITOR, "unmonitored"),
        timeout=CONVERGE,
        what="the Warning",
    )
    assert warning["type"] == "Warning"
    assert "traffic will reach nodes without local endpoints" in warning["message"]

    # Another ensure (an annotation change) says it again: still one Event.
    tree.kube.patch_service(
        "unmonitored", {"metadata": {"annotations": {P + "timeout-client-data": "4321"}}}
    )
    wait_for(
        lambda: {li.timeout_client_data for li in tree.cloud.listeners_of(lb_id)} == {4321},
        timeout=CONVERGE,
        what="the annotation change applied",
    )
    wait_for(
        lambda: [e.get("count", 1) for e in events_about(tree, NO_MONITOR, "unmonitored")] == [2],
        timeout=CONVERGE,
        what="the second ensure's Warning folded into the first Event",
    )
    assert tree.cloud.monitors_of(lb_id) == []


def test_a_cluster_policy_service_gets_no_monitor(tree: Tree) -> None:
    create(tree, "cluster")
    lb_id = balanced(tree, "cluster")["id"]
    assert tree.cloud.monitors_of(lb_id) == []
    members = [m for pool in tree.cloud.pools_of(lb_id) for m in pool_members(tree, pool.id)]
    assert {m.monitor_port for m in members} == {None}
    assert events_about(tree, NO_MONITOR, "cluster") == []


def label(tree: Tree, node: str, **labels: str | None) -> None:
    tree.kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": labels}})


def test_a_relabelled_node_moves_between_the_selecting_services_in_one_sync_each(
    tree: Tree,
) -> None:
    for node, pool in (("node-0000", "blue"), ("node-0001", "blue"), ("node-0002", "green")):
        label(tree, node, pool=pool)
    for pool in ("blue", "green"):
        create(tree, pool, ports=(80,), annotations={P + "node-selector": f"pool={pool}"})
    blue, green = balanced(tree, "blue")["id"], balanced(tree, "green")["id"]
    ip = NODE_IPS
    wait_for(
        lambda: member_addresses(tree, blue) == {ip["node-0000"], ip["node-0001"]},
        timeout=CONVERGE,
        what="blue's members",
    )
    assert member_addresses(tree, green) == {ip["node-0002"]}
    mark = tree.cloud.mark()

    label(tree, "node-0001", pool="green")

    wait_for(
        lambda: member_addresses(tree, green) == {ip["node-0001"], ip["node-0002"]},
        timeout=CONVERGE,
        what="node-0001 in green's pool",
    )
    wait_for(
        lambda: member_addresses(tree, blue) == {ip["node-0000"]},
        timeout=CONVERGE,
        what="node-0001 out of blue's pool",
    )
    pools = {pool.id for lb in (blue, green) for pool in tree.cloud.pools_of(lb)}
    writes = [
        (c["method"], c["path"].split("?")[0])
        for c in tree.cloud.calls(mark)
        if c["method"] in ("POST", "PUT", "PATCH", "DELETE") and c["service"] != "identity"
    ]
    # One batch member update per Service whose selection changed; nothing else written.
    assert sorted(writes) == sorted(
        ("PUT", f"/load-balancer/v2.0/lbaas/pools/{pool}/members") for pool in pools
    )
    assert {port for _, port in tree.cloud.members_of(green)} == {node_port(80)}
