"""Carries out a `plan.Plan`, one operation after the other: the one place a Service sync
calls the cloud, commits writes and keeps its books.

How a Service sync stands to the runtime's contract (`workers/runtime/controller.py`: a
sync returns the actions the manager should apply): every write of a Service sync is
followed by bookkeeping that must not happen unless the write landed, and the runtime
does not tell a controller whether the actions it returned landed. So the executor
commits the writes itself (`Land`, through `_Writes.land`, the one place that reads an
ack), waits for the ack, and the sync returns nothing:

* the finalizer, acked **before the first cloud call**: upstream's order, so a Service
  deleted from then on cannot leak its load balancer;
* a finished step's writes (status, annotations, events; the cleanup's finalizer
  removal; the events of a vanished Service's deletion), acked **before the step is
  recorded as done or forgotten**: a write the manager could not apply fails the sync
  (retried with backoff), and is never forgotten as done.

A failure's Warnings ride on `SyncFailed` after the events still queued (the runner
delivers them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec
from prometheus_client import Counter, Histogram

from pyccm.flags.load_balancer_class import LoadBalancerClasses
from pyccm.protocol.messages import (
    Ack,
    Action,
    FailureKind,
    PatchServiceAnnotations,
    PatchServiceStatus,
)
from pyccm.protocol.views import LoadBalancerIngress, Service
from pyccm.provider.errors import ImplementedElsewhere, RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm.workers.runtime.clock import Clock
from pyccm.workers.runtime.commit import needs_retry
from pyccm.workers.runtime.controller import SyncFailed
from pyccm.workers.service import events
from pyccm.workers.service.decision import FOREIGN_GRACE, spec_print
from pyccm.workers.service.ledger import Ledger, Synced
from pyccm.workers.service.plan import (
    ActingOn,
    CatchUp,
    CleanedUp,
    CountResync,
    DeleteLoadBalancer,
    EnsureLoadBalancer,
    Forget,
    Idle,
    Land,
    Op,
    OwnerWaitOver,
    Plan,
    Record,
    RecordEnsured,
    Tell,
    UpdateLoadBalancer,
    WaitForOwner,
)
from pyccm.workers.service.policy import BackendId
from pyccm.workers.service.reconciles import DELETE, ENSURE, UPDATE, Reconciles
from pyccm.workers.service.sweep import LATENCY_BUCKETS, NodeSweep

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


@dataclass
class _Run:
    """One plan's progress: the events and writes queued for the next `Land`, and what
    the ensure left for `RecordEnsured` (the annotations it wrote, the ingress)."""

    key: str
    writes: _Writes
    queued: list[Action] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    ingress: tuple[LoadBalancerIngress, ...] = ()


class Executor:
    def __init__(
        self,
        *,
        load_balancers: LoadBalancers,
        ledger: Ledger,
        nodes: NodeSweep,
        commit: Commit,
        classes: LoadBalancerClasses,
        clock: Clock,
    ) -> None:
        self._lbs = load_balancers
        self._ledger = ledger
        self._nodes = nodes
        self._commit = commit
        self._classes = classes
        self._clock = clock
        self._reconciles = Reconciles(clock)

    def run(self, plan: Plan) -> None:
        run = _Run(key=plan.key, writes=_Writes(self._commit, plan.key))
        for stage in plan.stages:
            for op in stage:
                if not self._do(op, run):
                    break  # the Service is gone or not ours: the rest of the stage with it

    def _do(self, op: Op, run: _Run) -> bool:
        """Carry out `op`; False ends the stage."""
        match op:
            case Tell(actions):
                run.queued.extend(actions)
            case Land():
                actions, run.queued = tuple(run.queued), []
                return run.writes.land(*actions)
            case DeleteLoadBalancer():
                run.queued.extend(self._delete(op, run))
            case EnsureLoadBalancer():
                return self._ensure(op, run)
            case UpdateLoadBalancer():
                return self._update(op, run)
            case RecordEnsured(service, backends):
                self._record_ensured(run, service, backends)
            case Idle(reason):
                log.debug("%s: %s", run.key, reason)
            case _:
                self._keep_books(op, run.key)
        return True

    def _keep_books(self, op: Op, key: str) -> None:
        match op:
            case ActingOn(service):
                self._ledger.acting_on(key, service)
            case Record(synced):
                self._ledger.record(key, synced)
            case Forget():
                self._ledger.forget(key)
            case CleanedUp(uid):
                self._ledger.cleaned_up(key, uid)
            case WaitForOwner():
                self._wait_for_owner(key)
            case OwnerWaitOver():
                self._ledger.owner_wait_over(key)
            case CountResync():
                RESYNCS.inc()
            case CatchUp(backends, sweeps):
                self._nodes.catch_up(key, backends, sweeps)

    # --- the cloud ------------------------------------------------------------------------

    def _delete(self, op: DeleteLoadBalancer, run: _Run) -> list[Action]:
        # Upstream's EnsureLoadBalancerDeleted looks the load balancer up first too: the
        # look-up is part of the reconcile it counts.
        service = op.service
        with self._reconciles.call(DELETE, service) as call:
            try:
                exists = self._lbs.get(service=service) is not None
            except RetryAfter:
                raise
            except Exception as error:  # any failure, ours or a library's: a Warning event
                why = events.describe(error)
                message = f"failed to check if load balancer exists before cleanup: {why}"
                raise events.failed(service, message, actions=run.queued) from error
            if not exists:
                return []
            try:
                provider_events = self._lbs.ensure_deleted(service=service)
            except ImplementedElsewhere:
                call.skip()
                provider_events = ()
            except RetryAfter:
                raise
            except Exception as error:  # any failure, ours or a library's: a Warning event
                why = events.describe(error)
                message = f"Error deleting load balancer: {why}"
                failure = events.event(service, "DeleteLoadBalancerFailed", message, warning=True)
                raise SyncFailed(why, actions=(*run.queued, op.deleting, failure)) from error
        return [op.deleting, *events.from_provider(service, provider_events)]

    def _ensure(self, op: EnsureLoadBalancer, run: _Run) -> bool:
        service = op.service
        try:
            with self._reconciles.call(ENSURE, service):
                outcome = self._lbs.ensure(service=service, nodes=op.nodes)
        except ImplementedElsewhere:
            self._ledger.record(run.key, op.elsewhere)
            return False
        except RetryAfter:
            raise
        except Exception as error:  # any failure, ours or a library's: a Warning event
            reason = events.sync_failure_reason(error)
            why = events.describe(error)
            raise events.failed(service, why, actions=run.queued, reason=reason) from error
        run.queued.extend(events.from_provider(service, outcome.events))
        run.annotations = {
            k: v
            for k, v in outcome.annotations_to_set.items()
            if service.metadata.annotations.get(k) != v
        }
        run.ingress = outcome.ingress
        # Status before annotations: the writer's status patch carries the cached
        # resourceVersion, which an annotation patch just before it would have moved (a
        # 409 and a re-read for half the Services in the benchmark); the annotation
        # patch has no resourceVersion to conflict on.
        namespace, name, uid = service.namespace, service.name, service.metadata.uid
        if outcome.ingress != service.status.load_balancer.ingress:
            run.queued.append(
                PatchServiceStatus(namespace=namespace, name=name, uid=uid, ingress=outcome.ingress)
            )
        if run.annotations:
            run.queued.append(
                PatchServiceAnnotations(
                    namespace=namespace, name=name, uid=uid, annotations=dict(run.annotations)
                )
            )
        return True

    def _update(self, op: UpdateLoadBalancer, run: _Run) -> bool:
        service = op.service
        LB_SYNCS.inc()
        started = time.monotonic()
        try:
            with self._reconciles.call(UPDATE, service):
                provider_events = self._lbs.update(service=service, nodes=op.nodes)
        except ImplementedElsewhere:
            provider_events = ()
        except RetryAfter:
            raise
        except Exception as error:  # any failure, ours or a library's: a Warning event
            if self._load_balancer_gone(service):
                self._ledger.record(run.key, op.if_gone)
                return False
            NODESYNC_ERRORS.inc()
            # Upstream retries a failed node sync with a full EnsureLoadBalancer.
            self._ledger.ensure_next(run.key)
            why = events.describe(error)
            message = (
                f"Error updating load balancer with new hosts "
                f"{events.node_names(op.nodes)}, error: {why}"
            )
            failure = events.event(service, "UpdateLoadBalancerFailed", message, warning=True)
            raise SyncFailed(why, actions=(*run.queued, failure)) from error
        finally:
            HOST_LATENCY.observe(time.monotonic() - started)
        run.queued.extend(events.from_provider(service, provider_events))
        return True

    def _load_balancer_gone(self, service: Service) -> bool:
        try:
            return self._lbs.get(service=service) is None
        except Exception:  # unknown: assume it is there, retry the update
            return False

    # --- bookkeeping ----------------------------------------------------------------------

    def _record_ensured(self, run: _Run, service: Service, backends: frozenset[BackendId]) -> None:
        # The annotations just written come back as a Service update; with them in the
        # print, that echo needs no second ensure.
        merged = msgspec.structs.replace(
            service.metadata, annotations={**service.metadata.annotations, **run.annotations}
        )
        echo = msgspec.structs.replace(service, metadata=merged)
        printed = spec_print(echo, classes=self._classes)
        synced = Synced(service=service, spec=printed, backends=backends, ingress=run.ingress)
        self._ledger.record(run.key, synced)

    def _wait_for_owner(self, key: str) -> None:
        now = self._clock.now()
        left = self._ledger.waiting_for_owner(key, now) + FOREIGN_GRACE - now
        if left > 0:
            raise RetryAfter(f"{key}: another class's Service, left to its owner", delay=left)


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
