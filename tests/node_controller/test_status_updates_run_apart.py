"""`--concurrent-node-status-updates`: the periodic address refresh runs on threads of its
own (upstream's separate pool), under the real Runner and WorkQueue (threads, no
processes): a hung initialization does not hold it up, and no more refreshes than the
flag says are in flight at once."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future

import pytest

from pyccm.protocol.messages import Ack, Action, PatchNodeStatus, ResultId, SessionId, Topic
from pyccm.protocol.views import Node
from pyccm.provider.interface import InstanceListing, InstanceMetadata, Instances
from pyccm.workers.node.controller import NodeController, NodeSettings
from pyccm.workers.runtime.commit import Committer
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.runtime.runner import Runner, RunnerSettings
from pyccm_sim.fake_provider import FakeCloud
from tests.node_controller.test_initialization import UNINITIALIZED
from tests.support.nodes import node
from tests.support.waiting import eventually


class Acking:
    """Stands in for the manager: records the actions and acks them at once."""

    def __init__(self) -> None:
        self.paused = threading.Event()
        self.actions: list[Action] = []
        self._lock = threading.Lock()

    def submit(self, key: str, actions: tuple[Action, ...]) -> Future[Ack]:
        with self._lock:
            self.actions.extend(actions)
        done: Future[Ack] = Future()
        done.set_result(Ack(session=SessionId("test"), id=ResultId(0)))
        return done

    def refreshed(self) -> set[str]:
        with self._lock:
            return {a.name for a in self.actions if isinstance(a, PatchNodeStatus)}


class Gated:
    """The fake cloud's instances, with the lookups of `held` nodes held until `gate` opens;
    it counts the lookups in flight (the most at once in `peak`)."""

    def __init__(self, cloud: FakeCloud, *, held: set[str]) -> None:
        instances = cloud.instances()
        assert instances is not None
        self._instances: Instances = instances
        self._held = held
        self.gate = threading.Event()
        self._lock = threading.Lock()
        self._in_flight = 0
        self.peak = 0

    def instance_metadata(self, *, node: Node) -> InstanceMetadata:
        if node.name not in self._held:
            return self._instances.instance_metadata(node=node)
        with self._lock:
            self._in_flight += 1
            self.peak = max(self.peak, self._in_flight)
        try:
            self.gate.wait(30.0)
            return self._instances.instance_metadata(node=node)
        finally:
            with self._lock:
                self._in_flight -= 1

    def instances_metadata(
        self,
        *,
        nodes: Sequence[Node],
        deliver: Callable[[dict[str, InstanceMetadata]], None] | None = None,
    ) -> dict[str, InstanceMetadata]:
        return self._instances.instances_metadata(nodes=nodes, deliver=deliver)

    def instance_exists(self, *, node: Node) -> bool:
        return self._instances.instance_exists(node=node)

    def instance_shutdown(self, *, node: Node) -> bool:
        return self._instances.instance_shutdown(node=node)

    def instance_listing(self, *, nodes: Sequence[Node]) -> InstanceListing:
        return self._instances.instance_listing(nodes=nodes)


def initialized(name: str) -> Node:
    # Found by name, no addresses yet: the refresh has some to write.
    return node(name)


@pytest.fixture
def cloud() -> FakeCloud:
    cloud = FakeCloud()
    for index in range(6):
        cloud.add_server(f"n{index}", internal_ip=f"10.0.0.{10 + index}")
    cloud.add_server("new", internal_ip="10.0.0.99")
    return cloud


@contextlib.contextmanager
def running(instances: Gated, nodes: Sequence[Node], settings: NodeSettings) -> Iterator[Acking]:
    replica = Replica()
    controller = NodeController(replica=replica, instances=instances, settings=settings)
    transport = Acking()
    runner = Runner(
        controller=controller,
        replica=replica,
        transport=transport,
        settings=RunnerSettings(workers=settings.workers),
        committer=Committer(controller=controller.name),
    )
    for each in nodes:
        replica.apply(Topic.NODE, each.name, each)
    replica.synced.set()
    runner.start()
    try:
        yield transport
    finally:
        instances.gate.set()
        runner.stop(timeout=5.0)


# An hour: the refresh runs once, at start.
HOURLY = 3600.0


def test_a_hung_initialization_does_not_hold_up_the_address_refresh(cloud: FakeCloud) -> None:
    instances = Gated(cloud, held={"new"})
    new = node("new", 1, "", taints=(UNINITIALIZED,))
    nodes = [new, initialized("n0"), initialized("n1")]
    settings = NodeSettings(workers=1, status_workers=1, status_update_frequency=HOURLY)
    with running(instances, nodes, settings) as transport:
        # The one sync thread is stuck on "new"; the refresh has threads of its own.
        eventually(lambda: instances.peak == 1)
        eventually(lambda: transport.refreshed() == {"n0", "n1"})
        assert "new" not in transport.refreshed()


@pytest.mark.parametrize("status_workers", [1, 3])
def test_no_more_refreshes_than_the_flag_says_are_in_flight(
    cloud: FakeCloud, status_workers: int
) -> None:
    names = {f"n{index}" for index in range(6)}
    instances = Gated(cloud, held=names)
    nodes = [initialized(name) for name in sorted(names)]
    settings = NodeSettings(
        workers=1, status_workers=status_workers, status_update_frequency=HOURLY
    )
    with running(instances, nodes, settings) as transport:
        eventually(lambda: instances.peak == status_workers)
        instances.gate.set()
        eventually(lambda: transport.refreshed() == names)
        assert instances.peak == status_workers
