"""`pyccm plan`: what an ensure would write, from the code that ensures, without writing.

A plan is not a second implementation of the comparison: `OctaviaLoadBalancers.plan` runs
the very `ensure` the service worker runs, on a `DryRunClient` that sends every GET to the
cloud and records every other request instead of sending it, answering it as the cloud
would (the object it would have created, with a placeholder id). The recorded requests are
the plan. The one difference in the run is that it does not stop after its first write to
a load balancer (`Reconciler(one_write=False)`), so the whole difference shows at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from pyccm.provider.interface import PlannedChange
from pyccm.provider.openstack.transport.client import OpenStackClient
from pyccm.provider.openstack.transport.connection import ServiceType

NEW = "(new)"

# `request` names of the writes (`api.py`) -> (action, kind).
Action = Literal["create", "update", "delete"]
_VERBS: dict[str, Action] = {"create": "create", "update": "update", "delete": "delete"}
_KINDS = {
    "loadbalancer": "load balancer",
    "listener": "listener",
    "pool": "pool",
    "member": "member",
    "healthmonitor": "health monitor",
    "floatingip": "floating IP",
    "floatingip_tags": "floating IP tags",
    "security_group": "security group",
    "security_group_tags": "security group tags",
    "security_group_rule": "security group rule",
    "port": "port",
}


@dataclass(frozen=True)
class Write:
    """One request the dry run did not send."""

    method: str
    path: str
    request: str
    body: Any
    params: dict[str, str]


class DryRunClient(OpenStackClient):
    """An `OpenStackClient` that only reads. Not constructed like one: it wraps a real
    client and overrides `call`, through which `call_json` and `list_all` go."""

    def __init__(self, real: OpenStackClient) -> None:  # no super().__init__: nothing to own
        self._real = real
        self.writes: list[Write] = []

    def call(
        self,
        service: ServiceType,
        method: str,
        path: str,
        *,
        request: str,
        params: Any = None,
        body: Any = None,
        ok: Any = (200,),
        microversion: str | None = None,
    ) -> bytes:
        if method == "GET":
            return self._real.call(
                service,
                method,
                path,
                request=request,
                params=params,
                ok=ok,
                microversion=microversion,
            )
        if body is not None:
            # As the cloud would read it: member lists are sent pre-encoded (`msgspec.Raw`).
            body = json.loads(msgspec.json.encode(body))
        self.writes.append(Write(method, path, request, body, dict(params or {})))
        return json.dumps(_answer(method, path, body)).encode()

    def close(self) -> None:
        """The real client belongs to the provider that made this one."""


def _answer(method: str, path: str, body: Any) -> Any:
    """What the cloud would answer: the object sent back with an id (a create gets the
    placeholder, an update the id in its path); `{}` when nobody reads the answer."""
    if method == "DELETE" or not isinstance(body, dict) or len(body) != 1:
        return {}
    ((key, inner),) = body.items()
    if not isinstance(inner, dict):
        return {}
    ident = NEW if method == "POST" else path.rstrip("/").rsplit("/", 1)[-1]
    # Children sent inline (a fully populated create's listeners) come back as references
    # the dry run cannot make up: left out, as nothing reads them.
    flat = {k: v for k, v in inner.items() if not _nested(v)}
    return {key: {**flat, "id": ident, "provisioning_status": "ACTIVE"}}


def _nested(value: Any) -> bool:
    return isinstance(value, dict) or (
        isinstance(value, list) and any(isinstance(v, dict) for v in value)
    )


def planned_changes(writes: list[Write]) -> tuple[PlannedChange, ...]:
    return tuple(_change(write) for write in writes)


def _change(write: Write) -> PlannedChange:
    stem, _, verb = write.request.rpartition("_")
    if write.request == "member_batch_update":
        return PlannedChange(
            action="update",
            kind="members",
            target=_path_id(write.path, after="pools"),
            fields={"members": [_member(m) for m in write.body.get("members", [])]}
            | ({"additive_only": True} if write.params.get("additive_only") else {}),
        )
    action = _VERBS.get(verb, "update")
    kind = _KINDS.get(stem, stem.replace("_", " "))
    fields = _inner(write.body)
    if write.request.endswith("_tags_update"):
        return PlannedChange(
            action="update",
            kind=kind.removesuffix(" tags"),
            target=_path_id(write.path, -2),
            fields={"tags": write.body.get("tags", [])},
        )
    if action == "create":
        target = str(fields.get("name") or fields.get("floating_ip_address") or NEW)
    else:
        target = _path_id(write.path)
    if action == "delete" and write.params:
        fields = dict(write.params)
    return PlannedChange(action=action, kind=kind, target=target, fields=fields)


def _inner(body: Any) -> dict[str, Any]:
    if isinstance(body, dict) and len(body) == 1:
        (inner,) = body.values()
        if isinstance(inner, dict):
            return dict(inner)
    return {}


def _member(member: dict[str, Any]) -> str:
    return f"{member.get('address')}:{member.get('protocol_port')}"


def _path_id(path: str, index: int = -1, *, after: str = "") -> str:
    parts = [p for p in path.split("/") if p]
    if after and after in parts:
        return parts[parts.index(after) + 1]
    return parts[index] if parts else ""
