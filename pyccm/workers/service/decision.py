"""Does this Service want our load balancer, and what must happen now: the one place the
service worker decides it.

Pure functions of the Service as the replica shows it, what this process last did for it
(`ledger.Synced`) and the configuration (`Claim`: the classes and the shard this process
owns). They call nothing, write nothing, and return what to do (`plan.py` lays it out
as operations, `executor.py` carries them out).
The predicate "type LoadBalancer of a claimed class" is the manager's too (its service view
keeps exactly those Services and those holding our finalizer): it is
`protocol.projections.wants_load_balancer`, and this module reads it nowhere else. Which
live Services still account for cloud resources (the orphan scan's and `pyccm gc`'s rule)
is here too: `may_account_for_cloud_resources`.

The table, in the order `decide` asks:

* another shard's key: Skip;
* gone, or re-created under a new UID, after this process acted on a copy that wanted a
  load balancer: that copy's load balancer is deleted first (`Decision.replaced`, events
  only), and what was last done is forgotten; a gone Service is then Nothing;
* our finalizer and a deletionTimestamp, or our finalizer on another type: Delete (the
  ingress cleared unless another class's, the finalizer dropped);
* wants no load balancer (any more) but may have ours (synced here, or a claimed class
  showing an ingress): Delete; a Delete whose writes landed but whose echo has not come
  yet: Nothing;
* wants none and has nothing of ours (another type, another class): Skip;
* never ensured by this process, `needsUpdate` print changed, a drift resync due, or a
  status that no longer shows the ingress last written (another writer cleared or changed
  it): Ensure (our finalizer first if missing; Ensuring/Ensured events unless it only
  verifies: a drift resync, a changed status, or a Service found converged by an earlier
  process);
* print unchanged: Converged (the members follow the node set).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyccm.flags.load_balancer_class import UNCLASSED, LoadBalancerClasses
from pyccm.protocol.projections import wants_load_balancer
from pyccm.protocol.views import Service
from pyccm.workers.runtime.controller import Later
from pyccm.workers.service.ledger import Synced
from pyccm.workers.service.policy import FINALIZER, BackendId, Shard


@dataclass(frozen=True)
class Claim:
    """The Services this process owns: their classes (`--load-balancer-class(-only)`) and
    their keys (`--shard`)."""

    classes: LoadBalancerClasses = UNCLASSED
    shard: Shard = field(default_factory=Shard)

    def wants(self, service: Service) -> bool:
        """Type LoadBalancer and a class we claim."""
        return wants_load_balancer(service, classes=self.classes)

    def foreign(self, service: Service) -> bool:
        """A Service of a class this tree does not claim: another controller's."""
        lb_class = service.spec.load_balancer_class
        return lb_class is not None and not self.classes.claims(lb_class)


# --- the steps ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Ensure:
    """EnsureLoadBalancer. `add_finalizer`: our finalizer is committed (and acked) before
    the first cloud call, so a Service deleted from then on cannot leak its load balancer.
    `announce`: EnsuringLoadBalancer / EnsuredLoadBalancer events; without it the ensure is
    a verification (a drift resync, a Service found converged at start): reads unless the
    cloud drifted, no events. `spec`: the print to record once the writes landed."""

    spec: tuple[object, ...]
    announce: bool
    add_finalizer: bool


@dataclass(frozen=True)
class Converged:
    """Nothing changed since the last ensure: no cloud call, unless the backends the node
    selector picks now differ from those the load balancer was given (`given`;
    `members_moved`): then UpdateLoadBalancer, members only."""

    spec: tuple[object, ...]
    given: frozenset[BackendId]


@dataclass(frozen=True)
class Delete:
    """Delete the load balancer (if the cloud has one), then one `services/status` patch
    that drops our finalizer (`patch`) and clears the ingress (`clear_ingress`: never the
    status of another class's Service, which the other controller owns);
    DeletingLoadBalancer / DeletedLoadBalancer events."""

    clear_ingress: bool
    patch: bool
    # A Service of a class we do not claim that this process never synced: the finalizer
    # it holds has our name but is most likely its owner's, who removes it once its own
    # cleanup is done. The cleanup waits `FOREIGN_GRACE` first, so the owner goes first.
    wait_for_owner: bool = False


# How long a deleted Service of another class, unknown to this process, is left to its own
# controller before we look for a load balancer of ours (pyccm.flags.load_balancer_class).
FOREIGN_GRACE = 30.0


@dataclass(frozen=True)
class Skip:
    """Not ours to touch: no cloud call, no write."""

    reason: str


@dataclass(frozen=True)
class Nothing:
    """Ours, and nothing to do now."""

    reason: str


Step = Ensure | Converged | Delete | Skip | Nothing


@dataclass(frozen=True)
class Decision:
    """`replaced`: a copy acted on earlier (the Service vanished without our finalizer, or
    was re-created under a new UID) whose load balancer goes first: deleted if the cloud
    has it, events only (the object is gone). `forget`: what was last done no longer
    applies. Then `step`, for the Service the replica holds."""

    step: Step
    replaced: Service | None = None
    forget: bool = False


# --- the decisions ------------------------------------------------------------------------


def needs_cleanup(service: Service) -> bool:
    """Our finalizer is on a Service that is going away or no longer a LoadBalancer."""
    return FINALIZER in service.metadata.finalizers and (
        service.metadata.deletion_timestamp is not None or service.spec.type != "LoadBalancer"
    )


def spec_print(service: Service, *, classes: LoadBalancerClasses) -> tuple[object, ...]:
    """Everything upstream's `needsUpdate` compares: two Services with equal prints need
    no new EnsureLoadBalancer. Not compared, as upstream: labels, selector, status,
    `ipFamilyPolicy`, `allocateLoadBalancerNodePorts`, `internalTrafficPolicy`."""
    spec = service.spec
    wants = wants_load_balancer(service, classes=classes)
    return (
        wants,
        spec.load_balancer_source_ranges if wants else (),
        tuple(
            (p.name, p.protocol, p.port, p.node_port, p.target_port, p.app_protocol)
            for p in spec.ports
        ),
        spec.session_affinity,
        spec.session_affinity_config,
        spec.load_balancer_ip,
        spec.external_ips,
        tuple(sorted(service.metadata.annotations.items())),
        service.metadata.uid,
        spec.external_traffic_policy,
        spec.health_check_node_port,
        len(spec.ip_families),
    )


def converged_elsewhere(service: Service, *, claim: Claim) -> bool:
    """Looks done by an earlier process (a restart, a new leader's snapshot): ours, with
    our finalizer and an address, and not going away. Asked only of a Service this process
    has no record of."""
    return (
        claim.wants(service)
        and not needs_cleanup(service)
        and FINALIZER in service.metadata.finalizers
        and bool(service.status.load_balancer.ingress)
    )


def may_have_ours(service: Service, prior: Synced | None, *, claim: Claim) -> bool:
    """Whether a live Service that wants no load balancer from us (any more) may still
    have one of ours: we synced it, or (for a class we claim) its status shows an
    address. The status of a class we do not claim is another controller's, so such
    a Service unknown to this process is left alone while it lives
    (`pyccm.flags.load_balancer_class` says how it can hold our finalizer at all)."""
    if prior is not None:
        return True
    claimed = claim.classes.claims(service.spec.load_balancer_class)
    return claimed and bool(service.status.load_balancer.ingress)


def may_account_for_cloud_resources(service: Service) -> bool:
    """A live Service the cloud resources made for it still belong to (the orphan scan's
    and `pyccm gc`'s rule): of type LoadBalancer, of any class (`pyccm gc` knows no
    claim, and a resource is called an orphan only when nothing could want it), or still
    holding our finalizer (its cleanup is to come)."""
    return service.spec.type == "LoadBalancer" or FINALIZER in service.metadata.finalizers


def decide(
    key: str,
    service: Service | None,
    last: Synced | None,
    *,
    claim: Claim,
    resync_due: bool = False,
    cleaned_uid: str | None = None,
) -> Decision:
    """What a sync of `key` must do now. `last`: what this process last did for it;
    `resync_due`: the drift resync period passed; `cleaned_uid`: the UID whose cleanup
    landed under this key and whose echo is still to come."""
    if not claim.shard.owns(key):
        return Decision(step=Skip("another shard's key"))
    if service is None:
        # Deleted without our finalizer (a user removed it): delete what we made.
        replaced = last.service if last is not None and claim.wants(last.service) else None
        return Decision(step=Nothing("gone"), replaced=replaced, forget=True)
    if last is not None and last.service.metadata.uid != service.metadata.uid:
        # Deleted and re-created under the same name: the old LB goes first.
        replaced = last.service if claim.wants(last.service) else None
        step = _step(service, None, claim=claim, resync_due=resync_due, cleaned_uid=None)
        return Decision(step=step, replaced=replaced, forget=True)
    return Decision(
        step=_step(service, last, claim=claim, resync_due=resync_due, cleaned_uid=cleaned_uid)
    )


def _step(
    service: Service,
    prior: Synced | None,
    *,
    claim: Claim,
    resync_due: bool,
    cleaned_uid: str | None,
) -> Step:
    wants = claim.wants(service)
    if needs_cleanup(service) or (not wants and may_have_ours(service, prior, claim=claim)):
        if cleaned_uid == service.metadata.uid:
            return Nothing("cleanup landed; the finalizer's removal is still to show")
        # A Service of another class (deleted while holding our finalizer) has the other
        # controller's status: only our finalizer goes.
        foreign = claim.foreign(service)
        clear = bool(service.status.load_balancer.ingress) and not foreign
        return Delete(
            clear_ingress=clear,
            patch=clear or FINALIZER in service.metadata.finalizers,
            wait_for_owner=foreign and prior is None,
        )
    if not wants:
        if service.spec.type != "LoadBalancer":
            return Skip(f"type {service.spec.type}")
        return Skip(f"loadBalancerClass {service.spec.load_balancer_class} is not claimed")
    spec = spec_print(service, classes=claim.classes)
    if prior is not None and prior.spec == spec and not resync_due and status_kept(service, prior):
        return Converged(spec=spec, given=prior.backends)
    # A Service this process first sees already converged is verified like a drift resync:
    # without Ensuring/Ensured events, so a restart of the tree writes nothing when
    # nothing changed.
    if prior is None:
        announce = not converged_elsewhere(service, claim=claim)
    else:
        announce = prior.spec != spec
    add = FINALIZER not in service.metadata.finalizers
    return Ensure(spec=spec, announce=announce, add_finalizer=add)


def status_kept(service: Service, prior: Synced) -> bool:
    """The Service's status still shows the ingress this process last left in it. Upstream
    compares the spec only, so a status another writer cleared (a GitOps tool applying the
    Service whole) stays empty until the next resync; here the next event for the Service
    (the clearing itself) verifies the load balancer and writes the ingress back."""
    return service.status.load_balancer.ingress == prior.ingress


def members_moved(given: frozenset[BackendId], picked: frozenset[BackendId]) -> bool:
    """The load balancer was given other backends than its node selector picks now.
    (Identity first: every Service of a sweep shares one set of 5,000 ids.)"""
    return given is not picked and given != picked


def service_keys(
    key: str, old: Service | None, new: Service | None, *, known: bool, claim: Claim
) -> tuple[str, ...]:
    """Which keys a Service change enqueues. `known`: this process has a record of it.
    Level-triggered: sync compares the Service with what was last done, so an echo of our
    own status write or a label edit costs no cloud call."""
    if not claim.shard.owns(key):
        return ()
    if new is None:
        # Deleted: only a Service this process gave a load balancer has work left (with
        # our finalizer, the delete showed up earlier as a deletionTimestamp).
        return (key,) if known else ()
    if old is None and not known and converged_elsewhere(new, claim=claim):
        # A restarted worker (or a new leader's snapshot) re-checks every Service; the
        # ones that look done wait behind those that need work, so a worker restarted
        # over and over still gets new Services their load balancers.
        return (Later(key),)
    moved_away = old is not None and claim.wants(old)
    if claim.wants(new) or needs_cleanup(new) or moved_away:
        return (key,)
    return ()
