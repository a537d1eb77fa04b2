"""Initializing (and refreshing the addresses of) many nodes at once against the simulated
Nova and Neutron: the cloud calls per node, counted in the simulator's call log (upstream:
a server lookup and a port list per node, and a flavor GET), and the same patches as each
node's own lookup gives."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pyccm.protocol.messages import Action, PatchNode, PatchNodeStatus, RecordEvent, Topic
from pyccm.protocol.views import Node, Taint
from pyccm.provider.openstack.instances.nova import PORT_LISTS_AT_ONCE
from pyccm.workers.node.controller import (
    UNINITIALIZED_TAINT,
    NodeController,
    NodeSettings,
    initialize,
)
from pyccm.workers.runtime.controller import SyncFailed
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.openstack.calllog import Seq
from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node
from tests.node_controller.syncs import sync_until_answered
from tests.provider.test_instances_against_the_simulator import resource_calls
from tests.support.nodes import node
from tests.support.openstack import SMALL_SEED, MakeCloud

NODES = 300
THREADS = 20
MISSING = "node-0300"  # a kubelet registered it, but it has no server
UNINITIALIZED = Taint(key=UNINITIALIZED_TAINT, value="true", effect="NoSchedule")


@pytest.fixture
def openstack_seed() -> dict[str, Any]:
    return SMALL_SEED


def uninitialized(name: str) -> Node:
    return node(name, 1, taints=(UNINITIALIZED,), addresses=(("Hostname", name),))


def calls_by_path(sim: OpenStackSimHandle, mark: Seq) -> Counter[str]:
    """Nova and Neutron calls since `mark`, Keystone and version discovery apart."""
    return Counter(f"{method} {path}" for method, path in resource_calls(sim, mark))


def sync_all(controller: NodeController, names: list[str]) -> dict[str, Any]:
    """Every key synced once from `THREADS` threads, as the worker's sync threads do."""

    def sync(name: str) -> tuple[Action, ...] | SyncFailed:
        try:
            return controller.sync(name)
        except SyncFailed as failed:
            return failed

    with ThreadPoolExecutor(THREADS) as threads:
        return dict(zip(names, threads.map(sync, names), strict=True))


def test_three_hundred_nodes_take_a_handful_of_calls_not_two_each(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    for index in range(4, NODES):
        sim.add_server(index)
    replica = Replica()
    names = [f"node-{i:04d}" for i in range(NODES)] + [MISSING]
    for name in names:
        replica.apply(Topic.NODE, name, uninitialized(name))
    instances = make_cloud().cloud.instances()
    assert instances is not None
    controller = NodeController(replica=replica, instances=instances, settings=NodeSettings())

    mark = sim.mark()
    results: dict[str, Any] = dict(sync_until_answered(controller, names, threads=THREADS))
    calls = calls_by_path(sim, mark)

    # One page of servers, the flavor's name once (Nova before 2.47), ports 50 servers a
    # call, and one lookup by name for the node the listing lacks: 9 calls for 301 nodes,
    # where each node's own lookups cost 2.
    assert calls == {
        "GET /compute/v2.1/servers/detail": 2,
        "GET /compute/v2.1/flavors/3": 1,
        "GET /network/v2.0/ports": NODES // 50,
    }
    # Each node initialized as its own lookup would have it; the one without a server
    # gets its Warning from its own lookup.
    missing = results.pop(MISSING)
    assert isinstance(missing, SyncFailed)
    (warning,) = missing.actions
    assert isinstance(warning, RecordEvent)
    assert warning.reason == "FailedToInitializeNode"
    assert "no server found" in warning.message
    for name in ("node-0000", "node-0150", "node-0299"):
        alone = instances.instance_metadata(node=replica.node(name) or uninitialized(name))
        expected = initialize(uninitialized(name), alone)
        assert results[name][: len(expected)] == expected
    assert all(isinstance(done[0], PatchNode) and done[0].provider_id for done in results.values())


def test_the_address_refresh_of_three_hundred_nodes_takes_a_handful_of_calls(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    for index in range(4, NODES):
        sim.add_server(index)
    servers = {str(s["name"]): str(s["id"]) for s in sim.resources("server")}
    replica = Replica()
    for name, server in servers.items():
        # Initialized, with an address the cloud no longer gives it.
        stale = node(name, 1, f"openstack:///{server}", addresses=(("InternalIP", "192.0.2.1"),))
        replica.apply(Topic.NODE, name, stale)
    instances = make_cloud().cloud.instances()
    assert instances is not None
    controller = NodeController(replica=replica, instances=instances, settings=NodeSettings())
    keys: list[str] = []
    (refresh,) = controller.periodics(keys.append)

    mark = sim.mark()
    refresh.run()
    results = sync_all(controller, keys)

    assert calls_by_path(sim, mark) == {
        "GET /compute/v2.1/servers/detail": 1,
        "GET /compute/v2.1/flavors/3": 1,
        "GET /network/v2.0/ports": NODES // 50,
    }
    assert len(results) == NODES
    for key, done in results.items():
        (status,) = done
        assert isinstance(status, PatchNodeStatus)
        assert status.addresses is not None
        assert status.addresses[0].address == seed_node(int(key[-4:])).internal_ip


def test_each_chunk_of_answers_lands_while_the_listing_goes_on(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    # Nodes with a providerID, pages of 50 servers, every call 0.2 s: the first chunk's
    # answers come after its page, its port list and the flavor, while later pages are
    # still to be asked.
    for index in range(4, NODES):
        sim.add_server(index)
    sim.set_knobs(nova_page_limit=50, latency_ms=200)
    nodes = [
        node(str(s["name"]), 1, f"openstack:///{s['id']}", taints=(UNINITIALIZED,))
        for s in sim.resources("server")
    ]
    instances = make_cloud().cloud.instances()
    assert instances is not None
    mark = sim.mark()
    chunks: list[tuple[int, dict[str, Any]]] = []

    def deliver(answers: dict[str, Any]) -> None:
        pages = sum(path.endswith("/servers/detail") for _, path in resource_calls(sim, mark))
        chunks.append((pages, dict(answers)))

    answers = instances.instances_metadata(nodes=nodes, deliver=deliver)

    # The same calls as one answer for the whole batch: 7 pages (the last one empty), the
    # flavor once, one port list per 50 servers.
    assert calls_by_path(sim, mark) == {
        "GET /compute/v2.1/servers/detail": NODES // 50 + 1,
        "GET /compute/v2.1/flavors/3": 1,
        "GET /network/v2.0/ports": NODES // 50,
    }
    assert sorted(len(chunk) for _, chunk in chunks) == [50] * (NODES // 50)
    assert min(pages for pages, _ in chunks) < NODES // 50 + 1
    # Every node answered once, as the whole batch answers it and as its own lookup would.
    delivered = {name: metadata for _, chunk in chunks for name, metadata in chunk.items()}
    assert delivered == answers
    assert len(answers) == NODES
    for each in (nodes[0], nodes[-1]):
        assert answers[each.name] == instances.instance_metadata(node=each)


def test_nodes_found_by_name_get_answers_as_each_port_list_lands(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    # Without a providerID a name is placed once the whole listing is in (it must be held
    # by one server only); then 10 port lists, 8 at a time: the first answers come before
    # the last two lists are asked.
    many = 500
    for index in range(4, many):
        sim.add_server(index)
    nodes = [uninitialized(f"node-{i:04d}") for i in range(many)]
    instances = make_cloud().cloud.instances()
    assert instances is not None
    mark = sim.mark()
    port_lists_at_delivery: list[int] = []

    def deliver(answers: dict[str, Any]) -> None:
        calls = resource_calls(sim, mark)
        port_lists_at_delivery.append(sum(path.endswith("/ports") for _, path in calls))

    answers = instances.instances_metadata(nodes=nodes, deliver=deliver)

    assert calls_by_path(sim, mark) == {
        "GET /compute/v2.1/servers/detail": 1,
        "GET /compute/v2.1/flavors/3": 1,
        "GET /network/v2.0/ports": many // 50,
    }
    assert len(port_lists_at_delivery) == many // 50
    assert min(port_lists_at_delivery) <= PORT_LISTS_AT_ONCE < many // 50
    assert len(answers) == many
