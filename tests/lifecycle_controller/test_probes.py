"""cloud-node-lifecycle decisions against the fake cloud (pyccm/workers/lifecycle/README.md)."""

from __future__ import annotations

from pyccm.protocol.messages import (
    Action,
    DeleteNode,
    PatchNode,
    RecordEvent,
    Result,
    ResultId,
    SessionId,
    Topic,
    decode,
    encode,
)
from pyccm.protocol.views import Node, OwnerMeta, Taint
from pyccm.provider.errors import CloudError
from pyccm.workers.lifecycle.controller import (
    SHUTDOWN_TAINT,
    LifecycleController,
    LifecycleSettings,
)
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.fake_provider import FakeCloud
from tests.support.nodes import node


def make_node(name: str, *, ready: str, taints: tuple[Taint, ...] = ()) -> Node:
    return node(name, ready=ready, taints=taints)


def sync(node: Node, cloud: FakeCloud) -> tuple[Action, ...]:
    replica = Replica()
    replica.apply(Topic.NODE, node.name, node)
    instances = cloud.instances()
    assert instances is not None
    return LifecycleController(
        replica=replica, instances=instances, settings=LifecycleSettings()
    ).sync(node.name)


def test_a_ready_node_costs_no_cloud_call() -> None:
    cloud = FakeCloud()
    assert sync(make_node("n1", ready="True"), cloud) == ()
    assert cloud.calls == []


def test_a_ready_node_loses_its_shutdown_taint() -> None:
    actions = sync(make_node("n1", ready="True", taints=(SHUTDOWN_TAINT,)), FakeCloud())
    assert actions == (
        PatchNode(name="n1", remove_taints=((SHUTDOWN_TAINT.key, SHUTDOWN_TAINT.effect),)),
    )


def test_a_not_ready_node_whose_server_is_gone_is_deleted_with_an_event() -> None:
    event, delete = sync(make_node("gone", ready="Unknown"), FakeCloud())
    assert isinstance(event, RecordEvent)
    assert event.reason == "DeletingNode"
    assert isinstance(delete, DeleteNode)
    assert (delete.name, delete.uid) == ("gone", "uid-gone")


def test_a_failed_delete_would_be_reported_as_a_warning_on_the_node() -> None:
    _, delete = sync(make_node("gone", ready="Unknown"), FakeCloud())
    assert isinstance(delete, DeleteNode)
    warning = delete.failed_event
    assert warning is not None
    assert (warning.type, warning.reason) == ("Warning", "DeletingNodeFailed")
    assert warning.message == "Failed deleting node gone"
    assert (warning.regarding.kind, warning.regarding.uid) == ("Node", "uid-gone")
    assert warning.component == "cloud-node-lifecycle-controller"


def test_the_delete_and_its_warning_cross_the_bus_intact() -> None:
    actions = sync(make_node("gone", ready="Unknown"), FakeCloud())
    result = Result(
        session=SessionId("s"),
        worker="cloud-node-lifecycle",
        id=ResultId(1),
        key="gone",
        actions=actions,
    )
    assert decode(encode(result)) == result


def test_a_shut_down_server_taints_its_node_once() -> None:
    cloud = FakeCloud()
    cloud.add_server("n1", internal_ip="10.0.0.10", shutdown=True)
    assert sync(make_node("n1", ready="False"), cloud) == (
        PatchNode(name="n1", add_taints=(SHUTDOWN_TAINT,)),
    )
    assert sync(make_node("n1", ready="False", taints=(SHUTDOWN_TAINT,)), cloud) == ()


def test_a_cloud_error_never_deletes() -> None:
    cloud = FakeCloud()
    cloud.fail_next("instance_exists", CloudError("keystone down", status=503))
    assert sync(make_node("n1", ready="False"), cloud) == ()


def test_a_missing_ready_condition_counts_as_not_ready() -> None:
    node = Node(metadata=OwnerMeta(name="n1", uid="u", resource_version="1"))
    replica = Replica()
    replica.apply(Topic.NODE, "n1", node)
    instances = FakeCloud().instances()
    assert instances is not None
    actions = LifecycleController(
        replica=replica, instances=instances, settings=LifecycleSettings()
    ).sync("n1")
    assert isinstance(actions[1], DeleteNode)
