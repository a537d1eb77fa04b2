"""One monitor period over 300 NotReady nodes against the simulated Nova, with a page of 50
servers: one paged listing, and a GET only for the nodes whose server it does not show,
counted in the simulator's call log (upstream: a GET or two per node)."""

from __future__ import annotations

from collections import Counter

import pytest

from pyccm.protocol.messages import Action, DeleteNode, PatchNode, Topic
from pyccm.protocol.views import Node
from pyccm.workers.lifecycle.controller import (
    SHUTDOWN_TAINT,
    LifecycleController,
    LifecycleSettings,
)
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.openstack.calllog import Seq
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.nodes import node
from tests.support.openstack import SEED_NODES, MakeCloud

NODES = 300
PAGE = 50
GONE = ("node-0010", "node-0200")
STOPPED = ("node-0030", "node-0040", "node-0299")


def not_ready(name: str, server_id: str) -> Node:
    return node(name, 1, f"openstack:///{server_id}", ready="Unknown")


def one_period(controller: LifecycleController) -> dict[str, tuple[Action, ...]]:
    """The monitor once, then a sync of every key it queued (the runner's sync threads)."""
    keys: list[str] = []
    (monitor,) = controller.periodics(keys.append)
    monitor.run()
    return {key: controller.sync(key) for key in keys}


def nova_calls(sim: OpenStackSimHandle, mark: Seq) -> Counter[str]:
    calls: Counter[str] = Counter()
    for call in sim.calls(since=mark):
        if call.service != "compute":
            continue
        path = call.path.split("?")[0]
        if path.startswith("/compute/v2.1/servers/") and path != "/compute/v2.1/servers/detail":
            path = "/compute/v2.1/servers/{id}"
        calls[f"{call.method} {path}"] += 1
    return calls


@pytest.fixture
def outage(sim: OpenStackSimHandle, make_cloud: MakeCloud) -> LifecycleController:
    """300 servers and their nodes, every node NotReady; two servers deleted since, three
    shut down; Nova pages at 50."""
    for index in range(SEED_NODES, NODES):
        sim.add_server(index)
    replica = Replica()
    for server in sim.resources("server"):
        node = not_ready(server["name"], server["id"])
        replica.apply(Topic.NODE, node.name, node)
    for name in GONE:
        sim.delete_server(name)
    for name in STOPPED:
        sim.set_server_status(name, "SHUTOFF")
    sim.set_knobs(nova_page_limit=PAGE)
    instances = make_cloud().cloud.instances()
    assert instances is not None
    return LifecycleController(replica=replica, instances=instances, settings=LifecycleSettings())


def test_one_paged_listing_and_a_get_per_vanished_server(
    sim: OpenStackSimHandle, outage: LifecycleController
) -> None:
    mark = sim.mark()

    actions = one_period(outage)

    calls = nova_calls(sim, mark)
    # 298 servers in pages of 50; one GET for each of the two nodes the listing lacks.
    assert calls["GET /compute/v2.1/servers/detail"] == 6
    assert calls["GET /compute/v2.1/servers/{id}"] == len(GONE)
    assert sum(calls.values()) <= 10, calls
    deleted = {
        name for name, done in actions.items() if any(isinstance(a, DeleteNode) for a in done)
    }
    assert deleted == set(GONE)
    tainted = {
        name
        for name, done in actions.items()
        if PatchNode(name=name, add_taints=(SHUTDOWN_TAINT,)) in done
    }
    assert tainted == set(STOPPED)
    assert sum(len(done) for done in actions.values()) == 2 * len(GONE) + len(STOPPED)


def test_a_listing_nova_fails_deletes_nothing_and_probes_no_node(
    sim: OpenStackSimHandle, outage: LifecycleController
) -> None:
    sim.fail_next("compute", 500, count=3)  # the first try and both repeats of the read
    mark = sim.mark()

    actions = one_period(outage)

    assert all(done == () for done in actions.values())
    assert nova_calls(sim, mark) == {"GET /compute/v2.1/servers/detail": 3}
