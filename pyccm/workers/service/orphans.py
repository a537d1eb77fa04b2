"""Orphans: cloud resources this cluster owns that no live Service accounts for
(kubernetes/cloud-provider-openstack#3145: load balancers and floating IPs left behind after
a Service's or the cluster's deletion, a finalizer removed by hand, a worker killed
mid-delete).

The provider lists what carries this cluster's id (`LoadBalancers.owned`), each resource
with the Services it was made for; a resource is accounted for while one of them still
exists as a load-balancer Service (or is still being cleaned up: our finalizer). One
function decides, for `pyccm gc` and for the service worker's periodic scan alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import Gauge

from pyccm.protocol.messages import Action, ObjectRef, RecordEvent
from pyccm.protocol.views import Service
from pyccm.provider.interface import LoadBalancers, OwnedResource
from pyccm.workers.runtime.controller import Periodic
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.service.decision import may_account_for_cloud_resources

# The order a deletion goes in: what hangs off a load balancer, the load balancers (their
# floating IPs go with them), then what is left of the addresses and the groups.
DELETION_ORDER = ("listener", "load balancer", "floating IP", "security group", "route")


@dataclass(frozen=True)
class Live:
    """The Services that account for cloud resources: by `namespace/name` and by UID."""

    keys: frozenset[str]
    uids: frozenset[str]
    # The cluster is gone (`pyccm gc` without a Kubernetes API): everything it owns is an
    # orphan, even what cannot be traced to a Service.
    gone: bool = False

    @classmethod
    def of(cls, services: Iterable[Service]) -> Live:
        alive = [s for s in services if may_account_for_cloud_resources(s)]
        return cls(
            keys=frozenset(s.key for s in alive),
            # Legacy load-balancer names hold the UID without dashes.
            uids=frozenset(
                u for s in alive for u in (s.metadata.uid, s.metadata.uid.replace("-", ""))
            ),
        )


GONE = Live(keys=frozenset(), uids=frozenset(), gone=True)


def accounted_for(resource: OwnedResource, live: Live) -> bool:
    if live.gone:
        return False
    if not resource.services and not resource.service_uid:
        # Cannot be traced to a Service (a name cut at 255 characters): never called an
        # orphan while the cluster lives.
        return True
    if any(key in live.keys for key in resource.services):
        return True
    return bool(resource.service_uid) and resource.service_uid in live.uids


def orphans(owned: Sequence[OwnedResource], live: Live) -> list[OwnedResource]:
    """The resources of `owned` no live Service accounts for, in deletion order."""
    found = [r for r in owned if not accounted_for(r, live)]
    return sorted(found, key=lambda r: DELETION_ORDER.index(r.kind))


# --- the service worker's periodic scan (`--orphan-scan-period`) ----------------------------------

ORPHANS = "@orphans"
# Events need an object: the kube-system namespace stands for the cluster (its UID is the
# cluster id), since an orphan's Service is, by definition, gone.
CLUSTER_OBJECT = ObjectRef(kind="Namespace", name="kube-system")
ORPHANED = Gauge(
    "pyccm_orphaned_resources",
    "Cloud resources this cluster owns that no live Service accounts for, by kind, at the "
    "last orphan scan (--orphan-scan-period; pyccm gc deletes them).",
    ["kind"],
    multiprocess_mode="livemax",
)


def scan(
    load_balancers: LoadBalancers, services: Iterable[Service], *, component: str
) -> tuple[Action, ...]:
    """One scan: the gauge per kind, and one Warning event per orphan (aggregated by the
    manager's recorder: the same orphan found again bumps its count)."""
    found = orphans(load_balancers.owned(), Live.of(services))
    for kind in DELETION_ORDER:
        ORPHANED.labels(kind=kind).set(sum(1 for r in found if r.kind == kind))
    return tuple(
        RecordEvent(
            regarding=CLUSTER_OBJECT,
            reason="OrphanedCloudResource",
            message=f"{r.kind} {r.id} ({r.name or '-'}) is this cluster's, but no Service "
            f"accounts for it (made for {', '.join(r.services) or 'an unknown Service'}); "
            "pyccm gc --yes deletes it",
            type="Warning",
            component=component,
        )
        for r in found
    )


class OrphanScan:
    """The worker's side of the scan: a periodic that queues `ORPHANS` every `period`
    seconds (0: off), on one shard only (every shard sees every Service), and the sync of
    that key, which returns the scan's events."""

    def __init__(
        self,
        *,
        load_balancers: LoadBalancers,
        replica: Replica,
        period: float,
        scanning: bool,
        component: str,
    ) -> None:
        self._lbs = load_balancers
        self._replica = replica
        self._period = period
        self._scanning = scanning
        self._component = component

    def periodics(self, enqueue: Callable[[str], None]) -> list[Periodic]:
        if self._period <= 0 or not self._scanning:
            return []
        return [Periodic(name="orphan-scan", period=self._period, run=lambda: enqueue(ORPHANS))]

    def sync(self) -> tuple[Action, ...]:
        return scan(self._lbs, self._replica.services(), component=self._component)
