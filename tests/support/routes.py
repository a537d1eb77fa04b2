"""A route controller over a Replica and the FakeCloud, with a fake clock (no processes)
(tests/route_controller, bench/route_reconcile.py)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

from pyccm.protocol.messages import Action, PatchNodeStatus, RecordEvent, Topic
from pyccm.protocol.views import Node, NodeCondition, NodeStatus
from pyccm.provider.interface import Routes
from pyccm.workers.route.controller import KEY, RouteController, RouteSettings
from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.fake_provider import FakeCloud
from tests.support.nodes import node

CLUSTER_CIDRS = (ipaddress.ip_network("10.244.0.0/16"), ipaddress.ip_network("fd00:10:244::/56"))
WALL = datetime.datetime(2026, 3, 1, 12, 0, 0, tzinfo=datetime.UTC)


def make_node(
    name: str,
    *,
    cidrs: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    conditions: tuple[NodeCondition, ...] = (),
    version: str = "1",
) -> Node:
    """A node as the route controller reads it: InternalIPs, then its Hostname; pod CIDRs."""
    return node(
        name,
        version,
        internal_ips=ips,
        addresses=(("Hostname", name),),
        pod_cidrs=cidrs,
        conditions=conditions,
    )


@dataclass
class Harness:
    cloud: FakeCloud
    replica: Replica
    clock: FakeClock
    controller: RouteController

    def put(self, node: Node) -> None:
        self.replica.apply(Topic.NODE, node.name, node)

    def remove(self, name: str) -> None:
        self.replica.apply(Topic.NODE, name, None)

    def reconcile(self) -> tuple[Action, ...]:
        """One reconcile, a full min_interval after the previous one."""
        self.clock.advance(1.0)
        return self.controller.sync(KEY)

    def settle(self, node: Node, actions: tuple[Action, ...]) -> Node:
        """The node as the manager leaves it after writing the conditions in `actions`."""
        for action in actions:
            if isinstance(action, PatchNodeStatus) and action.name == node.name:
                node = _with_conditions(node, action.conditions)
        self.put(node)
        return node


def _with_conditions(node: Node, conditions: tuple[NodeCondition, ...]) -> Node:
    kept = tuple(c for c in node.status.conditions if c.type not in {x.type for x in conditions})
    status = NodeStatus(addresses=node.status.addresses, conditions=(*kept, *conditions))
    return Node(metadata=node.metadata, spec=node.spec, status=status)


def conditions_of(actions: tuple[Action, ...]) -> dict[str, tuple[str, str]]:
    """node name -> (status, reason) of the NetworkUnavailable conditions written."""
    out = {}
    for action in actions:
        if isinstance(action, PatchNodeStatus):
            for condition in action.conditions:
                assert condition.type == "NetworkUnavailable"
                out[action.name] = (condition.status, condition.reason)
    return out


def events_of(actions: tuple[Action, ...]) -> list[RecordEvent]:
    return [action for action in actions if isinstance(action, RecordEvent)]


def build(
    cloud: FakeCloud, settings: RouteSettings | None = None, *, routes: Routes | None = None
) -> Harness:
    """A harness over `cloud` (or over `routes`, a wrapper of its routes)."""
    replica, clock = Replica(), FakeClock()
    routes = routes or cloud.routes()
    assert routes is not None
    controller = RouteController(
        replica=replica,
        routes=routes,
        settings=settings or RouteSettings(cluster_cidrs=CLUSTER_CIDRS),
        clock=clock,
        wall_clock=lambda: WALL,
    )
    return Harness(cloud=cloud, replica=replica, clock=clock, controller=controller)
