"""cloud-node: upstream's, with a Warning event that says why a node stays uninitialized.

Upstream's rules: docs/upstream.md#cloud-node.

Initialization and the address refresh ask the cloud about many nodes at once (batch.py).
Keys: a node's name runs the initialization path (or, for an initialized node, the cheap
beta → GA label reconcile with no cloud call) on `--concurrent-node-syncs` threads;
`addresses/<name>` runs the periodic address refresh, which the status loop enqueues for
every initialized node each `--node-status-update-frequency`, in a lane of its own
(`--concurrent-node-status-updates` threads, upstream's separate pool), so a storm of new
nodes does not hold up the refresh of the others, nor the refresh the new nodes.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from prometheus_client import Histogram

from pyccm.logs import parse_time
from pyccm.protocol.messages import Action, PatchNode, PatchNodeStatus, RecordEvent, Topic
from pyccm.protocol.views import Node, NodeAddress
from pyccm.provider.errors import AmbiguousInstance, InstanceNotFound, ProviderError
from pyccm.provider.interface import InstanceMetadata, Instances
from pyccm.workers.node.addresses import (
    ProvidedNodeIpMismatch,
    addresses_changed,
    filter_by_provided_ips,
    with_hostname,
)
from pyccm.workers.node.batch import MetadataBatch
from pyccm.workers.runtime.controller import Lane, Obj, Periodic, SyncFailed, node_ref
from pyccm.workers.runtime.ratelimit import RateLimiter, default_controller_rate_limiter
from pyccm.workers.runtime.replica import Replica

UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
COMPONENT = "cloud-node-controller"
ADDRESSES = "addresses/"
# The address refresh's queue in the workqueue metrics (upstream runs it on no queue).
STATUS_QUEUE = "NodeStatusUpdates"

# (beta, GA) label pairs reconciled on initialized nodes.
BETA_TO_GA = (
    ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone"),
    ("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region"),
    ("beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type"),
)
KUBERNETES_NAMESPACE = re.compile(r"(^|\.)(kubernetes|k8s)\.io/")

# Upstream's two node_controller histograms (k8s.io/cloud-provider, ALPHA): 1 s ... 1024 s.
_DELAY_BUCKETS = tuple(4.0**i for i in range(6))
TAINT_REMOVAL_DELAY = Histogram(
    "node_controller_cloud_provider_taint_removal_delay_seconds",
    "Seconds from a node's creation to the removal of its uninitialized taint (upstream's metric).",
    buckets=_DELAY_BUCKETS,
)
INITIAL_SYNC_DELAY = Histogram(
    "node_controller_initial_node_sync_delay_seconds",
    "Seconds from a node's creation to the end of its first successful sync (upstream's metric).",
    buckets=_DELAY_BUCKETS,
)


@dataclass(frozen=True)
class NodeSettings:
    # Upstream --concurrent-node-syncs default.
    workers: int = 1
    # Upstream --node-status-update-frequency: addresses refreshed every 5 minutes.
    status_update_frequency: float = 300.0
    # Upstream --concurrent-node-status-updates: address refreshes at once. Upstream's
    # default (0) means "as many as --concurrent-node-syncs"; the flag resolves it.
    status_workers: int = 1
    # A node stuck uninitialized gets at most one Warning per reason this often.
    warning_interval: float = 300.0


class NodeController:
    name = "cloud-node"
    queue_name = "Nodes"
    topics: tuple[Topic, ...] = (Topic.NODE,)
    component = COMPONENT
    lanes: tuple[Lane, ...]

    def __init__(self, *, replica: Replica, instances: Instances, settings: NodeSettings) -> None:
        self._replica = replica
        self._instances = instances
        self._settings = settings
        self._warned: dict[str, tuple[str, float]] = {}
        self._warned_lock = threading.Lock()
        # The runner's enqueue, given with `periodics` before any sync runs.
        self._enqueue: Callable[[str], None] | None = None
        self._batch = MetadataBatch(
            instances=instances, waiting=self._uninitialized, landed=self._landed
        )
        self.lanes = (
            Lane(prefix=ADDRESSES, queue_name=STATUS_QUEUE, workers=settings.status_workers),
        )

    def _uninitialized(self) -> list[Node]:
        return [n for n in self._replica.nodes() if n.has_taint(UNINITIALIZED_TAINT)]

    def _landed(self, names: list[str]) -> None:
        """A batch's answers for `names` are in: their initialization syncs again."""
        enqueue = self._enqueue
        if enqueue is None:
            return
        for name in names:
            node = self._replica.node(name)
            if node is not None and node.has_taint(UNINITIALIZED_TAINT):
                enqueue(name)

    def rate_limiter(self) -> RateLimiter[Hashable]:
        return default_controller_rate_limiter()

    def keys_for(self, topic: Topic, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        if isinstance(old, Node) and isinstance(new, Node):
            observe_initialized(old, new)
        # Upstream enqueues on every add and update; deletes need nothing.
        return (key,) if new is not None else ()

    def _initialized(self) -> list[Node]:
        return [n for n in self._replica.nodes() if not n.has_taint(UNINITIALIZED_TAINT)]

    def periodics(self, enqueue: Callable[[str], None]) -> list[Periodic]:
        self._enqueue = enqueue

        def refresh() -> None:
            # One batch of lookups for every node; each sync then takes its answer.
            self._batch.ask(self._initialized)
            for node in self._initialized():
                enqueue(ADDRESSES + node.name)

        # A reloaded `[Networking]` changes which addresses a node gets: refresh them now.
        return [
            Periodic(
                name="status",
                period=self._settings.status_update_frequency,
                run=refresh,
                wakes_on=frozenset({"instances"}),
            )
        ]

    def sync(self, key: str) -> tuple[Action, ...]:
        name = key.removeprefix(ADDRESSES)
        node = self._replica.node(name)
        if node is None:
            return ()
        if key.startswith(ADDRESSES):
            return self._refresh_addresses(node)
        if not node.has_taint(UNINITIALIZED_TAINT):
            return reconcile_labels(node)
        return self._initialize(node)

    # --- initialization -------------------------------------------------------------

    def _initialize(self, node: Node) -> tuple[Action, ...]:
        try:
            metadata = self._batch.metadata(node)
            if metadata is None:
                return ()  # a batch is fetching its answer; `_landed` queues the node again
            return (*initialize(node, metadata), self._synced_event(node))
        except (ProviderError, ProvidedNodeIpMismatch, MissingProviderId) as error:
            warning = self._warning(node, error)
            raise SyncFailed(str(error), actions=warning) from error

    def _synced_event(self, node: Node) -> RecordEvent:
        with self._warned_lock:
            self._warned.pop(node.name, None)
        return RecordEvent(
            regarding=node_ref(node),
            reason="Synced",
            message="Node synced successfully",
            component=COMPONENT,
        )

    def _warning(self, node: Node, error: Exception) -> tuple[Action, ...]:
        message = f"cannot initialize the node: {why(error)}"
        now = time.monotonic()
        with self._warned_lock:
            last = self._warned.get(node.name)
            if (
                last is not None
                and last[0] == message
                and now - last[1] < self._settings.warning_interval
            ):
                return ()
            self._warned[node.name] = (message, now)
        event = RecordEvent(
            regarding=node_ref(node),
            reason="FailedToInitializeNode",
            message=message,
            type="Warning",
            component=COMPONENT,
        )
        return (event,)

    # --- periodic address refresh ---------------------------------------------------

    def _refresh_addresses(self, node: Node) -> tuple[Action, ...]:
        try:
            metadata = self._batch.take(node) or self._instances.instance_metadata(node=node)
        except ProviderError:
            # Upstream logs and skips the node until the next period.
            return ()
        addresses = desired_addresses(node, metadata.node_addresses)
        if addresses is None or not addresses_changed(node.status.addresses, addresses):
            return ()
        return (PatchNodeStatus(name=node.name, addresses=addresses),)


def observe_initialized(old: Node, new: Node, *, now: Callable[[], float] = time.time) -> None:
    """Upstream's two delays, once per node, when the replica shows the uninitialized taint
    gone: the initialization patch (taint, labels, providerID, addresses) and its Synced
    event are one commit here, so the taint goes and the initial sync ends together."""
    created = new.metadata.creation_timestamp
    if not created or not old.has_taint(UNINITIALIZED_TAINT) or new.has_taint(UNINITIALIZED_TAINT):
        return
    age = max(0.0, now() - parse_time(created))
    TAINT_REMOVAL_DELAY.observe(age)
    INITIAL_SYNC_DELAY.observe(age)


class MissingProviderId(ValueError):
    pass


def initialize(node: Node, metadata: InstanceMetadata) -> tuple[Action, ...]:
    """The patch that initializes `node` from the cloud's metadata, then its addresses
    when they differ from the node's."""
    provider_id = metadata.provider_id or node.spec.provider_id
    if not provider_id:
        raise MissingProviderId("the cloud provider does not set the node's provider ID")
    addresses = desired_addresses(node, metadata.node_addresses, strict=True)
    patch = PatchNode(
        name=node.name,
        labels=initial_labels(node, metadata),
        provider_id="" if node.spec.provider_id else provider_id,
        remove_taints=((UNINITIALIZED_TAINT, ""),),
    )
    # Upstream's address update after initialization writes only a change (as the refresh).
    changed = addresses is not None and addresses_changed(node.status.addresses, addresses)
    status = (PatchNodeStatus(name=node.name, addresses=addresses),) if changed else ()
    return (patch, *status)


def initial_labels(node: Node, metadata: InstanceMetadata) -> dict[str, str | None]:
    labels: dict[str, str | None] = {}
    for value, keys in (
        (
            metadata.instance_type,
            ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"),
        ),
        (metadata.zone, ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")),
        (
            metadata.region,
            ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region"),
        ),
    ):
        if value:
            labels.update(dict.fromkeys(keys, value))
    for key, value in metadata.additional_labels.items():
        # No labels in Kubernetes namespaces from a cloud, and never overwrite a label.
        if not KUBERNETES_NAMESPACE.search(key) and key not in node.metadata.labels:
            labels[key] = value
    return labels


def desired_addresses(
    node: Node, cloud: tuple[NodeAddress, ...], *, strict: bool = False
) -> tuple[NodeAddress, ...] | None:
    """The addresses to write, or None when the cloud gave none (nothing to write).

    During initialization (`strict`) a provided-node-ip mismatch is an error; during the
    periodic refresh the node is just skipped, as upstream.
    """
    if not cloud:
        return None
    try:
        return filter_by_provided_ips(node, with_hostname(node, cloud))
    except ProvidedNodeIpMismatch:
        if strict:
            raise
        return None


def reconcile_labels(node: Node) -> tuple[Action, ...]:
    """Copy beta labels to their GA names where the GA label is missing or differs."""
    labels = node.metadata.labels
    fixes: dict[str, str | None] = {
        ga: labels[beta]
        for beta, ga in BETA_TO_GA
        if beta in labels and labels.get(ga) != labels[beta]
    }
    return (PatchNode(name=node.name, labels=fixes),) if fixes else ()


def why(error: Exception) -> str:
    if isinstance(error, InstanceNotFound):
        return f"no server found for it in the cloud ({error})"
    if isinstance(error, AmbiguousInstance):
        return f"several servers match its name ({error})"
    return str(error)
