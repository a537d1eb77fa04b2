"""service: upstream's service controller (docs/upstream.md#service-controller), with every
cloud operation on a Service serialized on its key.

Upstream runs Service syncs on one queue and node-driven backend updates on another, so
an `UpdateLoadBalancer` can race an `EnsureLoadBalancer` or a delete of the same Service.
Here there is one queue, of three kinds of key, each with one owner:

* `namespace/name` (possibly `Later`): a Service. Its sync reads top to bottom: it reads
  what it decides from (the replica's copy, the ledger's entry, the backends), lays out
  what to do (`plan.make_plan`, pure: `decision.decide` says what the Service needs under
  the claim, classes and shard, and the plan lists the operations that does, in order:
  delete, ensure with the finalizer first, update the members only, or nothing) and hands
  that to the one executor (`executor.Executor`): events, writes, bookkeeping and the
  cloud call, the writes committed by the executor itself. The sync returns nothing;
* `@nodes`: the node sweep (`sweep.NodeSweep`), which enqueues the Services whose
  members a burst of node changes moved, and returns nothing;
* `@orphans`: the orphan scan (`orphans.OrphanScan`), which returns its Warning events.

The queue guarantees one sync per key at a time, so nothing on one Service overlaps. A
load balancer still provisioning makes the provider raise `RetryAfter`; the key comes back
after that delay and no thread waits for Octavia.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from pyccm.flags.load_balancer_class import UNCLASSED, LoadBalancerClasses
from pyccm.protocol.messages import Action, Topic
from pyccm.protocol.views import Service
from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm.workers.runtime.clock import MONOTONIC, Clock
from pyccm.workers.runtime.controller import Lane, Obj, Periodic
from pyccm.workers.runtime.ratelimit import RateLimiter, service_controller_rate_limiter
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.service.decision import Claim, service_keys
from pyccm.workers.service.events import COMPONENT
from pyccm.workers.service.executor import Commit, Executor
from pyccm.workers.service.ledger import Ledger
from pyccm.workers.service.orphans import ORPHANS, OrphanScan
from pyccm.workers.service.plan import make_plan
from pyccm.workers.service.policy import Shard
from pyccm.workers.service.sweep import SWEEP, NodeSweep


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
    # about what no Service accounts for (kubernetes/cloud-provider-openstack#3145). Off (0)
    # by default: it reads every load balancer, floating IP and security group the cluster
    # owns; `pyccm gc` does the same on demand.
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
        self._settings = settings
        self._claim = Claim(classes=settings.classes, shard=settings.shard)
        self._ledger = Ledger()
        self._nodes = NodeSweep(
            replica=replica,
            ledger=self._ledger,
            clock=clock,
            owned=self._owned_services,
            load_balancers=load_balancers,
        )
        self._executor = Executor(
            load_balancers=load_balancers,
            ledger=self._ledger,
            nodes=self._nodes,
            commit=commit,
            classes=settings.classes,
            clock=clock,
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
            service = self._replica.service(key)
            members = None if service is None else self._nodes.members(service)
            entry = self._ledger.entry(key)
            plan = make_plan(key, service, entry, members, claim=self._claim)
            self._executor.run(plan)
        except RetryAfter:
            raise  # the sync goes on later: the node-sync pass waits for it
        except Exception:
            self._nodes.synced(key, passes)
            raise
        self._nodes.synced(key, passes)
        return ()


def _service(obj: Obj | None) -> Service | None:
    return obj if isinstance(obj, Service) else None
