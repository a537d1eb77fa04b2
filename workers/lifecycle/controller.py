"""cloud-node-lifecycle: upstream §1.2, with NotReady nodes probed concurrently.

Every `--node-monitor-period` (5 s) the monitor looks at each node's Ready condition in
the replica. A Ready node costs no cloud call: only its shutdown taint, if any, is
removed. Each NotReady node is enqueued and probed by the sync threads, so a mass outage
of 1,000 nodes is probed `workers` at a time rather than one after another (upstream).
A probe deletes the Node only on a definite "the server does not exist"; a cloud error
skips the node this round, never deletes it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from protocol.messages import Action, DeleteNode, PatchNode, RecordEvent, Topic
from protocol.views import Node, Taint
from provider.errors import ProviderError
from provider.interface import Instances
from workers.runtime.controller import Obj, Periodic, node_ref
from workers.runtime.ratelimit import RateLimiter, default_controller_rate_limiter
from workers.runtime.replica import Replica

SHUTDOWN_TAINT = Taint(key="node.cloudprovider.kubernetes.io/shutdown", effect="NoSchedule")
COMPONENT = "cloud-node-lifecycle-controller"


@dataclass(frozen=True)
class LifecycleSettings:
    # Upstream --node-monitor-period.
    monitor_period: float = 5.0
    # Probes of NotReady nodes in flight at once: bounded so an outage cannot flood the cloud.
    workers: int = 20


class LifecycleController:
    name = "cloud-node-lifecycle"
    queue_name = "NodeLifecycle"
    topics: tuple[Topic, ...] = (Topic.NODE,)
    component = COMPONENT

    def __init__(
        self, *, replica: Replica, instances: Instances, settings: LifecycleSettings
    ) -> None:
        self._replica = replica
        self._instances = instances
        self._settings = settings

    def rate_limiter(self) -> RateLimiter[Hashable]:
        return default_controller_rate_limiter()

    def keys_for(self, topic: Topic, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        # Driven by the monitor period only, as upstream: no event handlers.
        return ()

    def periodics(self, enqueue: Callable[[str], None]) -> list[Periodic]:
        def monitor() -> None:
            for node in self._replica.nodes():
                enqueue(node.name)

        return [Periodic(name="monitor", period=self._settings.monitor_period, run=monitor)]

    def sync(self, key: str) -> tuple[Action, ...]:
        node = self._replica.node(key)
        if node is None:
            return ()
        if is_ready(node):
            return _untaint(node)
        try:
            if not self._instances.instance_exists(node=node):
                return _delete(node)
            shutdown = self._instances.instance_shutdown(node=node)
        except ProviderError:
            # Any doubt: skip the node this round; never delete on an error.
            return ()
        return _taint(node) if shutdown else ()


def is_ready(node: Node) -> bool:
    ready = node.condition("Ready")
    return ready is not None and ready.status == "True"


def _has_shutdown_taint(node: Node) -> bool:
    return any(
        t.key == SHUTDOWN_TAINT.key and t.effect == SHUTDOWN_TAINT.effect for t in node.spec.taints
    )


def _untaint(node: Node) -> tuple[Action, ...]:
    if not _has_shutdown_taint(node):
        return ()
    return (
        PatchNode(name=node.name, remove_taints=((SHUTDOWN_TAINT.key, SHUTDOWN_TAINT.effect),)),
    )


def _taint(node: Node) -> tuple[Action, ...]:
    if SHUTDOWN_TAINT in node.spec.taints:
        return ()
    return (PatchNode(name=node.name, add_taints=(SHUTDOWN_TAINT,)),)


def _delete(node: Node) -> tuple[Action, ...]:
    event = RecordEvent(
        regarding=node_ref(node),
        reason="DeletingNode",
        message=f"Deleting node {node.name} because it does not exist in the cloud provider",
        component=COMPONENT,
    )
    # Recorded by the writer only if the DELETE fails; it appends the API's error.
    failed = RecordEvent(
        regarding=node_ref(node),
        reason="DeletingNodeFailed",
        message=f"Failed deleting node {node.name}",
        type="Warning",
        component=COMPONENT,
    )
    return (event, DeleteNode(name=node.name, uid=node.metadata.uid, failed_event=failed))
