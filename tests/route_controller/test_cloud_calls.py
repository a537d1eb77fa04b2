"""What the controller hands the cloud: the name hint, and how many calls run at once."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from protocol.views import Node
from provider.fake import FakeCloud
from provider.interface import Route, Routes
from tests.route_controller.conftest import CLUSTER_CIDRS, build, make_node
from workers.route.controller import RouteSettings


class Recording:
    """The fake cloud's routes, recording each create's name hint and the calls in flight.

    Each create waits at a two-party barrier, so two creates must be in flight together for
    the reconcile to finish; the high-water mark shows none ran beyond the bound.
    """

    def __init__(self, inner: Routes, *, together: int) -> None:
        self._inner = inner
        self._barrier = threading.Barrier(together, timeout=10)
        self._lock = threading.Lock()
        self._in_flight = 0
        self.most_in_flight = 0
        self.hints: dict[str, str] = {}

    def list(self, *, nodes: Sequence[Node]) -> tuple[Route, ...]:
        return self._inner.list(nodes=nodes)

    def create(self, *, name_hint: str, route: Route) -> None:
        with self._lock:
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
            self.hints[route.destination_cidr] = name_hint
        try:
            self._barrier.wait()
            self._inner.create(name_hint=name_hint, route=route)
        finally:
            with self._lock:
                self._in_flight -= 1

    def delete(self, *, route: Route) -> None:
        self._inner.delete(route=route)


def test_creates_run_concurrently_up_to_max_in_flight_with_the_node_uid_as_hint() -> None:
    cloud = FakeCloud()
    inner = cloud.routes()
    assert inner is not None
    recording = Recording(inner, together=2)
    settings = RouteSettings(cluster_cidrs=CLUSTER_CIDRS, max_in_flight=2)
    harness = build(cloud, settings, routes=recording)
    for index in range(1, 7):
        harness.put(
            make_node(f"n{index}", cidrs=(f"10.244.{index}.0/24",), ips=(f"10.0.0.{index}",))
        )

    harness.reconcile()

    assert recording.most_in_flight == 2
    assert len(cloud.route_table()) == 6
    assert recording.hints["10.244.3.0/24"] == "uid-n3"
