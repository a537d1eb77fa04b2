"""The route worker in the real process tree against both simulators: every node's pod
CIDR gets a route on the cloud router with the node's InternalIP as next hop, and the
routes follow the nodes.

A node's address changes the way it does in a real cloud: its server's port is replaced
by one with another fixed IP. Patching `status.addresses` through the Kubernetes API
would not stay: the node controller rewrites the addresses from the cloud on its next
refresh, so the route would flip back and forth. With the cloud changed, the node
controller (refreshing every second here, `--node-status-update-frequency=1s`) writes the
new InternalIP and the route worker follows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from tests.support.tree import Tree, initialized, internal_ip, running_tree
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

NODES = ["node-0000", "node-0001", "node-0002"]
CONVERGE = 60.0
NEW_ADDRESS = "10.0.0.200"


@pytest.fixture(scope="module")
def tree(request: pytest.FixtureRequest) -> Iterator[Tree]:
    with running_tree(request, nodes=3, worker_args="--node-status-update-frequency=1s") as tree:
        wait_for(lambda: initialized(tree.kube, NODES), timeout=CONVERGE, what="nodes initialized")
        yield tree


def pod_cidr(tree: Tree, name: str) -> str:
    node = tree.kube.node(name)
    assert node is not None
    cidr: str = node["spec"]["podCIDR"]
    return cidr


def wanted_routes(tree: Tree) -> set[tuple[str, str]]:
    """(pod CIDR, InternalIP) of every node in the cluster now."""
    nodes = tree.kube.items("/api/v1/nodes")
    return {(n["spec"]["podCIDR"], internal_ip(n)) for n in nodes}


def network_unavailable(tree: Tree, name: str) -> dict[str, Any]:
    node = tree.kube.node(name)
    conditions = [] if node is None else node["status"].get("conditions", [])
    found: dict[str, Any] = next((c for c in conditions if c["type"] == "NetworkUnavailable"), {})
    return found


def test_every_node_gets_a_route_to_its_pod_cidr_through_its_internal_ip(tree: Tree) -> None:
    expected = {
        ("10.64.0.0/24", "10.0.0.10"),
        ("10.64.1.0/24", "10.0.0.11"),
        ("10.64.2.0/24", "10.0.0.12"),
    }
    assert wanted_routes(tree) == expected
    wait_for(lambda: tree.cloud.routes() == expected, timeout=CONVERGE, what="three routes")
    for name in NODES:
        condition = wait_for(
            partial(network_unavailable, tree, name),
            timeout=CONVERGE,
            what=f"{name} has a NetworkUnavailable condition",
        )
        assert (condition["status"], condition["reason"]) == ("False", "RouteCreated")


def replace_server_port(tree: Tree, server_name: str, address: str) -> None:
    """Give the server a new port with `address` and remove its old one, through Neutron."""
    api = tree.cloud.api()
    server = api.compute.find_server(server_name, ignore_missing=False)
    (old,) = list(api.network.ports(device_id=server.id))
    api.network.create_port(
        network_id=old.network_id,
        fixed_ips=[{"subnet_id": old.fixed_ips[0]["subnet_id"], "ip_address": address}],
        device_id=server.id,
        device_owner=old.device_owner,
    )
    api.network.delete_port(old.id)


def test_a_node_whose_address_changes_gets_its_route_replaced(tree: Tree) -> None:
    cidr = pod_cidr(tree, "node-0002")
    wait_for(lambda: (cidr, "10.0.0.12") in tree.cloud.routes(), timeout=CONVERGE, what="old route")
    replace_server_port(tree, "node-0002", NEW_ADDRESS)
    wait_for(
        lambda: internal_ip(tree.kube.node("node-0002")) == NEW_ADDRESS,
        timeout=CONVERGE,
        what="the node controller writes the new InternalIP",
    )
    wait_for(
        lambda: tree.cloud.routes() == wanted_routes(tree),
        timeout=CONVERGE,
        what=f"{cidr} routed through {NEW_ADDRESS} only",
    )
    assert (cidr, NEW_ADDRESS) in tree.cloud.routes()
    # The new next hop may forward the pod CIDR: the route worker added the address pair.
    (port,) = [
        p
        for p in tree.cloud.rows("port")
        if any(ip["ip_address"] == NEW_ADDRESS for ip in p["fixed_ips"])
    ]
    assert {pair["ip_address"] for pair in port["allowed_address_pairs"]} == {cidr}


def test_a_deleted_node_loses_its_route_and_the_others_stay(tree: Tree) -> None:
    cidr = pod_cidr(tree, "node-0001")
    wait_for(lambda: (cidr, "10.0.0.11") in tree.cloud.routes(), timeout=CONVERGE, what="route")
    tree.kube.delete("/api/v1/nodes/node-0001")

    def only_the_others() -> bool:
        routes = tree.cloud.routes()
        return cidr not in {destination for destination, _ in routes} and routes == wanted_routes(
            tree
        )

    wait_for(only_the_others, timeout=CONVERGE, what=f"no route for {cidr}")
    assert len(tree.cloud.routes()) == 2
