"""A service controller on the fake cloud, with a stand-in for the manager
(tests/service_controller).

`Harness.commit` plays the manager's part: it records each committed batch (with how many
cloud calls had been made when it arrived, so tests can check ordering) and, like the real
writer followed by the watch echo, applies the Service writes to the replica.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from pyccm.protocol.messages import (
    Ack,
    Action,
    ActionFailure,
    FailureKind,
    PatchServiceAnnotations,
    PatchServiceStatus,
    RecordEvent,
    ResultId,
    SessionId,
    Topic,
)
from pyccm.protocol.views import (
    LoadBalancerStatus,
    Node,
    OwnerMeta,
    Service,
    ServicePort,
    ServiceSpec,
    ServiceStatus,
    Taint,
)
from pyccm.provider.interface import LoadBalancers
from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.service.controller import ServiceController, ServiceSettings
from pyccm.workers.service.sweep import NODE_QUIET, SWEEP
from pyccm_sim.fake_provider import FakeCloud
from tests.support.nodes import node


def make_node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    deleting: bool = False,
    version: str = "1",
) -> Node:
    """A node of the fake cloud: providerID `fake:///NAME`, InternalIP 10.0.0.<last char>."""
    return node(
        name,
        version,
        f"fake:///{name}",
        internal_ips=(f"10.0.0.{name[-1]}",),
        labels=labels,
        taints=taints,
        deleting=deleting,
    )


def make_service(
    name: str = "web",
    *,
    ports: tuple[int, ...] = (80,),
    kind: str = "LoadBalancer",
    uid: str = "",
    lb_class: str | None = None,
) -> Service:
    return Service(
        metadata=OwnerMeta(
            name=name, namespace="default", uid=uid or f"uid-{name}", resource_version="1"
        ),
        spec=ServiceSpec(
            type=kind,
            ports=tuple(ServicePort(port=p, node_port=30000 + p) for p in ports),
            load_balancer_class=lb_class,
        ),
    )


@dataclass
class Commit:
    actions: tuple[Action, ...]
    cloud_calls_before: int


@dataclass
class Harness:
    cloud: FakeCloud
    replica: Replica
    controller: ServiceController
    commits: list[Commit] = field(default_factory=list)
    fail_next: list[FailureKind] = field(default_factory=list)
    enqueued: list[str] = field(default_factory=list)
    clock: FakeClock = field(default_factory=FakeClock)

    def commit(self, key: str, actions: tuple[Action, ...]) -> Ack:
        self.commits.append(Commit(actions=actions, cloud_calls_before=len(self.cloud.calls)))
        if self.fail_next:
            kind = self.fail_next.pop(0)
            failure = ActionFailure(index=0, kind=kind, message="injected")
            return Ack(session=SessionId("test"), id=ResultId(0), failures=(failure,))
        for action in actions:
            self._echo(action)
        return Ack(session=SessionId("test"), id=ResultId(0))

    def _echo(self, action: Action) -> None:
        if isinstance(action, PatchServiceStatus):
            key = f"{action.namespace}/{action.name}"
            service = self.replica.service(key)
            assert service is not None
            finalizers = [
                f for f in service.metadata.finalizers if f not in action.remove_finalizers
            ]
            finalizers += [f for f in action.add_finalizers if f not in finalizers]
            if not finalizers and service.metadata.deletion_timestamp is not None:
                self.replica.apply(Topic.SERVICE, key, None)
                return
            status = service.status
            if action.ingress is not None:
                status = ServiceStatus(load_balancer=LoadBalancerStatus(ingress=action.ingress))
            meta = msgspec.structs.replace(service.metadata, finalizers=tuple(finalizers))
            self.put(msgspec.structs.replace(service, metadata=meta, status=status))
        elif isinstance(action, PatchServiceAnnotations):
            key = f"{action.namespace}/{action.name}"
            service = self.replica.service(key)
            assert service is not None
            merged = {**service.metadata.annotations}
            for k, v in action.annotations.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
            meta = msgspec.structs.replace(service.metadata, annotations=merged)
            self.put(msgspec.structs.replace(service, metadata=meta))

    def put(self, obj: Node | Service) -> None:
        topic = Topic.NODE if isinstance(obj, Node) else Topic.SERVICE
        self.replica.apply(topic, obj.key, obj)

    def sweep(self) -> list[str]:
        """Run the node-driven sweep once the node changes are over (the fake clock moved
        past the quiet period); the Service keys it enqueued."""
        self.clock.advance(NODE_QUIET)
        self.enqueued.clear()
        self.controller.sync(SWEEP)
        return list(self.enqueued)

    def events(self) -> list[str]:
        return [a.reason for c in self.commits for a in c.actions if isinstance(a, RecordEvent)]

    def actions(self, kind: type) -> list[Action]:
        return [a for c in self.commits for a in c.actions if isinstance(a, kind)]

    def cloud_calls(self) -> list[str]:
        return [c.method for c in self.cloud.calls]


def harness(
    settings: ServiceSettings | None = None,
    *,
    nodes: int = 2,
    load_balancers: LoadBalancers | None = None,
) -> Harness:
    """On the fake cloud, or on `load_balancers` (then `cloud` is an idle FakeCloud)."""
    cloud = FakeCloud()
    replica = Replica()
    clock = FakeClock()
    # The harness needs the controller and the controller the harness's commit.
    box: list[Harness] = []
    load_balancers = load_balancers or cloud.load_balancers()
    assert load_balancers is not None
    controller = ServiceController(
        replica=replica,
        load_balancers=load_balancers,
        commit=lambda key, actions: box[0].commit(key, actions),  # noqa: PLW0108
        settings=settings or ServiceSettings(),
        clock=clock,
    )
    h = Harness(cloud=cloud, replica=replica, controller=controller, clock=clock)
    box.append(h)
    # As the runner does: periodics first (they hand over the queue's add), then every
    # replica change goes through keys_for.
    controller.periodics(h.enqueued.append)
    replica.listen(
        lambda topic, key, old, new: h.enqueued.extend(controller.keys_for(topic, key, old, new))
    )
    for index in range(1, nodes + 1):
        h.put(make_node(f"n{index}"))
    if nodes:
        h.sweep()  # the initial nodes' sweep, done: the next node change queues one
    h.enqueued.clear()
    return h
