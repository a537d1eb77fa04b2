"""Cloud API calls per load-balancer operation, against the OpenStack simulator.

    .venv/bin/python -m tests.provider_lb.call_counts

Prints, for the four operations docs/upstream.md#call-sequences compares, how many Octavia and
Neutron calls pyccm makes (reads, writes) and over how many syncs, next to upstream's
sequence with an Octavia that is ACTIVE at the first poll (upstream polls
`GET /lbaas/loadbalancers/{id}` after every write; on a real cloud that is 10-20 GETs per
write, pyccm's equivalent is one cheap GET per requeue). Keystone tokens and version
discovery are left out of both. Not collected by pytest; `test_call_counts.py` holds the
same numbers as assertions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from pyccm.protocol.views import Service
from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm.provider.openstack.config import load_settings
from pyccm.provider.openstack.loadbalancer.verified import SETTLED
from pyccm.provider.openstack.transport.client import build_client
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.openstack.calllog import Call
from pyccm_sim.openstack.testing import OpenStackSimHandle, running_openstack_sim
from tests.support.lb import nodes, service, with_annotations

# Upstream (docs/upstream.md#call-sequences), default cloud.conf with subnet-id and
# floating-network-id, tags supported, security groups unmanaged, one ACTIVE poll per write.
UPSTREAM = {
    # GET ?name, GET ?name=legacy, POST lb, GET lb (poll), GET listeners,
    # GET fips?port_id, POST fip, GET security-groups?name
    "create a 2-port Service": (6, 2),
    # GET lb, GET listeners, 2x (GET pools, GET members), GET fips, GET security-groups
    "re-ensure, nothing changed": (8, 0),
    "re-ensure, nothing changed since it was verified": (8, 0),
    # GET lb, GET listeners, 2x (GET pools, GET members, PUT members, GET lb poll)
    "update: 10 nodes added": (8, 2),
    # GET lb, GET fips, DELETE fip, DELETE lb, GET lb (poll to 404), GET security-groups
    "delete": (4, 2),
}


@dataclass(frozen=True)
class Count:
    reads: int
    writes: int
    syncs: int


def _cloud_calls(calls: list[Call]) -> list[Call]:
    return [c for c in calls if "/lbaas/" in c.path or c.path.startswith("/network/v2.0/")]


def measure(sim: OpenStackSimHandle, action: Callable[[], Any]) -> tuple[Count, Any]:
    mark = sim.mark()
    syncs = 0
    while True:
        syncs += 1
        try:
            result = action()
            break
        except RetryAfter:
            continue
    calls = _cloud_calls(sim.calls(since=mark))
    writes = sum(c.is_write for c in calls)
    return Count(reads=len(calls) - writes, writes=writes, syncs=syncs), result


def build(sim: OpenStackSimHandle) -> LoadBalancers:
    path = Path(sim.config_dir) / "cloud.conf"
    provider_settings = ProviderSettings(
        cloud_config=path, cloud_api_qps=1e6, cloud_api_burst=10**6
    )
    settings = load_settings(path, environ={})
    client = build_client(
        settings=settings, provider_settings=provider_settings, registry=CollectorRegistry()
    )
    lbs = OpenStackCloud(
        client=client, settings=settings, provider_settings=provider_settings
    ).load_balancers()
    assert lbs is not None
    return lbs


def run(sim: OpenStackSimHandle) -> dict[str, Count]:
    lbs = build(sim)
    # Warm the process-wide caches (token, Octavia version document) on another Service.
    measure(sim, lambda: lbs.ensure(service=service("warm-up"), nodes=nodes(1)))
    svc: Service = service()
    counts: dict[str, Count] = {}
    counts["create a 2-port Service"], outcome = measure(
        sim, lambda: lbs.ensure(service=svc, nodes=nodes(2))
    )
    svc = with_annotations(svc, outcome.annotations_to_set)
    counts["re-ensure, nothing changed"], _ = measure(
        sim, lambda: lbs.ensure(service=svc, nodes=nodes(2))
    )
    # A verification counts once the load balancer's `updated_at` is over a second old
    # (its resolution, `verified.py`): one more full re-ensure after that, then the cheap one.
    time.sleep(SETTLED)
    measure(sim, lambda: lbs.ensure(service=svc, nodes=nodes(2)))
    counts["re-ensure, nothing changed since it was verified"], _ = measure(
        sim, lambda: lbs.ensure(service=svc, nodes=nodes(2))
    )
    counts["update: 10 nodes added"], _ = measure(
        sim, lambda: lbs.update(service=svc, nodes=nodes(12))
    )
    counts["delete"], _ = measure(sim, lambda: lbs.ensure_deleted(service=svc))
    return counts


def main() -> None:
    with running_openstack_sim(seed_nodes=12, provisioning_delay_s=0.0) as sim:
        counts = run(sim)
    print(f"{'operation':30} {'pyccm r/w (syncs)':>20} {'upstream r/w':>14}")
    for name, count in counts.items():
        up_reads, up_writes = UPSTREAM[name]
        mine = f"{count.reads}/{count.writes} ({count.syncs})"
        print(f"{name:30} {mine:>20} {f'{up_reads}/{up_writes}':>14}")


if __name__ == "__main__":
    main()
