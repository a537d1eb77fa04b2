"""service: upstream §1.3, with every cloud operation on a Service serialized on its key.

Upstream runs Service syncs on one queue and node-driven backend updates on another, so
an `UpdateLoadBalancer` can race an `EnsureLoadBalancer` or a delete of the same Service.
Here there is one queue of Service keys. A node change that alters the backend set
enqueues the Services this controller has synced, and `sync(key)` decides, level-
triggered, what that one Service needs now:

* gone, switched away from LoadBalancer, or being deleted → delete the LB, drop the
  finalizer (the delete branch);
* its `needsUpdate` fields changed since the last successful ensure, or a drift resync
  is due, or it was never ensured by this process → EnsureLoadBalancer (finalizer first);
* only the backend set changed → UpdateLoadBalancer (members only);
* nothing → nothing, with no cloud call.

The queue guarantees one sync per key at a time, so the three never overlap. A load
balancer still provisioning makes the provider raise `RetryAfter`; the key comes back
after that delay and no thread waits for Octavia.

Writes go through the manager: the finalizer is committed (and acked) before the first
cloud call, and the status, annotations and events of a finished sync are committed
before the sync records what it has done, so a failed write is retried, never forgotten.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import msgspec
from prometheus_client import Counter, Histogram

from pyccm.protocol.load_balancer_class import UNCLASSED, LoadBalancerClasses
from pyccm.protocol.messages import (
    Ack,
    Action,
    FailureKind,
    PatchServiceAnnotations,
    PatchServiceStatus,
    RecordEvent,
    Topic,
)
from pyccm.protocol.projections import wants_load_balancer
from pyccm.protocol.views import Node, Service
from pyccm.provider.errors import (
    ImplementedElsewhere,
    OwnedByAnotherCluster,
    ProviderError,
    RetryAfter,
)
from pyccm.provider.interface import LoadBalancers, NodeSelector, ProviderEvent, selects
from pyccm.workers.runtime.clock import MONOTONIC, Clock
from pyccm.workers.runtime.commit import needs_retry
from pyccm.workers.runtime.controller import Later, Obj, Periodic, SyncFailed, service_ref
from pyccm.workers.runtime.ratelimit import RateLimiter, service_controller_rate_limiter
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.service import orphans
from pyccm.workers.service.orphans import ORPHANS
from pyccm.workers.service.policy import (
    FINALIZER,
    BackendId,
    Shard,
    backend_id,
    is_backend,
    needs_cleanup,
    spec_print,
)

log = logging.getLogger(__name__)

COMPONENT = "service-controller"
# The queue key of a node-driven sweep (never a Service key: those hold a "/").
SWEEP = "@nodes"
# Upstream lists at most this many node names in an event.
EVENT_NODE_NAMES = 20
# A sweep waits until no backend node has changed for this long (nodes joining or leaving
# together arrive over a second or two, with their initialization writes), so that a
# burst costs each load balancer one member update, not one per arrival...
NODE_QUIET = 1.0
# ...but never longer than this after the first change, so that steady churn still
# reaches the load balancers.
NODE_BURST_MAX = 10.0

_LATENCY_BUCKETS = tuple(2.0**i for i in range(15))  # 1 s ... 16384 s, as upstream
LB_SYNCS = Counter(
    "service_controller_loadbalancer_sync_total", "UpdateLoadBalancer calls (node-driven)."
)
NODESYNC_ERRORS = Counter(
    "service_controller_nodesync_error_total", "Node-driven backend updates that failed."
)
HOST_LATENCY = Histogram(
    "service_controller_update_loadbalancer_host_latency_seconds",
    "Time of one node-driven UpdateLoadBalancer.",
    buckets=_LATENCY_BUCKETS,
)
RESYNCS = Counter(
    "pyccm_service_lb_resyncs_total",
    "Periodic re-ensures of unchanged Services (--lb-resync-period): reads unless drifted.",
)

Commit = Callable[[str, tuple[Action, ...]], Ack | None]


@dataclass(frozen=True)
class ServiceSettings:
    # --concurrent-service-syncs: upstream defaults to 1; Octavia calls are slow I/O.
    workers: int = 10
    # --lb-resync-period: every LB Service is re-ensured this often (reads unless drifted).
    resync_period: float = 600.0
    shard: Shard = field(default_factory=Shard)
    # --load-balancer-class(-only): the Services' classes this tree claims; upstream's
    # default, only Services without a class.
    classes: LoadBalancerClasses = UNCLASSED
    # --orphan-scan-period: list what this cluster owns in the cloud this often and warn
    # about what no Service accounts for (upstream #3145). Off (0) by default: it reads
    # every load balancer, floating IP and security group the cluster owns; `pyccm gc`
    # does the same on demand.
    orphan_scan_period: float = 0.0


@dataclass(frozen=True)
class Synced:
    """What this process last did for a Service: the copy it acted on (to delete its load
    balancer if the Service vanishes without a finalizer or comes back with a new UID),
    the `needsUpdate` print of its last successful ensure (None: ensure again) and the
    backends the load balancer was last given: those of the backend set that pass the
    Service's node selector (the whole set, the same object, without one)."""

    service: Service
    spec: tuple[object, ...] | None
    backends: frozenset[BackendId]


@dataclass(frozen=True)
class Backends:
    nodes: tuple[Node, ...]
    ids: frozenset[BackendId]
    # The backend version this set was computed at.
    version: int = 0


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


class ServiceController:
    queue_name = "service"
    topics: tuple[Topic, ...] = (Topic.NODE, Topic.SERVICE)
    component = COMPONENT

    def __init__(
        self,
        *,
        replica: Replica,
        load_balancers: LoadBalancers,
        commit: Commit,
        settings: ServiceSettings,
        clock: Clock = MONOTONIC,
    ) -> None:
        self.name = "service" + settings.shard.suffix
        self._clock = clock
        self._replica = replica
        self._lbs = load_balancers
        self._commit = commit
        self._settings = settings
        self._lock = threading.Lock()
        self._synced: dict[str, Synced] = {}
        self._resync_due: set[str] = set()
        # Services whose cleanup landed (key -> uid): a re-run before the watch shows the
        # finalizer gone must not call the cloud again.
        self._cleaned: dict[str, str] = {}
        # The backend node set, recomputed only after a node change that can alter it.
        self._backends_version = 0
        self._backends: tuple[int, Backends] | None = None
        self._selections = Selections()
        # When the last backend change arrived, and when the first one not swept yet did
        # (None: no sweep is queued, the next change queues one); how many sweeps ran.
        self._node_changed_at = 0.0
        self._sweep_due: float | None = None
        self._sweeps = 0
        # Set by `periodics` (the runner calls it before any sync): how the sweep enqueues.
        self._enqueue: Callable[[str], None] = _unstarted

    def rate_limiter(self) -> RateLimiter[Hashable]:
        return service_controller_rate_limiter()

    @property
    def classes(self) -> LoadBalancerClasses:
        """The Services' load-balancer classes this controller claims."""
        return self._settings.classes

    # --- what enqueues a Service ------------------------------------------------------

    def keys_for(self, topic: Topic, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        if topic is Topic.NODE:
            return self._keys_for_node(old, new)
        if not self._settings.shard.owns(key):
            return ()
        if new is None:
            # Deleted: only a Service this process gave a load balancer has work left
            # (with our finalizer, the delete showed up earlier as a deletionTimestamp).
            with self._lock:
                self._cleaned.pop(key, None)
                return (key,) if key in self._synced else ()
        # Level-triggered: sync compares the Service with what was last done, so an
        # echo of our own status write or a label edit costs no cloud call.
        assert isinstance(new, Service)
        if old is None and self._converged_elsewhere(key, new):
            # A restarted worker (or a new leader's snapshot) re-checks every Service; the
            # ones that look done wait behind those that need work, so a worker restarted
            # over and over still gets new Services their load balancers.
            return (Later(key),)
        moved_away = isinstance(old, Service) and self._wants(old)
        if self._wants(new) or needs_cleanup(new) or moved_away:
            return (key,)
        return ()

    def _wants(self, service: Service) -> bool:
        return wants_load_balancer(service, classes=self._settings.classes)

    def _converged_elsewhere(self, key: str, service: Service) -> bool:
        """Synced before this process saw it: ours, with an address, and not going away."""
        with self._lock:
            if key in self._synced:
                return False
        return (
            self._wants(service)
            and not needs_cleanup(service)
            and FINALIZER in service.metadata.finalizers
            and bool(service.status.load_balancer.ingress)
        )

    def _keys_for_node(self, old: Obj | None, new: Obj | None) -> Iterable[str]:
        before = backend_id(old) if isinstance(old, Node) else None
        after = backend_id(new) if isinstance(new, Node) else None
        if before == after and not (before is not None and _relabelled(old, new)):
            # Heartbeats, readiness: upstream ignores them for backends too. Labels it
            # ignores as well (kubernetes/kubernetes#133165), but a node selector reads them:
            # the sweep finds the Services whose selection a relabelled backend changed.
            return ()
        now = self._clock.now()
        with self._lock:
            self._backends_version += 1
            self._node_changed_at = now
            if self._sweep_due is not None:
                # A sweep is queued and has not started enqueueing: it will see this too.
                return ()
            self._sweep_due = now
        # One sweep key, not every Service key, run once the burst is over (`_sweep`): a
        # burst of node changes (nodes joining and leaving, a 5,000-node snapshot, a zone
        # coming back) costs every Service one sync, not one per node.
        return (SWEEP,)

    def _owned_services(self) -> list[Service]:
        owns = self._settings.shard.owns
        return [s for s in self._replica.services() if self._wants(s) and owns(s.key)]

    def _owned_load_balancers(self) -> list[str]:
        return [service.key for service in self._owned_services()]

    def periodics(self, enqueue: Callable[[str], None]) -> list[Periodic]:
        self._enqueue = enqueue

        def resync() -> None:
            owned = self._owned_load_balancers()
            with self._lock:
                self._resync_due.update(owned)
            for key in owned:
                enqueue(key)

        # A reload of `[LoadBalancer]` defaults resyncs every Service at once, as an
        # upstream restart would (workers/runtime/reload.py).
        return [
            Periodic(
                name="lb-resync",
                period=self._settings.resync_period,
                run=resync,
                wakes_on=frozenset({"load_balancers"}),
            ),
            *self._orphan_scan(enqueue),
        ]

    def _orphan_scan(self, enqueue: Callable[[str], None]) -> list[Periodic]:
        """`--orphan-scan-period`, on one shard only (every shard sees every Service)."""
        period = self._settings.orphan_scan_period
        if period <= 0 or self._settings.shard.index != 0:
            return []
        return [Periodic(name="orphan-scan", period=period, run=lambda: enqueue(ORPHANS))]

    # --- sync -------------------------------------------------------------------------

    def sync(self, key: str) -> tuple[Action, ...]:
        if key == SWEEP:
            self._sweep()
            return ()
        if key == ORPHANS:
            return orphans.scan(self._lbs, self._replica.services(), component=COMPONENT)
        service = self._replica.service(key)
        with self._lock:
            prior = self._synced.get(key)
        if service is None:
            # Deleted without our finalizer (a user removed it): delete what we made.
            if prior is not None and self._wants(prior.service):
                self._delete_orphan(key, prior.service)
            self._forget(key)
            return ()
        if prior is not None and prior.service.metadata.uid != service.metadata.uid:
            # Deleted and re-created under the same name: the old LB goes first.
            if self._wants(prior.service):
                self._delete_orphan(key, prior.service)
            self._forget(key)
            prior = None
        if needs_cleanup(service) or (
            not self._wants(service) and self._may_have_ours(service, prior)
        ):
            self._cleanup(key, service)
            return ()
        if not self._wants(service):
            return ()
        self._ensure_or_update(key, service, prior)
        return ()

    def _sweep(self) -> None:
        """Enqueue every owned LB Service once the node changes have stopped for
        `NODE_QUIET` (or `NODE_BURST_MAX` after the first); until then, come back later
        (RetryAfter: no thread waits)."""
        now = self._clock.now()
        with self._lock:
            quiet = now - self._node_changed_at
            first = now if self._sweep_due is None else self._sweep_due
            wait = NODE_QUIET - quiet if now - first < NODE_BURST_MAX else 0.0
            if wait <= 0:
                # From here on, a node change queues a new sweep (this one may not see it).
                self._sweep_due = None
        if wait > 0:
            raise RetryAfter(f"node changes are arriving; sweeping in {wait:.1f}s", delay=wait)
        for key in self._behind(self._backend_set()):
            self._enqueue(key)

    def _behind(self, backends: Backends) -> list[str]:
        """The owned LB Services whose load balancer was last given other backends than
        their node selector now picks. Not the others: one never synced, or whose sync is
        still to finish (a RetryAfter, a failure), computes the set when it runs; one
        running now and finishing with an older set enqueues itself (`_catch_up`). At
        start-up, when the first nodes arrive while the first load balancers are created,
        this is nobody."""
        with self._lock:
            self._sweeps += 1
            synced = dict(self._synced)
        behind: list[str] = []
        for service in self._owned_services():
            done = synced.get(service.key)
            if done is None or done.spec is None:
                continue
            members = self._selection(service, backends)
            # (Identity first: every Service of a sweep shares one set of 5,000 ids.)
            if done.backends is not members and done.backends != members:
                behind.append(service.key)
        return behind

    def _catch_up(self, key: str, backends: Backends, sweeps: int) -> None:
        """A sync that used `backends` just finished: if a sweep ran meanwhile for a newer
        node set, it may have missed this Service (not synced yet when it looked)."""
        with self._lock:
            missed = self._sweeps != sweeps and self._backends_version != backends.version
        if missed:
            self._enqueue(key)

    # --- the delete branch --------------------------------------------------------------

    def _cleanup(self, key: str, service: Service) -> None:
        """Delete the load balancer, then clear the status and drop the finalizer."""
        with self._lock:
            if self._cleaned.get(key) == service.metadata.uid:
                # Done and acked; the replica has not seen the finalizer go yet.
                return
        events = self._delete_load_balancer(service)
        # A Service of another class (deleted while holding our finalizer) has the other
        # controller's status: only our finalizer goes.
        status = service.status.load_balancer.ingress if not self._foreign(service) else ()
        if FINALIZER in service.metadata.finalizers or status:
            events.append(
                PatchServiceStatus(
                    namespace=service.namespace,
                    name=service.name,
                    uid=service.metadata.uid,
                    ingress=() if status else None,
                    remove_finalizers=(FINALIZER,),
                )
            )
        events.append(_event(service, "DeletedLoadBalancer", "Deleted load balancer"))
        if self._write(key, tuple(events)):
            self._forget(key)
            with self._lock:
                self._cleaned[key] = service.metadata.uid

    def _delete_orphan(self, key: str, service: Service) -> None:
        """The path without a finalizer: the Service object is gone, its LB may not be."""
        self._write(
            key,
            (
                *self._delete_load_balancer(service),
                _event(service, "DeletedLoadBalancer", "Deleted load balancer"),
            ),
        )

    def _delete_load_balancer(self, service: Service) -> list[Action]:
        try:
            exists = self._lbs.get(service=service) is not None
        except RetryAfter:
            raise
        except Exception as error:  # any failure, ours or a library's: a Warning event
            raise self._failed(
                service,
                f"failed to check if load balancer exists before cleanup: {_describe(error)}",
            ) from error
        if not exists:
            return []
        actions: list[Action] = [_event(service, "DeletingLoadBalancer", "Deleting load balancer")]
        try:
            provider_events = self._lbs.ensure_deleted(service=service)
        except ImplementedElsewhere:
            provider_events = ()
        except RetryAfter:
            raise
        except Exception as error:  # any failure, ours or a library's: a Warning event
            why = _describe(error)
            failed = _event(
                service,
                "DeleteLoadBalancerFailed",
                f"Error deleting load balancer: {why}",
                warning=True,
            )
            raise SyncFailed(why, actions=(*actions, failed)) from error
        return [*actions, *_provider_events(service, provider_events)]

    # --- the ensure branch --------------------------------------------------------------

    def _ensure_or_update(self, key: str, service: Service, prior: Synced | None) -> None:
        spec = spec_print(service, classes=self._settings.classes)
        with self._lock:
            drift_check = key in self._resync_due
            sweeps = self._sweeps
        backends = self._backend_set()
        members = self._selection(service, backends)
        if prior is not None and prior.spec == spec and not drift_check:
            # (Identity first: every Service of a sweep shares one set of 5,000 ids.)
            if prior.backends is not members and prior.backends != members:
                self._update_backends(key, service, prior, backends, members)
            elif prior.backends is not members:
                # Equal sets: remember this one, so that the next sweep passes us by.
                self._record(key, service, prior.spec, members)
        else:
            # A Service this process first sees already converged (a restart, a new
            # leader's snapshot) is verified like a drift resync: without Ensuring/Ensured
            # events, so a restart of the tree writes nothing when nothing changed.
            if prior is None:
                announce = not self._converged_elsewhere(key, service)
            else:
                announce = prior.spec != spec
            self._ensure(key, service, spec, backends, members, announce=announce)
        self._catch_up(key, backends, sweeps)

    def _ensure(
        self,
        key: str,
        service: Service,
        spec: tuple[object, ...],
        backends: Backends,
        members: frozenset[BackendId],
        *,
        announce: bool,
    ) -> None:
        """EnsureLoadBalancer. A drift resync of an unchanged Service (`announce` false)
        records no Ensuring/Ensured events: it only reads unless the cloud drifted."""
        ensuring = (_event(service, "EnsuringLoadBalancer", "Ensuring load balancer"),)
        leading: tuple[Action, ...] = ensuring if announce else ()
        if FINALIZER not in service.metadata.finalizers:
            # Upstream's order: the finalizer lands before any cloud call, so a Service
            # deleted from here on cannot leak its load balancer.
            finalizer = PatchServiceStatus(
                namespace=service.namespace,
                name=service.name,
                uid=service.metadata.uid,
                add_finalizers=(FINALIZER,),
            )
            if not self._write(key, (*leading, finalizer)):
                return
            leading = ()
        actions: list[Action] = list(leading)
        if not backends.nodes:
            actions.append(_no_nodes(service))
        # From the first cloud call on, the cloud may hold something of this Service's:
        # remember the copy we act on (with no print, so the next sync ensures again), so a
        # Service deleted meanwhile without our finalizer, or an ensure whose writes find it
        # gone, leads to a cleanup instead of a load balancer nobody knows about.
        with self._lock:
            if key not in self._synced:
                self._synced[key] = Synced(service=service, spec=None, backends=frozenset())
        try:
            outcome = self._lbs.ensure(service=service, nodes=backends.nodes)
        except ImplementedElsewhere:
            self._record(key, service, spec, members)
            return
        except RetryAfter:
            raise
        except Exception as error:  # any failure, ours or a library's: a Warning event
            reason = _sync_failure_reason(error)
            raise self._failed(service, _describe(error), actions=actions, reason=reason) from error
        actions.extend(_provider_events(service, outcome.events))
        annotations = {
            k: v
            for k, v in outcome.annotations_to_set.items()
            if service.metadata.annotations.get(k) != v
        }
        # Status before annotations: the writer's status patch carries the cached
        # resourceVersion, which an annotation patch just before it would have moved (a
        # 409 and a re-read for half the Services in the benchmark); the annotation
        # patch has no resourceVersion to conflict on.
        if outcome.ingress != service.status.load_balancer.ingress:
            actions.append(
                PatchServiceStatus(
                    namespace=service.namespace,
                    name=service.name,
                    uid=service.metadata.uid,
                    ingress=outcome.ingress,
                )
            )
        if annotations:
            actions.append(
                PatchServiceAnnotations(
                    namespace=service.namespace,
                    name=service.name,
                    uid=service.metadata.uid,
                    annotations=dict(annotations),
                )
            )
        if announce:
            actions.append(_event(service, "EnsuredLoadBalancer", "Ensured load balancer"))
        else:
            RESYNCS.inc()
        if not self._write(key, tuple(actions)):
            return
        # The annotations just written come back as a Service update; with them in the
        # print, that echo needs no second ensure.
        merged = msgspec.structs.replace(
            service.metadata, annotations={**service.metadata.annotations, **annotations}
        )
        echo = msgspec.structs.replace(service, metadata=merged)
        self._record(key, service, spec_print(echo, classes=self._settings.classes), members)

    def _update_backends(
        self,
        key: str,
        service: Service,
        prior: Synced,
        backends: Backends,
        members: frozenset[BackendId],
    ) -> None:
        """UpdateLoadBalancer: only the backends changed since the last sync (the provider
        gets every backend node and applies the Service's node selector itself)."""
        LB_SYNCS.inc()
        started = time.monotonic()
        try:
            provider_events = self._lbs.update(service=service, nodes=backends.nodes)
        except ImplementedElsewhere:
            provider_events = ()
        except RetryAfter:
            raise
        except Exception as error:  # any failure, ours or a library's: a Warning event
            if self._load_balancer_gone(service):
                self._record(key, service, prior.spec, members)
                return
            NODESYNC_ERRORS.inc()
            # Upstream retries a failed node sync with a full EnsureLoadBalancer.
            with self._lock:
                self._synced[key] = replace(prior, spec=None)
            names = _node_names(backends.nodes)
            why = _describe(error)
            failed = _event(
                service,
                "UpdateLoadBalancerFailed",
                f"Error updating load balancer with new hosts {names}, error: {why}",
                warning=True,
            )
            raise SyncFailed(why, actions=(failed,)) from error
        finally:
            HOST_LATENCY.observe(time.monotonic() - started)
        done = (
            _no_nodes(service)
            if not backends.nodes
            else _event(service, "UpdatedLoadBalancer", "Updated load balancer with new hosts")
        )
        if self._write(key, (*_provider_events(service, provider_events), done)):
            self._record(key, service, prior.spec, members)

    def _foreign(self, service: Service) -> bool:
        """A Service of a class this tree does not claim: another controller's."""
        lb_class = service.spec.load_balancer_class
        return lb_class is not None and not self._settings.classes.claims(lb_class)

    def _may_have_ours(self, service: Service, prior: Synced | None) -> bool:
        """Whether a live Service that wants no load balancer from us (any more) may still
        have one of ours: we synced it, or (for a class we claim) its status shows an
        address. The status of a class we do not claim is another controller's, so such
        a Service unknown to this process is left alone while it lives
        (`protocol.load_balancer_class` says how it can hold our finalizer at all)."""
        if prior is not None:
            return True
        claimed = self._settings.classes.claims(service.spec.load_balancer_class)
        return claimed and bool(service.status.load_balancer.ingress)

    def _load_balancer_gone(self, service: Service) -> bool:
        try:
            return self._lbs.get(service=service) is None
        except Exception:  # unknown: assume it is there, retry the update
            return False

    # --- bookkeeping ------------------------------------------------------------------

    def _backend_set(self) -> Backends:
        with self._lock:
            version = self._backends_version
            cached = self._backends
        if cached is not None and cached[0] == version:
            return cached[1]
        nodes = tuple(sorted((n for n in self._replica.nodes() if is_backend(n)), key=_name))
        ids = frozenset(i for n in nodes if (i := backend_id(n)) is not None)
        if cached is not None and cached[1].ids == ids:
            # Only labels changed: the same object, so that the sweep passes by on identity.
            ids = cached[1].ids
        backends = Backends(nodes=nodes, ids=ids, version=version)
        with self._lock:
            self._backends = (version, backends)
        return backends

    def _selection(self, service: Service, backends: Backends) -> frozenset[BackendId]:
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

    def _record(
        self,
        key: str,
        service: Service,
        spec: tuple[object, ...] | None,
        backends: frozenset[BackendId],
    ) -> None:
        with self._lock:
            self._synced[key] = Synced(service=service, spec=spec, backends=backends)
            self._resync_due.discard(key)
            self._cleaned.pop(key, None)

    def _forget(self, key: str) -> None:
        with self._lock:
            self._synced.pop(key, None)
            self._resync_due.discard(key)
            self._cleaned.pop(key, None)

    def _write(self, key: str, actions: tuple[Action, ...]) -> bool:
        """Commit and wait for the ack. False when the Service is gone or was re-created
        (its watch event enqueues the key again); raises when a retry may help."""
        if not actions:
            return True
        ack = self._commit(key, actions)
        if needs_retry(ack):
            raise SyncFailed("the manager did not apply the writes", actions=())
        assert ack is not None
        final = {FailureKind.NOT_FOUND, FailureKind.PRECONDITION}
        return not any(f.kind in final for f in ack.failures)

    def _failed(
        self,
        service: Service,
        message: str,
        *,
        actions: Sequence[Action] = (),
        reason: str = "SyncLoadBalancerFailed",
    ) -> SyncFailed:
        event = _event(service, reason, f"Error syncing load balancer: {message}", warning=True)
        return SyncFailed(message, actions=(*actions, event))


def _describe(error: Exception) -> str:
    """The provider's own messages are built secret-free; anything else (a library's bug, a
    surprise response) is named by its type only, with the traceback in this worker's log."""
    if isinstance(error, ProviderError):
        return str(error)
    log.error("unexpected error in a load-balancer sync", exc_info=error)
    return f"unexpected {type(error).__name__} (the service worker's log has the details)"


def _sync_failure_reason(error: Exception) -> str:
    """Upstream's `SyncLoadBalancerFailed`, except for a load balancer another cluster owns
    (upstream #3102), whose Warning has a reason of its own and names that cluster."""
    if isinstance(error, OwnedByAnotherCluster):
        return error.reason
    return "SyncLoadBalancerFailed"


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


def _event(service: Service, reason: str, message: str, *, warning: bool = False) -> RecordEvent:
    return RecordEvent(
        regarding=service_ref(service),
        reason=reason,
        message=message,
        type="Warning" if warning else "Normal",
        component=COMPONENT,
    )


def _no_nodes(service: Service) -> RecordEvent:
    return _event(
        service,
        "UnAvailableLoadBalancer",
        "There are no available nodes for LoadBalancer",
        warning=True,
    )


def _provider_events(service: Service, events: Sequence[ProviderEvent]) -> list[Action]:
    return [_event(service, e.reason, e.message, warning=e.type == "Warning") for e in events]


def _node_names(nodes: Sequence[Node]) -> str:
    """Upstream's list: at most 20 names, then `<N more>`, then the total."""
    names = [n.name for n in nodes[:EVENT_NODE_NAMES]]
    if len(nodes) > EVENT_NODE_NAMES:
        names.append(f"<{len(nodes) - EVENT_NODE_NAMES} more>")
    return f"[{', '.join(names)}] (total {len(nodes)})"
