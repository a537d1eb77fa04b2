"""service: upstream §1.3, with every cloud operation on a Service serialized on its key.

Upstream runs Service syncs on one queue and node-driven backend updates on another, so
an `UpdateLoadBalancer` can race an `EnsureLoadBalancer` or a delete of the same Service.
Here there is one queue, of three kinds of key, each with one owner:

* `namespace/name` (possibly `Later`): a Service. `decision.decide` says what it needs
  now, from the replica's copy, what this process last did (`ledger.Ledger`) and the
  claim (classes, shard); this module does it: delete, ensure (finalizer first), update
  the members only, or nothing, with no cloud call;
* `@nodes`: the node sweep (`sweep.NodeSweep`), which enqueues the Services whose
  members a burst of node changes moved;
* `@orphans`: the orphan scan (`orphans.OrphanScan`), which returns its Warning events.

The queue guarantees one sync per key at a time, so nothing on one Service overlaps. A
load balancer still provisioning makes the provider raise `RetryAfter`; the key comes back
after that delay and no thread waits for Octavia.

How a Service sync stands to the runtime's contract (`workers/runtime/controller.py`: a
sync returns the actions the manager should apply): every write of a Service sync is
followed by bookkeeping that must not happen unless the write landed, and the runtime
does not tell a controller whether the actions it returned landed. So a Service sync
commits its writes itself, through `commit` (`_Writes.land`, the one place), waits for
the ack, and returns nothing:

* the finalizer, acked **before the first cloud call**: upstream's order, so a Service
  deleted from then on cannot leak its load balancer;
* a finished step's writes (status, annotations, events; the cleanup's finalizer
  removal; the events of a vanished Service's deletion), acked **before the step is
  recorded as done or forgotten**: a write the manager could not apply fails the sync
  (retried with backoff), and is never forgotten as done.

The Warnings of a failure ride on `SyncFailed` (the runner delivers them); the node sweep
returns nothing; the orphan scan returns its events (nothing depends on their landing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

import msgspec
from prometheus_client import Counter, Histogram

from pyccm.flags.load_balancer_class import UNCLASSED, LoadBalancerClasses
from pyccm.protocol.messages import (
    Ack,
    Action,
    FailureKind,
    PatchServiceAnnotations,
    PatchServiceStatus,
    Topic,
)
from pyccm.protocol.views import LoadBalancerIngress, Service
from pyccm.provider.errors import ImplementedElsewhere, RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm.workers.runtime.clock import MONOTONIC, Clock
from pyccm.workers.runtime.commit import needs_retry
from pyccm.workers.runtime.controller import Lane, Obj, Periodic, SyncFailed
from pyccm.workers.runtime.ratelimit import RateLimiter, service_controller_rate_limiter
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.service import events
from pyccm.workers.service.decision import (
    FOREIGN_GRACE,
    Claim,
    Converged,
    Delete,
    Ensure,
    Nothing,
    Skip,
    decide,
    members_moved,
    service_keys,
    spec_print,
)
from pyccm.workers.service.events import COMPONENT
from pyccm.workers.service.ledger import Ledger
from pyccm.workers.service.orphans import ORPHANS, OrphanScan
from pyccm.workers.service.policy import FINALIZER, BackendId, Shard
from pyccm.workers.service.reconciles import DELETE, ENSURE, UPDATE, Reconciles
from pyccm.workers.service.sweep import (
    LATENCY_BUCKETS,
    SWEEP,
    Backends,
    NodeSweep,
)

log = logging.getLogger(__name__)

LB_SYNCS = Counter(
    "service_controller_loadbalancer_sync_total", "UpdateLoadBalancer calls (node-driven)."
)
NODESYNC_ERRORS = Counter(
    "service_controller_nodesync_error_total", "Node-driven backend updates that failed."
)
HOST_LATENCY = Histogram(
    "service_controller_update_loadbalancer_host_latency_seconds",
    "Time of one node-driven UpdateLoadBalancer.",
    buckets=LATENCY_BUCKETS,
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


class ServiceController:
    queue_name = "service"
    topics: tuple[Topic, ...] = (Topic.NODE, Topic.SERVICE)
    component = COMPONENT
    lanes: tuple[Lane, ...] = ()

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
        self._replica = replica
        self._lbs = load_balancers
        self._commit = commit
        self._settings = settings
        self._claim = Claim(classes=settings.classes, shard=settings.shard)
        self._ledger = Ledger()
        self._clock = clock
        # key -> when this process first planned the cleanup of another class's Service.
        self._foreign_deletions: dict[str, float] = {}
        self._reconciles = Reconciles(clock)
        self._nodes = NodeSweep(
            replica=replica,
            ledger=self._ledger,
            clock=clock,
            owned=self._owned_services,
            selector_of=lambda service: load_balancers.node_selector(service=service),
        )
        self._orphans = OrphanScan(
            load_balancers=load_balancers,
            replica=replica,
            period=settings.orphan_scan_period,
            scanning=settings.shard.index == 0,
            component=COMPONENT,
        )

    def rate_limiter(self) -> RateLimiter[Hashable]:
        return service_controller_rate_limiter()

    @property
    def classes(self) -> LoadBalancerClasses:
        """The Services' load-balancer classes this controller claims."""
        return self._settings.classes

    # --- what enqueues a key ------------------------------------------------------------

    def keys_for(self, topic: Topic, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        if topic is Topic.NODE:
            return self._nodes.keys_for(old, new)
        known = self._ledger.deleted(key) if new is None else self._ledger.knows(key)
        return service_keys(key, _service(old), _service(new), known=known, claim=self._claim)

    def _owned_services(self) -> list[Service]:
        owns = self._claim.shard.owns
        return [s for s in self._replica.services() if self._claim.wants(s) and owns(s.key)]

    def periodics(self, enqueue: Callable[[str], None]) -> list[Periodic]:
        self._nodes.attach(enqueue)

        def resync() -> None:
            owned = [service.key for service in self._owned_services()]
            self._ledger.due_for_resync(owned)
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
            *self._orphans.periodics(enqueue),
        ]

    # --- sync ---------------------------------------------------------------------------

    def sync(self, key: str) -> tuple[Action, ...]:
        if key == SWEEP:
            self._nodes.sync()
            return ()
        if key == ORPHANS:
            return self._orphans.sync()
        passes = self._nodes.passes_of(key)
        try:
            self._sync_service(key, _Writes(self._commit, key))
        except RetryAfter:
            raise  # the sync goes on later: the node-sync pass waits for it
        except Exception:
            self._nodes.synced(key, passes)
            raise
        self._nodes.synced(key, passes)
        return ()

    def _sync_service(self, key: str, writes: _Writes) -> None:
        service = self._replica.service(key)
        if service is None:
            self._foreign_deletions.pop(key, None)  # its owner removed the finalizer
        last = self._ledger.last(key)
        plan = decide(
            key,
            service,
            last,
            claim=self._claim,
            resync_due=self._ledger.resync_due(key),
            cleaned_uid=self._ledger.cleaned(key),
        )
        if plan.replaced is not None:
            # The path without a finalizer: the Service object is gone, its LB may not be.
            replaced = plan.replaced
            writes.land(*self._delete_load_balancer(replaced), events.deleted(replaced))
        if plan.forget:
            self._ledger.forget(key)
        match plan.step:
            case Skip(reason) | Nothing(reason):
                log.debug("%s: %s", key, reason)
            case Delete() as step if service is not None:
                self._cleanup(key, service, step, writes)
            case (Ensure() | Converged()) as step if service is not None:
                self._converge(key, service, step, writes)

    # --- the delete branch --------------------------------------------------------------

    def _cleanup(self, key: str, service: Service, step: Delete, writes: _Writes) -> None:
        """Delete the load balancer, then clear the status and drop the finalizer."""
        if step.wait_for_owner:
            first = self._foreign_deletions.setdefault(key, self._clock.now())
            left = first + FOREIGN_GRACE - self._clock.now()
            if left > 0:
                raise RetryAfter(f"{key}: another class's Service, left to its owner", delay=left)
        self._foreign_deletions.pop(key, None)
        actions = self._delete_load_balancer(service)
        if step.patch:
            actions.append(
                PatchServiceStatus(
                    namespace=service.namespace,
                    name=service.name,
                    uid=service.metadata.uid,
                    ingress=() if step.clear_ingress else None,
                    remove_finalizers=(FINALIZER,),
                )
            )
        actions.append(events.deleted(service))
        if writes.land(*actions):
            self._ledger.cleaned_up(key, service.metadata.uid)

    def _delete_load_balancer(self, service: Service) -> list[Action]:
        # Upstream's EnsureLoadBalancerDeleted looks the load balancer up first too: the
        # look-up is part of the reconcile it counts.
        with self._reconciles.call(DELETE, service) as call:
            return self._delete_from_cloud(service, call.skip)

    def _delete_from_cloud(self, service: Service, skip: Callable[[], None]) -> list[Action]:
        try:
            exists = self._lbs.get(service=service) is not None
        except RetryAfter:
            raise
        except Exception as error:  # any failure, ours or a library's: a Warning event
            raise events.failed(
                service,
                f"failed to check if load balancer exists before cleanup: {events.describe(error)}",
            ) from error
        if not exists:
            return []
        deleting = events.event(service, "DeletingLoadBalancer", "Deleting load balancer")
        try:
            provider_events = self._lbs.ensure_deleted(service=service)
        except ImplementedElsewhere:
            skip()
            provider_events = ()
        except RetryAfter:
            raise
        except Exception as error:  # any failure, ours or a library's: a Warning event
            why = events.describe(error)
            message = f"Error deleting load balancer: {why}"
            failure = events.event(service, "DeleteLoadBalancerFailed", message, warning=True)
            raise SyncFailed(why, actions=(deleting, failure)) from error
        return [deleting, *events.from_provider(service, provider_events)]

    # --- the ensure branch --------------------------------------------------------------

    def _converge(
        self, key: str, service: Service, step: Ensure | Converged, writes: _Writes
    ) -> None:
        sweeps = self._nodes.sweeps()
        backends = self._nodes.backend_set()
        members = self._nodes.selection(service, backends)
        if isinstance(step, Ensure):
            self._ensure(key, service, step, backends=backends, members=members, writes=writes)
        elif members_moved(step.given, members):
            self._update_backends(
                key, service, step, backends=backends, members=members, writes=writes
            )
        elif step.given is not members:
            # Equal sets: remember this one, so that the next sweep passes us by.
            self._ledger.record(key, service, step.spec, members, ingress=_ingress(service))
        self._nodes.catch_up(key, backends, sweeps)

    def _ensure(
        self,
        key: str,
        service: Service,
        step: Ensure,
        *,
        backends: Backends,
        members: frozenset[BackendId],
        writes: _Writes,
    ) -> None:
        """EnsureLoadBalancer. A verification (`announce` false) records no
        Ensuring/Ensured events: it only reads unless the cloud drifted."""
        ensuring = events.event(service, "EnsuringLoadBalancer", "Ensuring load balancer")
        actions: list[Action] = [ensuring] if step.announce else []
        if step.add_finalizer:
            # Upstream's order: the finalizer lands before any cloud call, so a Service
            # deleted from here on cannot leak its load balancer.
            if not writes.land(*actions, _add_finalizer(service)):
                return
            actions = []
        if not backends.nodes:
            actions.append(events.no_nodes(service))
        # From the first cloud call on, the cloud may hold something of this Service's.
        self._ledger.acting_on(key, service)
        try:
            with self._reconciles.call(ENSURE, service):
                outcome = self._lbs.ensure(service=service, nodes=backends.nodes)
        except ImplementedElsewhere:
            self._ledger.record(key, service, step.spec, members, ingress=_ingress(service))
            return
        except RetryAfter:
            raise
        except Exception as error:  # any failure, ours or a library's: a Warning event
            reason = events.sync_failure_reason(error)
            why = events.describe(error)
            raise events.failed(service, why, actions=actions, reason=reason) from error
        actions.extend(events.from_provider(service, outcome.events))
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
        if step.announce:
            actions.append(events.event(service, "EnsuredLoadBalancer", "Ensured load balancer"))
        else:
            RESYNCS.inc()
        if not writes.land(*actions):
            return
        # The annotations just written come back as a Service update; with them in the
        # print, that echo needs no second ensure.
        merged = msgspec.structs.replace(
            service.metadata, annotations={**service.metadata.annotations, **annotations}
        )
        echo = msgspec.structs.replace(service, metadata=merged)
        printed = spec_print(echo, classes=self.classes)
        self._ledger.record(key, service, printed, members, ingress=outcome.ingress)

    def _update_backends(
        self,
        key: str,
        service: Service,
        step: Converged,
        *,
        backends: Backends,
        members: frozenset[BackendId],
        writes: _Writes,
    ) -> None:
        """UpdateLoadBalancer: only the backends changed since the last sync (the provider
        gets every backend node and applies the Service's node selector itself)."""
        LB_SYNCS.inc()
        started = time.monotonic()
        try:
            with self._reconciles.call(UPDATE, service):
                provider_events = self._lbs.update(service=service, nodes=backends.nodes)
        except ImplementedElsewhere:
            provider_events = ()
        except RetryAfter:
            raise
        except Exception as error:  # any failure, ours or a library's: a Warning event
            if self._load_balancer_gone(service):
                self._ledger.record(key, service, step.spec, members, ingress=_ingress(service))
                return
            NODESYNC_ERRORS.inc()
            # Upstream retries a failed node sync with a full EnsureLoadBalancer.
            self._ledger.ensure_next(key)
            why = events.describe(error)
            message = (
                f"Error updating load balancer with new hosts "
                f"{events.node_names(backends.nodes)}, error: {why}"
            )
            failure = events.event(service, "UpdateLoadBalancerFailed", message, warning=True)
            raise SyncFailed(why, actions=(failure,)) from error
        finally:
            HOST_LATENCY.observe(time.monotonic() - started)
        updated = "Updated load balancer with new hosts"
        done = (
            events.no_nodes(service)
            if not backends.nodes
            else events.event(service, "UpdatedLoadBalancer", updated)
        )
        if writes.land(*events.from_provider(service, provider_events), done):
            self._ledger.record(key, service, step.spec, members, ingress=_ingress(service))

    def _load_balancer_gone(self, service: Service) -> bool:
        try:
            return self._lbs.get(service=service) is None
        except Exception:  # unknown: assume it is there, retry the update
            return False


class _Writes:
    """How a Service sync commits: bound to its key, and the only place that reads an ack."""

    def __init__(self, commit: Commit, key: str) -> None:
        self._commit = commit
        self._key = key

    def land(self, *actions: Action) -> bool:
        """Commit and wait for the ack. False when the Service is gone or was re-created
        (its watch event enqueues the key again); raises when a retry may help."""
        if not actions:
            return True
        ack = self._commit(self._key, actions)
        if needs_retry(ack):
            raise SyncFailed("the manager did not apply the writes", actions=())
        assert ack is not None
        final = {FailureKind.NOT_FOUND, FailureKind.PRECONDITION}
        return not any(f.kind in final for f in ack.failures)


def _add_finalizer(service: Service) -> PatchServiceStatus:
    return PatchServiceStatus(
        namespace=service.namespace,
        name=service.name,
        uid=service.metadata.uid,
        add_finalizers=(FINALIZER,),
    )


def _ingress(service: Service) -> tuple[LoadBalancerIngress, ...]:
    return service.status.load_balancer.ingress


def _service(obj: Obj | None) -> Service | None:
    return obj if isinstance(obj, Service) else None
