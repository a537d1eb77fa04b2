"""Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get`.

kubectl asks for `application/json;as=Table;...` and prints whatever columns the server
returns, so the simulator answers with the columns kube-apiserver prints for nodes and
services (NAME, STATUS, ROLES, AGE, VERSION / NAME, TYPE, CLUSTER-IP, EXTERNAL-IP,
PORT(S), AGE) and NAME, AGE for everything else. Rows carry the object's metadata as a
PartialObjectMetadata, as upstream does by default.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from pyccm_sim.kube.resources import ResourceType

Obj = dict[str, Any]
Column = tuple[str, str, int]  # name, type, priority (1 = only with -o wide)
Cells = Callable[[Obj, float], list[Any]]


class Page(Protocol):
    @property
    def rv(self) -> int: ...

    @property
    def continue_token(self) -> str: ...


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def age(obj: Obj, now: float) -> str:
    stamp = obj.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    seconds = max(0, int(now - datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2 or (unit == "m" and seconds >= 120):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _node_cells(obj: Obj, now: float) -> list[Any]:
    status = obj.get("status", {})
    ready: Obj = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), {})
    state = {"True": "Ready", "False": "NotReady"}.get(ready.get("status", ""), "Unknown")
    if obj.get("spec", {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = obj.get("metadata", {}).get("labels", {})
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses", [])}
    info = status.get("nodeInfo", {})
    return [
        obj["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        age(obj, now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP", "<none>"),
        addresses.get("ExternalIP", "<none>"),
        info.get("osImage", ""),
    ]


def _port_cell(port: Obj) -> str:
    node_port = f":{port['nodePort']}" if port.get("nodePort") else ""
    return f"{port.get('port')}{node_port}/{port.get('protocol', 'TCP')}"


def _service_cells(obj: Obj, now: float) -> list[Any]:
    spec = obj.get("spec", {})
    ingress = obj.get("status", {}).get("loadBalancer", {}).get("ingress", [])
    external = ",".join(i.get("ip") or i.get("hostname", "") for i in ingress)
    if not external:
        external = "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"
    ports = ",".join(_port_cell(p) for p in spec.get("ports", []))
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    return [
        obj["metadata"]["name"],
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP", "<none>"),
        external,
        ports or "<none>",
        age(obj, now),
        selector or "<none>",
    ]


def _default_cells(obj: Obj, now: float) -> list[Any]:
    return [obj["metadata"]["name"], age(obj, now)]


_LAYOUTS: dict[str, tuple[list[Column], Cells]] = {
    "Node": (
        [
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Roles", "string", 0),
            ("Age", "string", 0),
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
        ],
        _node_cells,
    ),
    "Service": (
        [
            ("Name", "string", 0),
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            ("Age", "string", 0),
            ("Selector", "string", 1),
        ],
        _service_cells,
    ),
}


def to_table(rtype: ResourceType, objects: list[Obj], page: Page | None) -> Obj:
    columns, cells = _LAYOUTS.get(
        rtype.kind, ([("Name", "string", 0), ("Age", "string", 0)], _default_cells)
    )
    now = time.time()
    meta: Obj = {}
    if page is not None:
        meta["resourceVersion"] = str(page.rv)
        if page.continue_token:
            meta["continue"] = page.continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": [
            {
                "name": name,
                "type": kind,
                "format": "name" if name == "Name" else "",
                "description": name,
                "priority": priority,
            }
            for name, kind, priority in columns
        ],
        "rows": [
            {
                "cells": cells(obj, now),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata", {}),
                },
            }
            for obj in objects
        ],
    }
