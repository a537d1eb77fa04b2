"""The node sweep: node changes in, the Services whose load balancers they concern out.

A node change that alters a backend's (name, providerID, addresses) or a backend's labels
queues one `@nodes` key, not every Service key; its sync waits until the changes have
stopped for `NODE_QUIET` (at most `NODE_BURST_MAX` after the first), without holding a
thread (`RetryAfter`), then enqueues each owned Service whose load balancer was last
given other backends than its node selector now picks. So a burst of node changes (nodes
joining and leaving, a 5,000-node snapshot, a zone coming back) costs every Service one
sync, not one per node. The backend set and each selector's pick are computed once per
node-set version and kept as the same objects while they do not change, so unchanged
Services are passed by on identity.

A sweep with the Services it enqueued is one node-sync pass, upstream's
`service_controller_nodesync_latency_seconds`: from the sweep to the end of the last of
those Services' syncs (upstream updates them inside the pass; here their own syncs do).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import Histogram

from pyccm.protocol.views import Node, Service
from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import LoadBalancers, NodeSelector, selects
from pyccm.workers.runtime.clock import Clock
from pyccm.workers.runtime.controller import Obj
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.service.decision import members_moved
from pyccm.workers.service.ledger import Ledger
from pyccm.workers.service.policy import BackendId, backend_id, is_backend

# The queue key of a node-driven sweep (never a Service key: those hold a "/").
SWEEP = "@nodes"
# A sweep waits until no backend node has changed for this long (nodes joining or leaving
# together arrive over a second or two, with their initialization writes), so that a
# burst costs each load balancer one member update, not one per arrival...
NODE_QUIET = 1.0
# ...but never longer than this after the first change, so that steady churn still
# reaches the load balancers.
NODE_BURST_MAX = 10.0

LATENCY_BUCKETS = tuple(2.0**i for i in range(15))  # 1 s ... 16384 s, as upstream
NODESYNC_LATENCY = Histogram(
    "service_controller_nodesync_latency_seconds",
    "Time of one node sync pass: a sweep and the load-balancer updates of the Services it"
    " found behind (upstream's metric).",
    buckets=LATENCY_BUCKETS,
)


@dataclass(eq=False)  # compared by identity: two passes may look alike
class Pass:
    """One node-sync pass: when its sweep ran, and the Services whose syncs it waits for."""

    started: float
    waiting: set[str]


@dataclass(frozen=True)
class Backends:
    nodes: tuple[Node, ...]
    ids: frozenset[BackendId]
    # The backend version this set was computed at.
    version: int = 0


@dataclass(frozen=True)
class Members:
    """The backends a Service sync gives its load balancer: how many sweeps had started
    when it took them (for `NodeSweep.catch_up`), the backend set, and the Service's node
    selector's pick of it (`picked`: what the ledger records as given)."""

    sweeps: int
    backends: Backends
    picked: frozenset[BackendId]


@dataclass
class Selections:
    """The backends each node selector picks from the backend set of one version,
    computed once per selector, and kept as the same object as the previous version's
    while the selection does not change, so that the sweep passes unchanged Services by
    on identity."""

    version: int = -1
    current: dict[NodeSelector, frozenset[BackendId]] = field(default_factory=dict)
    previous: dict[NodeSelector, frozenset[BackendId]] = field(default_factory=dict)

    def get(self, version: int, selector: NodeSelector) -> frozenset[BackendId] | None:
        return self.current.get(selector) if version == self.version else None

    def put(
        self, version: int, selector: NodeSelector, picked: frozenset[BackendId]
    ) -> frozenset[BackendId]:
        if version < self.version:
            return picked  # a sync still on an older set: the cache stays on the newer one
        if version > self.version:
            self.version, self.previous, self.current = version, self.current, {}
        before = self.previous.get(selector)
        if before is not None and before == picked:
            picked = before
        return self.current.setdefault(selector, picked)


class NodeSweep:
    def __init__(
        self,
        *,
        replica: Replica,
        ledger: Ledger,
        clock: Clock,
        owned: Callable[[], Iterable[Service]],
        load_balancers: LoadBalancers,
    ) -> None:
        self._replica = replica
        self._ledger = ledger
        self._clock = clock
        self._owned = owned
        self._lbs = load_balancers
        self._lock = threading.Lock()
        # The backend node set, recomputed only after a node change that can alter it.
        self._version = 0
        self._backends: Backends | None = None
        self._selections = Selections()
        # When the last backend change arrived, and when the first one not swept yet did
        # (None: no sweep is queued, the next change queues one); how many sweeps ran.
        self._changed_at = 0.0
        self._due: float | None = None
        self._sweeps = 0
        # The passes each Service key's next finished sync ends (for the latency).
        self._passes: dict[str, list[Pass]] = {}
        # Set by `attach` (the runner hands the queue over before any sync).
        self._enqueue: Callable[[str], None] = _unstarted

    def attach(self, enqueue: Callable[[str], None]) -> None:
        self._enqueue = enqueue

    def keys_for(self, old: Obj | None, new: Obj | None) -> tuple[str, ...]:
        before = backend_id(old) if isinstance(old, Node) else None
        after = backend_id(new) if isinstance(new, Node) else None
        if before == after and not (before is not None and _relabelled(old, new)):
            # Heartbeats, readiness: upstream ignores them for backends too. Labels it
            # ignores as well (kubernetes/kubernetes#133165), but a node selector reads them:
            # the sweep finds the Services whose selection a relabelled backend changed.
            return ()
        now = self._clock.now()
        with self._lock:
            self._version += 1
            self._changed_at = now
            if self._due is not None:
                # A sweep is queued and has not started enqueueing: it will see this too.
                return ()
            self._due = now
        return (SWEEP,)

    def sync(self) -> None:
        """Enqueue the owned Services that are behind once the node changes have stopped
        for `NODE_QUIET` (or `NODE_BURST_MAX` after the first); until then, come back
        later (RetryAfter: no thread waits)."""
        now = self._clock.now()
        with self._lock:
            quiet = now - self._changed_at
            first = now if self._due is None else self._due
            wait = NODE_QUIET - quiet if now - first < NODE_BURST_MAX else 0.0
            if wait <= 0:
                # From here on, a node change queues a new sweep (this one may not see it).
                self._due = None
        if wait > 0:
            raise RetryAfter(f"node changes are arriving; sweeping in {wait:.1f}s", delay=wait)
        behind = self._behind(self.backend_set())
        if not behind:
            NODESYNC_LATENCY.observe(max(0.0, self._clock.now() - now))
            return
        sweep = Pass(started=now, waiting=set(behind))
        with self._lock:
            for key in behind:
                self._passes.setdefault(key, []).append(sweep)
        for key in behind:
            self._enqueue(key)

    def passes_of(self, key: str) -> tuple[Pass, ...]:
        """The passes waiting for `key`, read when its sync starts: a sync already running
        when a sweep enqueued the key again does not end that sweep's pass."""
        with self._lock:
            return tuple(self._passes.get(key, ()))

    def synced(self, key: str, passes: tuple[Pass, ...]) -> None:
        """The sync of `key` that started with `passes` finished (done or failed, as
        upstream's pass ends after a failed update too; not on RetryAfter)."""
        if not passes:
            return
        now = self._clock.now()
        ended: list[Pass] = []
        with self._lock:
            left = [p for p in self._passes.get(key, ()) if p not in passes]
            if left:
                self._passes[key] = left
            else:
                self._passes.pop(key, None)
            for sweep in passes:
                sweep.waiting.discard(key)
                if not sweep.waiting:
                    ended.append(sweep)
        for sweep in ended:
            NODESYNC_LATENCY.observe(max(0.0, now - sweep.started))

    def _behind(self, backends: Backends) -> list[str]:
        """The owned LB Services whose load balancer was last given other backends than
        their node selector now picks. Not the others: one never synced, or whose sync is
        still to finish (a RetryAfter, a failure), computes the set when it runs; one
        running now and finishing with an older set enqueues itself (`catch_up`). At
        start-up, when the first nodes arrive while the first load balancers are created,
        this is nobody."""
        with self._lock:
            self._sweeps += 1
        # Counted before the snapshot: a record the snapshot misses came after the count,
        # and its sync's `catch_up` sees it.
        synced = self._ledger.snapshot()
        behind: list[str] = []
        for service in self._owned():
            done = synced.get(service.key)
            if done is None or done.spec is None:
                continue
            if members_moved(done.backends, self.selection(service, backends)):
                behind.append(service.key)
        return behind

    def sweeps(self) -> int:
        """How many sweeps have started enqueueing: a sync reads it before it takes the
        backend set, and hands it to `catch_up` once done."""
        with self._lock:
            return self._sweeps

    def catch_up(self, key: str, backends: Backends, sweeps: int) -> None:
        """A sync that used `backends` just finished: if a sweep ran meanwhile for a newer
        node set, it may have missed this Service (not synced yet when it looked)."""
        with self._lock:
            missed = self._sweeps != sweeps and self._version != backends.version
        if missed:
            self._enqueue(key)

    def members(self, service: Service) -> Members:
        """The backends for a sync of `service`, the sweep count read first."""
        sweeps = self.sweeps()
        backends = self.backend_set()
        return Members(sweeps=sweeps, backends=backends, picked=self.selection(service, backends))

    def backend_set(self) -> Backends:
        with self._lock:
            version = self._version
            cached = self._backends
        if cached is not None and cached.version == version:
            return cached
        nodes = tuple(sorted((n for n in self._replica.nodes() if is_backend(n)), key=_name))
        ids = frozenset(i for n in nodes if (i := backend_id(n)) is not None)
        if cached is not None and cached.ids == ids:
            # Only labels changed: the same object, so that the sweep passes by on identity.
            ids = cached.ids
        backends = Backends(nodes=nodes, ids=ids, version=version)
        with self._lock:
            self._backends = backends
        return backends

    def selection(self, service: Service, backends: Backends) -> frozenset[BackendId]:
        """The backends the Service's node selector picks: the whole set without one."""
        selector = self._lbs.node_selector(service=service)
        if not selector:
            return backends.ids
        with self._lock:
            found = self._selections.get(backends.version, selector)
        if found is not None:
            return found
        picked = frozenset(
            i
            for n in backends.nodes
            if selects(selector, n.metadata.labels) and (i := backend_id(n)) is not None
        )
        with self._lock:
            return self._selections.put(backends.version, selector, picked)


def _unstarted(key: str) -> None:
    raise RuntimeError("ServiceController.periodics() must run before a sweep")


def _name(node: Node) -> str:
    return node.name


def _relabelled(old: Obj | None, new: Obj | None) -> bool:
    return (
        isinstance(old, Node)
        and isinstance(new, Node)
        and old.metadata.labels != new.metadata.labels
    )
