"""What the controller hands the cloud: one batch per reconcile, with the node UID as hint."""

from __future__ import annotations

from collections.abc import Sequence

from pyccm.protocol.views import Node
from pyccm.provider.interface import Route, RouteFailure, Routes
from pyccm_sim.fake_provider import FakeCloud
from tests.support.routes import Harness, build, make_node


class Recording:
    """The fake cloud's routes, recording each create's name hint."""

    def __init__(self, inner: Routes) -> None:
        self._inner = inner
        self.hints: dict[str, str] = {}

    def list(self, *, nodes: Sequence[Node]) -> tuple[Route, ...]:
        return self._inner.list(nodes=nodes)

    def create(self, *, name_hint: str, route: Route) -> None:
        raise AssertionError("the controller creates in batches")

    def delete(self, *, route: Route) -> None:
        raise AssertionError("the controller deletes in batches")

    def create_many(self, *, routes: Sequence[tuple[str, Route]]) -> tuple[RouteFailure, ...]:
        self.hints.update((route.destination_cidr, hint) for hint, route in routes)
        return self._inner.create_many(routes=routes)

    def delete_many(self, *, routes: Sequence[Route]) -> tuple[RouteFailure, ...]:
        return self._inner.delete_many(routes=routes)


def join(harness: Harness, indexes: range) -> None:
    for index in indexes:
        harness.put(
            make_node(f"n{index}", cidrs=(f"10.244.{index}.0/24",), ips=(f"10.0.0.{index}",))
        )


def test_a_burst_of_node_joins_is_one_batch_with_each_node_uid_as_hint() -> None:
    cloud = FakeCloud()
    inner = cloud.routes()
    assert inner is not None
    recording = Recording(inner)
    harness = build(cloud, routes=recording)
    join(harness, range(1, 101))

    harness.reconcile()

    assert cloud.calls_of("routes_create_many") == ["100 routes"]
    assert len(cloud.route_table()) == 100
    assert recording.hints["10.244.3.0/24"] == "uid-n3"


def test_a_burst_of_node_leaves_is_one_batch() -> None:
    harness = build(FakeCloud())
    join(harness, range(1, 101))
    harness.reconcile()
    for index in range(1, 51):
        harness.remove(f"n{index}")

    harness.reconcile()

    assert harness.cloud.calls_of("routes_delete_many") == ["50 routes"]
    assert harness.cloud.calls_of("routes_create_many") == ["100 routes"]
    assert len(harness.cloud.route_table()) == 50


def test_a_reconcile_with_nothing_to_change_makes_no_batch_call() -> None:
    harness = build(FakeCloud())
    join(harness, range(1, 4))
    harness.reconcile()

    harness.reconcile()

    assert harness.cloud.calls_of("routes_create_many") == ["3 routes"]
    assert harness.cloud.calls_of("routes_delete_many") == []
