"""cloud-node-lifecycle: upstream's, with one listing of the servers per period.

What it does and where it differs: pyccm/workers/lifecycle/README.md.

Every `--node-monitor-period` (5 s) the monitor looks at each node's Ready condition in
the replica. A Ready node costs no cloud call: only its shutdown taint, if any, is
removed. When some nodes are NotReady, the monitor asks the cloud about all of them with
one listing (`Instances.instance_listing`: one paged list of the servers), then enqueues
every node; the sync threads answer each NotReady node from that listing: its server is
there (shut down: taint it), or it is not. Upstream makes one or two GETs per NotReady node
and period, 5,000 to 10,000 calls every 5 s in a mass kubelet outage of 5,000 nodes.

The listing is only evidence that a server exists. A node it does not show (a server
created after the listing, a name several servers share, a providerID of another region)
is probed alone as upstream does, `workers` probes at a time, and deleted only on a
definite "the server does not exist"; a cloud error skips the node this round, never
deletes it. A listing that fails on a retryable error skips every NotReady node this round
(the cloud is struggling: thousands of probes would not help it); one the cloud refuses
outright (a policy that forbids listing) leaves every node to its own probe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from pyccm.protocol.messages import Action, DeleteNode, PatchNode, RecordEvent, Topic
from pyccm.protocol.views import Node, Taint
from pyccm.provider.errors import ProviderError
from pyccm.provider.interface import InstanceListing, Instances
from pyccm.workers.runtime.controller import Lane, Obj, Periodic, node_ref
from pyccm.workers.runtime.ratelimit import RateLimiter, default_controller_rate_limiter
from pyccm.workers.runtime.replica import Replica

SHUTDOWN_TAINT = Taint(key="node.cloudprovider.kubernetes.io/shutdown", effect="NoSchedule")
COMPONENT = "cloud-node-lifecycle-controller"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LifecycleSettings:
    # Upstream --node-monitor-period.
    monitor_period: float = 5.0
    # Probes of NotReady nodes in flight at once: bounded so an outage cannot flood the cloud.
    workers: int = 20


@dataclass(frozen=True)
class Period:
    """What the monitor learnt from the cloud at the start of a period."""

    # The listing, or None when there is none (no NotReady node, or it failed).
    listing: InstanceListing | None = None
    # The providerID each listed node had when listed: a node changed since is probed.
    listed: dict[str, str] = field(default_factory=dict)
    # The listing failed on a retryable error: NotReady nodes wait for the next period.
    skip: bool = False


class LifecycleController:
    name = "cloud-node-lifecycle"
    queue_name = "NodeLifecycle"
    topics: tuple[Topic, ...] = (Topic.NODE,)
    component = COMPONENT
    lanes: tuple[Lane, ...] = ()

    def __init__(
        self, *, replica: Replica, instances: Instances, settings: LifecycleSettings
    ) -> None:
        self._replica = replica
        self._instances = instances
        self._settings = settings
        # Replaced whole by each monitor run, read by the sync threads.
        self._period = Period()

    def rate_limiter(self) -> RateLimiter[Hashable]:
        return default_controller_rate_limiter()

    def keys_for(self, topic: Topic, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        # Driven by the monitor period only, as upstream: no event handlers.
        return ()

    def periodics(self, enqueue: Callable[[str], None]) -> list[Periodic]:
        def monitor() -> None:
            nodes = self._replica.nodes()
            self._period = self._list([node for node in nodes if not is_ready(node)])
            # Only nodes with something to do: a Ready node without the shutdown taint
            # needs nothing (5,000 keys every period cost ~12 % of a core for nothing).
            for node in nodes:
                if not is_ready(node) or _has_shutdown_taint(node):
                    enqueue(node.name)

        return [Periodic(name="monitor", period=self._settings.monitor_period, run=monitor)]

    def sync(self, key: str) -> tuple[Action, ...]:
        node = self._replica.node(key)
        if node is None:
            return ()
        if is_ready(node):
            return _untaint(node)
        period = self._period
        if period.skip:
            return ()
        listing = period.listing
        if (
            listing is not None
            and node.name in listing.found
            and period.listed.get(node.name) == node.spec.provider_id
        ):
            return _taint(node) if node.name in listing.shutdown else ()
        return self._probe(node)

    def _list(self, not_ready: Sequence[Node]) -> Period:
        """One listing for every NotReady node; what to do when it fails."""
        if not not_ready:
            return Period()
        try:
            listing = self._instances.instance_listing(nodes=not_ready)
        except ProviderError as error:
            log.warning(
                "listing the servers of %d NotReady node(s) failed: %s; %s",
                len(not_ready),
                error,
                "they wait for the next period" if error.retryable else "probing each one",
            )
            return Period(skip=error.retryable)
        return Period(listing=listing, listed={n.name: n.spec.provider_id for n in not_ready})

    def _probe(self, node: Node) -> tuple[Action, ...]:
        """Upstream's per-node questions, for a node the listing could not place."""
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
