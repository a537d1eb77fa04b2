"""The nodes waiting to be initialized are looked up together (workers/node/batch.py), on
the fake cloud: when a batch is made, what each node then takes from it, and what is
looked up alone (the calls the fake records)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from pyccm.protocol.messages import PatchNode, Topic
from pyccm.protocol.views import Node, Taint
from pyccm.provider.errors import CloudError
from pyccm.provider.interface import InstanceMetadata
from pyccm.workers.node.batch import BATCH_MIN, MAX_AGE, MetadataBatch
from pyccm.workers.node.controller import UNINITIALIZED_TAINT, NodeController, NodeSettings
from pyccm.workers.runtime.controller import SyncFailed
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.fake_provider import PROVIDER_ID_PREFIX, FakeCloud, stable_id
from tests.node_controller.syncs import sync_until_answered
from tests.support.nodes import node

UNINITIALIZED = Taint(key=UNINITIALIZED_TAINT, value="true", effect="NoSchedule")
NODES = BATCH_MIN + 5
Deliver = Callable[[dict[str, InstanceMetadata]], None]


def waiting(name: str, provider_id: str = "") -> Node:
    return node(name, 1, provider_id, taints=(UNINITIALIZED,))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cloud() -> FakeCloud:
    cloud = FakeCloud()
    for index in range(NODES):
        cloud.add_server(f"n{index}", internal_ip=f"10.0.0.{index + 10}")
    return cloud


def replica_of(nodes: list[Node]) -> Replica:
    replica = Replica()
    for each in nodes:
        replica.apply(Topic.NODE, each.name, each)
    return replica


def controller(cloud: FakeCloud, nodes: list[Node]) -> NodeController:
    instances = cloud.instances()
    assert instances is not None
    replica = replica_of(nodes)
    return NodeController(replica=replica, instances=instances, settings=NodeSettings())


def batch(cloud: FakeCloud, nodes: list[Node], clock: Clock) -> MetadataBatch:
    instances = cloud.instances()
    assert instances is not None
    return MetadataBatch(
        instances=instances, waiting=lambda: nodes, landed=lambda names: None, clock=clock
    )


def answered(answers: MetadataBatch, each: Node) -> None:
    """`each`'s metadata, waiting for the batch its first look may start."""
    if answers.metadata(each) is None:
        answers.wait()
        assert answers.metadata(each) is not None


def test_the_first_sync_asks_about_every_waiting_node_and_the_others_take_their_answer(
    cloud: FakeCloud,
) -> None:
    nodes = [waiting(f"n{i}") for i in range(NODES)]
    nodes.append(node("ready", 1, "fake:///x"))  # initialized: not in the batch
    ctrl = controller(cloud, nodes)

    results = sync_until_answered(ctrl, [f"n{i}" for i in range(NODES)])
    patches = [result[0] for result in results.values() if isinstance(result, tuple)]

    assert cloud.calls_of("instances_metadata") == [f"{NODES} nodes"]
    assert cloud.calls_of("instance_metadata") == []
    assert all(isinstance(p, PatchNode) and p.provider_id.startswith("fake://") for p in patches)


def test_fewer_waiting_nodes_than_the_minimum_are_each_looked_up_alone(cloud: FakeCloud) -> None:
    ctrl = controller(cloud, [waiting(f"n{i}") for i in range(BATCH_MIN - 1)])

    sync_until_answered(ctrl, [f"n{i}" for i in range(BATCH_MIN - 1)])

    assert cloud.calls_of("instances_metadata") == []
    assert len(cloud.calls_of("instance_metadata")) == BATCH_MIN - 1


def test_a_node_the_batch_cannot_place_gets_its_own_lookup_and_warning(cloud: FakeCloud) -> None:
    ctrl = controller(cloud, [*(waiting(f"n{i}") for i in range(NODES)), waiting("lost")])

    failed = sync_until_answered(ctrl, [*(f"n{i}" for i in range(NODES)), "lost"])["lost"]
    assert isinstance(failed, SyncFailed)
    with pytest.raises(SyncFailed):
        ctrl.sync("lost")  # a retry: alone again, no new batch

    assert cloud.calls_of("instances_metadata") == [f"{NODES + 1} nodes"]
    assert cloud.calls_of("instance_metadata") == ["lost", "lost"]
    (event,) = failed.actions
    assert "no server found" in getattr(event, "message", "")


def test_a_failed_batch_leaves_each_node_to_its_own_lookup(cloud: FakeCloud) -> None:
    cloud.fail_next("instances_metadata", CloudError("nova is down", status=503))
    ctrl = controller(cloud, [waiting(f"n{i}") for i in range(NODES)])

    sync_until_answered(ctrl, [f"n{i}" for i in range(NODES)])

    assert cloud.calls_of("instances_metadata") == [f"{NODES} nodes"]
    assert len(cloud.calls_of("instance_metadata")) == NODES


def test_an_answer_stands_for_max_age_and_for_the_provider_id_it_was_asked_with(
    cloud: FakeCloud,
) -> None:
    clock = Clock()
    nodes = [waiting(f"n{i}") for i in range(NODES)]
    answers = batch(cloud, nodes, clock)

    answered(answers, nodes[0])  # the batch
    clock.now += MAX_AGE - 1
    answered(answers, nodes[1])  # its answer, still fresh
    # The kubelet set a providerID since the batch asked without one: its own lookup.
    answers.metadata(waiting("n2", provider_id=PROVIDER_ID_PREFIX + stable_id("server", "n2")))
    clock.now += 2
    answered(answers, nodes[3])  # too old: a new batch of every waiting node

    assert cloud.calls_of("instances_metadata") == [f"{NODES} nodes", f"{NODES} nodes"]
    assert cloud.calls_of("instance_metadata") == ["n2"]


def test_a_batch_slower_than_max_age_still_answers_every_node() -> None:
    clock = Clock()

    def sleep(seconds: float) -> None:
        clock.now += seconds

    cloud = FakeCloud(sleep=sleep)
    for index in range(NODES):
        cloud.add_server(f"n{index}")
    cloud.set_delay("instances_metadata", MAX_AGE + 5)  # a busy cloud
    nodes = [waiting(f"n{i}") for i in range(NODES)]
    answers = batch(cloud, nodes, clock)

    for each in nodes:
        answered(answers, each)

    assert cloud.calls_of("instances_metadata") == [f"{NODES} nodes"]
    assert cloud.calls_of("instance_metadata") == []


def test_answers_landed_early_age_from_the_batch_s_end(cloud: FakeCloud) -> None:
    clock = Clock()
    nodes = [waiting(f"n{i}") for i in range(NODES)]
    instances = cloud.instances()
    assert instances is not None

    class Chunked:
        """Delivers the first node's answer, then the others MAX_AGE - 1 seconds later."""

        def __getattr__(self, name: str) -> object:
            return getattr(instances, name)

        def instances_metadata(
            self, *, nodes: Sequence[Node], deliver: Deliver | None = None
        ) -> dict[str, InstanceMetadata]:
            assert instances is not None
            answers = instances.instances_metadata(nodes=nodes)
            first = dict(list(answers.items())[:1])
            assert deliver is not None
            deliver(first)
            clock.now += MAX_AGE - 1
            deliver({k: v for k, v in answers.items() if k not in first})
            return answers

    answers = MetadataBatch(
        instances=Chunked(),  # type: ignore[arg-type]
        waiting=lambda: nodes,
        landed=lambda names: None,
        clock=clock,
    )
    answers.ask(lambda: nodes)
    clock.now += 2  # the first answer landed MAX_AGE + 1 ago, the batch ended 2 s ago

    assert answers.take(nodes[0]) is not None
    assert cloud.calls_of("instance_metadata") == []
