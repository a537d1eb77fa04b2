"""The controller under the real Runner and WorkQueue (threads, no processes): a node change is
routed without waiting for the reconciliation period, through the RetryAfter path."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from pyccm.protocol.messages import Ack, Action, ResultId, SessionId, Topic
from pyccm.workers.route.controller import RouteController, RouteSettings
from pyccm.workers.runtime.commit import Committer
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.runtime.runner import Runner, RunnerSettings
from pyccm_sim.fake_provider import FakeCloud
from tests.support.routes import CLUSTER_CIDRS, make_node


class Acking:
    """A transport standing in for the manager: records the actions and acks them at once."""

    def __init__(self) -> None:
        self.paused = threading.Event()
        self.actions: list[Action] = []

    def submit(self, key: str, actions: tuple[Action, ...]) -> Future[Ack]:
        self.actions.extend(actions)
        done: Future[Ack] = Future()
        done.set_result(Ack(session=SessionId("test"), id=ResultId(0)))
        return done


def eventually(condition: Callable[[], bool], *, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def started_runner(cloud: FakeCloud) -> tuple[Runner, Replica]:
    """The route controller under a started Runner, on a synced replica. A period of an
    hour: only the watch can explain a route appearing within a test."""
    replica = Replica()
    routes = cloud.routes()
    assert routes is not None
    settings = RouteSettings(cluster_cidrs=CLUSTER_CIDRS, reconciliation_period=3600.0)
    controller = RouteController(replica=replica, routes=routes, settings=settings)
    runner = Runner(
        controller=controller,
        replica=replica,
        transport=Acking(),
        settings=RunnerSettings(),
        committer=Committer(controller=controller.name),
    )
    replica.synced.set()
    runner.start()
    return runner, replica


def test_a_new_node_and_an_address_change_are_routed_well_before_the_period() -> None:
    cloud = FakeCloud()
    runner, replica = started_runner(cloud)
    try:
        # The start-up reconcile has run once the router has been listed.
        assert eventually(lambda: len(cloud.calls_of("routes_list")) >= 1)
        replica.apply(
            Topic.NODE, "n1", make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",))
        )
        assert eventually(lambda: cloud.route_table() == {"10.244.1.0/24": "10.0.0.11"})

        moved = make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.99",), version="2")
        replica.apply(Topic.NODE, "n1", moved)
        assert eventually(lambda: cloud.route_table() == {"10.244.1.0/24": "10.0.0.99"})
    finally:
        runner.stop(timeout=5.0)


def test_stopping_abandons_a_sync_stuck_in_a_cloud_call_instead_of_waiting_for_it() -> None:
    # The route worker, busy creating routes, outlived SIGTERM until supervisord killed it.
    # A stop lets the syncs in flight finish for a moment, then leaves them: the next worker
    # resumes from the cloud's state.
    stuck = threading.Event()
    release = threading.Event()

    def hang(seconds: float) -> None:
        # Longer than a stop may wait (1 s), far shorter than the old 10 s drain, after
        # which the route would exist and no call would be in flight.
        stuck.set()
        release.wait(5)

    cloud = FakeCloud(sleep=hang)
    cloud.set_delay("routes_create", 1.0)
    runner, replica = started_runner(cloud)
    try:
        replica.apply(
            Topic.NODE, "n1", make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",))
        )
        assert stuck.wait(10)
        runner.stop()
        busy = [t for t in threading.enumerate() if t.name.startswith("route-sync")]
        assert busy  # stop() returned while the cloud call is still in flight
        assert all(t.daemon for t in busy)  # and the process may exit without it
        assert cloud.route_table() == {}
    finally:
        release.set()
