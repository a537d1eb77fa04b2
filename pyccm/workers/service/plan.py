"""What one sync of a Service key does, in order: the plan, laid out before anything runs.

`make_plan` is pure: from what the sync read (the replica's copy, the ledger's entry, the
backends) it asks `decision.decide` what the Service needs and lays
that out as operations, which `executor.Executor` carries out one after the other:

* events and writes: `Tell` queues them (built here, whole), `Land` commits what is
  queued and waits for the manager's ack;
* the cloud: `DeleteLoadBalancer`, `EnsureLoadBalancer`, `UpdateLoadBalancer` (their
  outcome's events, status and annotations join the queue: only those depend on the cloud);
* bookkeeping: `ActingOn`, `Record`, `RecordEnsured`, `Forget`, `CleanedUp`,
  `WaitForOwner`, `OwnerWaitOver`, `CountResync` (the ledger, a counter), and `CatchUp`
  (the node sweep);
* `Idle`: nothing to do, and why (logged).

A plan is stages of operations. A `Land` whose Service is gone or was re-created, an
ensure that another controller implements, or a failed member update whose load balancer
is gone ends its stage (its bookkeeping must not happen), not the plan: the stages are the
replaced copy's deletion, the Service's own operations, then the catch-up with the sweeps.
An error ends the sync (`SyncFailed` carries the queued events and the Warning;
`RetryAfter` brings the key back later).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyccm.protocol.messages import Action, PatchServiceStatus, RecordEvent
from pyccm.protocol.views import Node, Service
from pyccm.workers.service import events
from pyccm.workers.service.decision import (
    Claim,
    Converged,
    Delete,
    Ensure,
    Nothing,
    Skip,
    decide,
    members_moved,
)
from pyccm.workers.service.ledger import Entry, Synced
from pyccm.workers.service.policy import FINALIZER, BackendId
from pyccm.workers.service.sweep import Backends, Members

# --- the operations ------------------------------------------------------------------------


@dataclass(frozen=True)
class Tell:
    """Queue these events and writes for the next `Land`."""

    actions: tuple[Action, ...]


@dataclass(frozen=True)
class Land:
    """Commit what is queued and wait for the ack (a retry may help: `SyncFailed`; the
    Service gone or re-created: the stage ends)."""


@dataclass(frozen=True)
class DeleteLoadBalancer:
    """EnsureLoadBalancerDeleted: look the load balancer up, and if the cloud has it,
    queue `deleting` and delete it (its events queued after)."""

    service: Service
    deleting: RecordEvent


@dataclass(frozen=True)
class EnsureLoadBalancer:
    """EnsureLoadBalancer with these nodes; queue its events, the status (if the ingress
    changed) and the annotations that differ. Another controller implements it: record
    `elsewhere` and end the stage."""

    service: Service
    nodes: tuple[Node, ...]
    elsewhere: Synced


@dataclass(frozen=True)
class UpdateLoadBalancer:
    """UpdateLoadBalancer (members only) with these nodes; queue its events. On failure,
    a load balancer found gone records `if_gone` and ends the stage; otherwise the next
    sync ensures in full and the sync fails with `UpdateLoadBalancerFailed`."""

    service: Service
    nodes: tuple[Node, ...]
    if_gone: Synced


@dataclass(frozen=True)
class ActingOn:
    """The ledger remembers the copy before the first cloud call (`Ledger.acting_on`)."""

    service: Service


@dataclass(frozen=True)
class Record:
    """The ledger records what was done."""

    synced: Synced


@dataclass(frozen=True)
class RecordEnsured:
    """The ledger records the ensure: the print of the Service as the annotations just
    written leave it (their echo needs no second ensure), and the outcome's ingress."""

    service: Service
    backends: frozenset[BackendId]


@dataclass(frozen=True)
class Forget:
    """What was last done no longer applies."""


@dataclass(frozen=True)
class CleanedUp:
    """The cleanup of the Service `uid` landed."""

    uid: str


@dataclass(frozen=True)
class WaitForOwner:
    """Another class's Service: left to its own controller for `decision.FOREIGN_GRACE`
    from the first time (`RetryAfter` until then)."""


@dataclass(frozen=True)
class OwnerWaitOver:
    """Forget when the wait for the owner started."""


@dataclass(frozen=True)
class CountResync:
    """A drift resync's verification: `pyccm_service_lb_resyncs_total`."""


@dataclass(frozen=True)
class CatchUp:
    """A sweep that ran meanwhile may have missed this Service (`NodeSweep.catch_up`)."""

    backends: Backends
    sweeps: int


@dataclass(frozen=True)
class Idle:
    """Nothing to do, and why."""

    reason: str


Op = (
    Tell
    | Land
    | DeleteLoadBalancer
    | EnsureLoadBalancer
    | UpdateLoadBalancer
    | ActingOn
    | Record
    | RecordEnsured
    | Forget
    | CleanedUp
    | WaitForOwner
    | OwnerWaitOver
    | CountResync
    | CatchUp
    | Idle
)
Stage = tuple[Op, ...]


@dataclass(frozen=True)
class Plan:
    key: str
    stages: tuple[Stage, ...]


# --- laying it out --------------------------------------------------------------------------


def make_plan(
    key: str, service: Service | None, entry: Entry, members: Members | None, *, claim: Claim
) -> Plan:
    """What a sync of `key` does now, in order, from what it read: the Service in the
    replica (None: gone), the ledger's entry for the key, and the backends (None when the
    Service is gone)."""
    decision = decide(
        key,
        service,
        entry.last,
        claim=claim,
        resync_due=entry.resync_due,
        cleaned_uid=entry.cleaned_uid,
    )
    stages: list[Stage] = []
    if service is None:
        stages.append((OwnerWaitOver(),))  # its owner removed the finalizer
    if decision.replaced is not None:
        # The path without a finalizer: the Service object is gone, its LB may not be.
        stages.append(_delete_replaced(decision.replaced))
    forget: Stage = (Forget(),) if decision.forget else ()
    match decision.step:
        case Skip(reason) | Nothing(reason):
            stages.append((*forget, Idle(reason)))
        case Delete() as step if service is not None:
            stages.append((*forget, *_cleanup(service, step)))
        case Ensure() as step if service is not None and members is not None:
            stages.append((*forget, *_ensure(service, step, members)))
            stages.append((CatchUp(backends=members.backends, sweeps=members.sweeps),))
        case Converged() as step if service is not None and members is not None:
            stages.append((*forget, *_converged(service, step, members)))
            stages.append((CatchUp(backends=members.backends, sweeps=members.sweeps),))
    return Plan(key=key, stages=tuple(stages))


def _delete_replaced(replaced: Service) -> Stage:
    deleting = _deleting(replaced)
    return (DeleteLoadBalancer(replaced, deleting), Tell((events.deleted(replaced),)), Land())


def _cleanup(service: Service, step: Delete) -> Stage:
    """Delete the load balancer, then clear the status and drop the finalizer."""
    writes: list[Action] = []
    if step.patch:
        writes.append(
            PatchServiceStatus(
                namespace=service.namespace,
                name=service.name,
                uid=service.metadata.uid,
                ingress=() if step.clear_ingress else None,
                remove_finalizers=(FINALIZER,),
            )
        )
    writes.append(events.deleted(service))
    wait: Stage = (WaitForOwner(),) if step.wait_for_owner else ()
    return (
        *wait,
        OwnerWaitOver(),
        DeleteLoadBalancer(service, _deleting(service)),
        Tell(tuple(writes)),
        Land(),
        CleanedUp(service.metadata.uid),
    )


def _ensure(service: Service, step: Ensure, members: Members) -> Stage:
    """EnsureLoadBalancer. A verification (`announce` false) tells no Ensuring/Ensured
    events: it only reads unless the cloud drifted."""
    ops: list[Op] = []
    before: list[Action] = []
    if step.announce:
        before.append(events.event(service, "EnsuringLoadBalancer", "Ensuring load balancer"))
    if step.add_finalizer:
        # Upstream's order: the finalizer lands before any cloud call, so a Service
        # deleted from here on cannot leak its load balancer.
        ops += [Tell((*before, _add_finalizer(service))), Land()]
        before = []
    nodes = members.backends.nodes
    if not nodes:
        before.append(events.no_nodes(service))
    if before:
        ops.append(Tell(tuple(before)))
    ingress = service.status.load_balancer.ingress
    as_it_is = Synced(service=service, spec=step.spec, backends=members.picked, ingress=ingress)
    ops += [
        # From the first cloud call on, the cloud may hold something of this Service's.
        ActingOn(service),
        EnsureLoadBalancer(service, nodes, elsewhere=as_it_is),
        Tell((events.event(service, "EnsuredLoadBalancer", "Ensured load balancer"),))
        if step.announce
        else CountResync(),
        Land(),
        RecordEnsured(service, members.picked),
    ]
    return tuple(ops)


def _converged(service: Service, step: Converged, members: Members) -> Stage:
    """Members only, if the node selector's pick moved (UpdateLoadBalancer: the provider
    gets every backend node and applies the selector itself)."""
    ingress = service.status.load_balancer.ingress
    synced = Synced(service=service, spec=step.spec, backends=members.picked, ingress=ingress)
    if members_moved(step.given, members.picked):
        nodes = members.backends.nodes
        updated = "Updated load balancer with new hosts"
        done = (
            events.no_nodes(service)
            if not nodes
            else events.event(service, "UpdatedLoadBalancer", updated)
        )
        return (
            UpdateLoadBalancer(service, nodes, if_gone=synced),
            Tell((done,)),
            Land(),
            Record(synced),
        )
    if step.given is not members.picked:
        # Equal sets: remember this one, so that the next sweep passes us by.
        return (Record(synced),)
    return ()


def _deleting(service: Service) -> RecordEvent:
    return events.event(service, "DeletingLoadBalancer", "Deleting load balancer")


def _add_finalizer(service: Service) -> PatchServiceStatus:
    return PatchServiceStatus(
        namespace=service.namespace,
        name=service.name,
        uid=service.metadata.uid,
        add_finalizers=(FINALIZER,),
    )
