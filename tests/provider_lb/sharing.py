"""Services sharing a load balancer, driven through the service controller (its Warnings
are what a user sees): tests/provider_lb/test_refused_shared_load_balancer_users.py on the
simulator, tests/conformance/test_shared_load_balancer_on_real_openstack.py on the real
services."""

from __future__ import annotations

import msgspec

from pyccm.protocol.messages import RecordEvent
from pyccm.protocol.views import Service
from tests.support.lb import service, settle
from tests.support.services import Harness

LB_ID = "loadbalancer.openstack.org/load-balancer-id"


def apply(
    h: Harness, svc: Service, *, timeout: float = 30.0, pause: float = 0.0
) -> tuple[RecordEvent, ...]:
    """Creates or changes `svc` in the service controller's replica and syncs it until it
    settles (`settle`); its Warnings."""
    h.put(svc)
    return settle(lambda: h.controller.sync(svc.key), timeout=timeout, pause=pause)


def remove(h: Harness, key: str, *, timeout: float = 30.0, pause: float = 0.0) -> None:
    """Deletes the Service `key` as the API server would (a deletion timestamp; the
    finalizer holds it) and syncs until the controller lets it go."""
    current = h.replica.service(key)
    assert current is not None
    meta = msgspec.structs.replace(current.metadata, deletion_timestamp="2026-11-27T00:00:00Z")
    gone = msgspec.structs.replace(current, metadata=meta)
    assert apply(h, gone, timeout=timeout, pause=pause) == ()
    assert h.replica.service(key) is None


def sharing(name: str, port: int, lb_id: str, **annotations: str) -> Service:
    """Service `name` on `port` asking to share load balancer `lb_id`."""
    return service(
        name, ports=((port, port + 23000, "TCP"),), annotations={LB_ID: lb_id, **annotations}
    )


def lb_id_of(h: Harness, key: str) -> str:
    """The load balancer the Service `key` was given (its annotation)."""
    current = h.replica.service(key)
    assert current is not None
    return current.metadata.annotations[LB_ID]
