"""Driving the Octavia provider against the OpenStack simulator (tests/provider_lb, the
service controller's, gc's and plan's tests).

`converge` repeats a call while it raises `RetryAfter`, as the service worker would
(without sleeping: the simulator's provisioning delay is 0), and returns the outcome with
the delays it was asked to wait. Services and Nodes are built from the seeded scenario, so
member addresses are the simulated servers' addresses. The `make_lbs` fixture
(tests/support/fixtures.py) builds the provider's `LoadBalancers`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from pyccm.protocol.messages import RecordEvent
from pyccm.protocol.views import (
    LoadBalancerStatus,
    Node,
    OwnerMeta,
    Service,
    ServicePort,
    ServiceSpec,
    ServiceStatus,
)
from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import LoadBalancerOutcome, LoadBalancers
from pyccm.provider.openstack.config import load_settings
from pyccm.workers.runtime.controller import SyncFailed
from pyccm_sim.openstack.calllog import Call, Seq
from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node
from tests.support.nodes import node

T = TypeVar("T")


MakeLbs = Callable[..., LoadBalancers]


def vip_subnet(sim: OpenStackSimHandle) -> str:
    """The `subnet-id` of the simulator's `cloud.conf`."""
    settings = load_settings(sim.cloud_conf_path, environ={})
    return settings.load_balancer.subnet_id


# --- Kubernetes objects ------------------------------------------------------------------------


def nodes(count: int, *, start: int = 0, sim: OpenStackSimHandle | None = None) -> list[Node]:
    """Nodes `start..start+count-1` of the scenario (with providerIDs when `sim` is given)."""
    ids = {s["name"]: s["id"] for s in sim.resources("server")} if sim else {}
    result = []
    for index in range(start, start + count):
        seed = seed_node(index)
        provider_id = f"openstack:///{ids[seed.name]}" if seed.name in ids else ""
        result.append(node(seed.name, "", provider_id, internal_ips=(seed.internal_ip,)))
    return result


def service(
    name: str = "web",
    *,
    namespace: str = "default",
    ports: tuple[tuple[int, int, str], ...] = ((80, 30080, "TCP"), (443, 30443, "TCP")),
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Service:
    return Service(
        metadata=OwnerMeta(
            name=name,
            namespace=namespace,
            uid=f"0000-{namespace}-{name}",
            annotations=annotations or {},
        ),
        spec=ServiceSpec(
            type="LoadBalancer",
            ports=tuple(
                ServicePort(port=p, node_port=np, protocol=proto, name=f"p{p}")
                for p, np, proto in ports
            ),
            **spec,
        ),
    )


def with_annotations(svc: Service, extra: dict[str, str]) -> Service:
    """The Service as the manager leaves it after patching `extra` into its annotations."""
    meta = msgspec.structs.replace(svc.metadata, annotations={**svc.metadata.annotations, **extra})
    return msgspec.structs.replace(svc, metadata=meta)


def with_status(svc: Service, outcome: LoadBalancerOutcome) -> Service:
    """The Service as the manager leaves it after an ensure: annotations and status."""
    patched = with_annotations(svc, outcome.annotations_to_set)
    status = ServiceStatus(load_balancer=LoadBalancerStatus(ingress=outcome.ingress))
    return msgspec.structs.replace(patched, status=status)


def with_spec(svc: Service, **changes: Any) -> Service:
    return msgspec.structs.replace(svc, spec=msgspec.structs.replace(svc.spec, **changes))


# --- driving the provider -----------------------------------------------------------------------


@dataclass
class Converged:
    value: Any
    delays: list[float] = field(default_factory=list)


def converge(call: Callable[[], T], *, max_syncs: int = 10) -> Converged:
    """Repeat `call` while it raises RetryAfter (the worker's requeue, minus the wait)."""
    delays: list[float] = []
    for _ in range(max_syncs):
        try:
            return Converged(call(), delays)
        except RetryAfter as exc:
            delays.append(exc.delay)
    raise AssertionError(f"no convergence after {max_syncs} syncs (delays {delays})")


def ensure(lbs: LoadBalancers, svc: Service, node_list: list[Node]) -> LoadBalancerOutcome:
    outcome: LoadBalancerOutcome = converge(lambda: lbs.ensure(service=svc, nodes=node_list)).value
    return outcome


def delete(lbs: LoadBalancers, svc: Service) -> None:
    converge(lambda: lbs.ensure_deleted(service=svc))


def settle(
    sync: Callable[[], object], *, timeout: float = 30.0, pause: float = 0.0
) -> tuple[RecordEvent, ...]:
    """Repeat a service controller's `sync` while the provider asks to be called again, as
    the worker's requeues would (`pause` s apart: a real Octavia needs time to go ACTIVE);
    the Warning events of the sync that failed, () when it succeeded."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            sync()
            return ()
        except SyncFailed as failed:
            return tuple(
                a for a in failed.actions if isinstance(a, RecordEvent) and a.type == "Warning"
            )
        except RetryAfter as later:
            if time.monotonic() > deadline:
                raise AssertionError(f"not settled within {timeout:.0f}s: {later}") from later
            time.sleep(pause)


# --- reading the simulator ------------------------------------------------------------------------


def cloud_calls(sim: OpenStackSimHandle, mark: Seq) -> list[Call]:
    """Calls to Nova, Neutron and Octavia (Keystone and version discovery left out)."""
    return [
        c
        for c in sim.calls(since=mark)
        if (c.service != "identity" and "/lbaas/" in c.path) or c.path.startswith("/network/v2.0/")
    ]


def writes(sim: OpenStackSimHandle, mark: Seq) -> list[tuple[str, str]]:
    return [(c.method, _shape(c.path)) for c in sim.writes(since=mark)]


def reads(sim: OpenStackSimHandle, mark: Seq) -> list[str]:
    """The Octavia and Neutron reads since `mark`, shaped like `lbaas/pools/{id}/members`."""
    return [_shape(c.path) for c in cloud_calls(sim, mark) if not c.is_write]


def _shape(path: str) -> str:
    """`/load-balancer/v2.0/lbaas/pools/<id>/members` → `lbaas/pools/{id}/members`."""
    parts = path.split("?", maxsplit=1)[0].split("/")
    kept = [p for p in parts[3:] if p]
    return "/".join("{id}" if len(p) == 36 and p.count("-") == 4 else p for p in kept)


def one(sim: OpenStackSimHandle, kind: str) -> dict[str, Any]:
    rows = sim.resources(kind)
    assert len(rows) == 1, f"{len(rows)} {kind}s"
    return rows[0]


def fips_on(sim: OpenStackSimHandle, port_id: str) -> list[dict[str, Any]]:
    return [f for f in sim.resources("floatingip") if f["port_id"] == port_id]


def octavia_flavor(conn: Any, name: str, *, provider: str = "amphora", enabled: bool = True) -> str:
    """A flavor (on its own profile) made as Octavia's admin API makes one; its id. `conn`:
    an openstacksdk connection (the simulator's, or the real cloud's admin)."""
    profile = conn.load_balancer.create_flavor_profile(
        name=f"{name}-profile", provider_name=provider, flavor_data="{}"
    )
    flavor = conn.load_balancer.create_flavor(
        name=name, flavor_profile_id=profile.id, enabled=enabled
    )
    return str(flavor.id)


def octavia_zone(conn: Any, name: str, *, provider: str = "amphora", enabled: bool = True) -> str:
    """An availability zone (on its own profile) made as Octavia's admin API makes one."""
    profile = conn.load_balancer.create_availability_zone_profile(
        name=f"{name}-profile", provider_name=provider, availability_zone_data="{}"
    )
    conn.load_balancer.create_availability_zone(
        name=name, availability_zone_profile_id=profile.id, enabled=enabled
    )
    return name
