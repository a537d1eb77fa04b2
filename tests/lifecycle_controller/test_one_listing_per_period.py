"""The monitor asks the cloud about every NotReady node with one listing per period; a node
the listing does not show is probed alone before anything is deleted (upstream's "false
only when definitely gone")."""

from __future__ import annotations

from pyccm.protocol.messages import Action, DeleteNode, PatchNode, Topic
from pyccm.protocol.views import Node, NodeCondition, NodeSpec, NodeStatus, OwnerMeta
from pyccm.provider.errors import CloudError
from pyccm.workers.lifecycle.controller import (
    SHUTDOWN_TAINT,
    LifecycleController,
    LifecycleSettings,
)
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.fake_provider import PROVIDER_ID_PREFIX, FakeCloud, stable_id
from tests.support import nodes as builders


def node(name: str, *, ready: str = "False", provider_id: str | None = None) -> Node:
    pid = PROVIDER_ID_PREFIX + stable_id("server", name) if provider_id is None else provider_id
    return builders.node(name, 1, pid, ready=ready)


class Period:
    """A lifecycle controller over a replica; `run()` is one monitor period as the runner
    runs it: the monitor, then a sync of every key it queued."""

    def __init__(self, cloud: FakeCloud, nodes: list[Node]) -> None:
        self.cloud = cloud
        self.replica = Replica()
        for item in nodes:
            self.replica.apply(Topic.NODE, item.name, item)
        instances = cloud.instances()
        assert instances is not None
        self.controller = LifecycleController(
            replica=self.replica, instances=instances, settings=LifecycleSettings()
        )

    def run(self) -> dict[str, tuple[Action, ...]]:
        keys: list[str] = []
        (monitor,) = self.controller.periodics(keys.append)
        monitor.run()
        return {key: self.controller.sync(key) for key in keys}


def cloud_with(*names: str, shutdown: tuple[str, ...] = ()) -> FakeCloud:
    cloud = FakeCloud()
    for name in names:
        cloud.add_server(name, internal_ip="10.0.0.1", shutdown=name in shutdown)
    return cloud


def probes(cloud: FakeCloud) -> list[str]:
    return cloud.calls_of("instance_exists") + cloud.calls_of("instance_shutdown")


def test_one_listing_answers_for_every_not_ready_node() -> None:
    names = [f"n{i}" for i in range(50)]
    cloud = cloud_with(*names, shutdown=("n7",))
    period = Period(cloud, [node(name) for name in names])

    actions = period.run()

    assert cloud.calls_of("instance_listing") == ["50 nodes"]
    assert probes(cloud) == []
    assert actions["n7"] == (PatchNode(name="n7", add_taints=(SHUTDOWN_TAINT,)),)
    assert sum(len(a) for a in actions.values()) == 1


def test_ready_nodes_cost_no_listing() -> None:
    cloud = cloud_with("n1", "n2")
    period = Period(cloud, [node("n1", ready="True"), node("n2", ready="True")])

    period.run()

    assert cloud.calls == []


def test_a_node_missing_from_the_listing_is_confirmed_gone_before_it_is_deleted() -> None:
    cloud = cloud_with("n1", "n2")
    period = Period(cloud, [node("n1"), node("n2"), node("gone")])

    actions = period.run()

    assert probes(cloud) == ["gone"]  # one GET, for that node only
    assert isinstance(actions["gone"][1], DeleteNode)
    assert actions["n1"] == actions["n2"] == ()


def test_a_server_created_after_the_listing_is_found_by_its_own_probe() -> None:
    cloud = cloud_with("n1")
    period = Period(cloud, [node("n1"), node("late")])
    keys: list[str] = []
    (monitor,) = period.controller.periodics(keys.append)
    monitor.run()
    cloud.add_server("late", internal_ip="10.0.0.2")  # between the listing and the sync

    assert period.controller.sync("late") == ()
    assert probes(cloud) == ["late", "late"]


def test_a_node_whose_provider_id_changed_since_the_listing_is_probed() -> None:
    cloud = cloud_with("n1")
    period = Period(cloud, [node("n1", provider_id="")])
    keys: list[str] = []
    (monitor,) = period.controller.periodics(keys.append)
    monitor.run()
    moved = node("n1", provider_id=PROVIDER_ID_PREFIX + "another-server")
    period.replica.apply(Topic.NODE, "n1", moved)

    _, delete = period.controller.sync("n1")

    assert isinstance(delete, DeleteNode)
    assert probes(cloud) == ["n1"]


def test_a_listing_the_cloud_fails_to_answer_skips_the_round_without_probes() -> None:
    cloud = cloud_with("n1")
    cloud.fail_next("instance_listing", CloudError("nova is down", status=503))
    period = Period(cloud, [node("n1"), node("gone")])

    actions = period.run()

    assert all(a == () for a in actions.values())
    assert probes(cloud) == []


def test_a_listing_the_cloud_refuses_leaves_each_node_to_its_own_probe() -> None:
    cloud = cloud_with("n1")
    refused = CloudError("policy does not allow os_compute_api:servers:detail", retryable=False)
    cloud.fail_next("instance_listing", refused)
    period = Period(cloud, [node("n1"), node("gone")])

    actions = period.run()

    assert isinstance(actions["gone"][1], DeleteNode)
    assert actions["n1"] == ()
    assert sorted(set(probes(cloud))) == ["gone", "n1"]


def test_the_monitor_queues_only_nodes_with_something_to_do() -> None:
    tainted = Node(
        metadata=OwnerMeta(name="back", uid="uid-back"),
        spec=NodeSpec(provider_id=PROVIDER_ID_PREFIX + "x", taints=(SHUTDOWN_TAINT,)),
        status=NodeStatus(conditions=(NodeCondition(type="Ready", status="True"),)),
    )
    nodes = [node(f"ready-{i}", ready="True") for i in range(100)]
    period = Period(cloud_with(), [*nodes, node("down", ready="Unknown"), tainted])
    keys: list[str] = []
    (monitor,) = period.controller.periodics(keys.append)
    monitor.run()
    assert sorted(keys) == ["back", "down"]
