"""What the API server does to an object before storing it: metadata, defaults, validation.

These are the rules a client can observe: the server owns `uid`, `creationTimestamp`,
`resourceVersion`, `generation` (bumped when `spec` changes) and `deletionTimestamp`;
`generateName` gets five random characters; a Service gets its cluster IP, port
protocols, target ports and node ports; a Node's `providerID` and `podCIDR(s)` may only go
from empty to set; taint effects and Service ports are checked. Violations are 422 Invalid
with per-field causes, in the API server's words. It is deliberately not the whole of
upstream validation: only what a cloud-controller-manager can trip over.
"""

from __future__ import annotations

import ipaddress
import random
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyccm.sim.kube.errors import ApiError, invalid
from pyccm.sim.kube.resources import LEASES, NAMESPACES, NODES, SERVICES, ResourceType

Obj = dict[str, Any]
Cause = tuple[str, str, str]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# The alphabet upstream uses for generateName suffixes (no vowels, no look-alikes).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
# kube-apiserver's defaults: --service-cluster-ip-range 10.96.0.0/12, node ports 30000-32767.
_SERVICE_CIDR = ipaddress.IPv4Network("10.96.0.0/12")
_NODE_PORTS = range(30000, 32768)


def now_rfc3339(clock: float) -> str:
    return datetime.fromtimestamp(clock, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Allocator:
    """Cluster IPs and node ports for Services. Node ports are handed out round-robin and
    not checked for uniqueness: a 10,000-Service benchmark needs more than the 2,768 ports
    a real cluster has, and no CCM behaviour depends on their uniqueness."""

    rng: random.Random
    next_ip: int = 10
    next_port: int = 0
    used_ips: set[str] = field(default_factory=set)

    def cluster_ip(self) -> str:
        while True:
            address = str(_SERVICE_CIDR.network_address + self.next_ip)
            self.next_ip = self.next_ip % (_SERVICE_CIDR.num_addresses - 2) + 1
            if address not in self.used_ips:
                self.used_ips.add(address)
                return address

    def node_port(self) -> int:
        port = _NODE_PORTS[self.next_port % len(_NODE_PORTS)]
        self.next_port += 1
        return port

    def suffix(self) -> str:
        return "".join(self.rng.choice(_SUFFIX_ALPHABET) for _ in range(5))


# -- create -------------------------------------------------------------------------------


def prepare_create(
    rtype: ResourceType, obj: Obj, *, namespace: str, clock: float, allocator: Allocator
) -> Obj:
    """Fill what the server owns on create; the store assigns resourceVersion."""
    obj["apiVersion"] = rtype.api_version
    obj["kind"] = rtype.kind
    meta = obj.setdefault("metadata", {})
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = f"{meta['generateName']}{allocator.suffix()}"
    if rtype.namespaced:
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    meta["uid"] = str(uuid.UUID(int=allocator.rng.getrandbits(128), version=4))
    meta["creationTimestamp"] = now_rfc3339(clock)
    for owned in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        meta.pop(owned, None)
    if isinstance(obj.get("spec"), dict):
        meta["generation"] = 1
    if rtype.reset_status_on_create:
        obj.pop("status", None)
    _apply_defaults(rtype, obj, None, allocator)
    return obj


def _apply_defaults(rtype: ResourceType, obj: Obj, old: Obj | None, allocator: Allocator) -> None:
    if rtype is SERVICES:
        _default_service(obj, old, allocator)
    elif rtype is NAMESPACES:
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"].get("name", "")


def _default_service(obj: Obj, old: Obj | None, allocator: Allocator) -> None:
    spec = obj.setdefault("spec", {})
    kind = spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    old_spec = (old or {}).get("spec", {})
    if kind != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
        if not spec.get("clusterIP"):
            ip = old_spec.get("clusterIP") or allocator.cluster_ip()
            spec["clusterIP"] = ip
            spec["clusterIPs"] = [ip]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    if kind in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    old_ports = {p.get("port"): p for p in old_spec.get("ports", []) if isinstance(p, dict)}
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            _default_port(port, kind, spec, old_ports.get(port.get("port")), allocator)
    obj.setdefault("status", {}).setdefault("loadBalancer", {})


def _default_port(port: Obj, kind: str, spec: Obj, old: Obj | None, allocator: Allocator) -> None:
    port.setdefault("protocol", "TCP")
    if "targetPort" not in port and "port" in port:
        port["targetPort"] = port["port"]
    wants_node_port = kind == "NodePort" or (
        kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts", True)
    )
    if wants_node_port and not port.get("nodePort"):
        port["nodePort"] = (old or {}).get("nodePort") or allocator.node_port()


# -- update -------------------------------------------------------------------------------


def prepare_update(
    rtype: ResourceType, new: Obj, old: Obj, *, subresource: str, allocator: Allocator
) -> Obj:
    """Apply the status-subresource rules and keep the server-owned metadata.

    A write to the main resource keeps the stored `status`; a write to `/status` keeps
    the stored `spec`. Like upstream's node and service status strategies, a status
    write may still change labels, annotations and finalizers (that is how the service
    controller patches its finalizer through `services/status`)."""
    new["apiVersion"] = rtype.api_version
    new["kind"] = rtype.kind
    if rtype.status_subresource:
        kept = "spec" if subresource == "status" else "status"
        if kept in old:
            new[kept] = old[kept]
        else:
            new.pop(kept, None)
    meta = new.setdefault("metadata", {})
    old_meta = old["metadata"]
    for owned in (
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ):
        if owned in old_meta:
            meta[owned] = old_meta[owned]
        else:
            meta.pop(owned, None)
    if "generation" in old_meta and subresource == "" and new.get("spec") != old.get("spec"):
        meta["generation"] = old_meta["generation"] + 1
    _apply_defaults(rtype, new, old, allocator)
    return new


# -- validation ---------------------------------------------------------------------------


def validate(rtype: ResourceType, obj: Obj, old: Obj | None) -> None:
    causes = _validate_meta(rtype, obj, old)
    if rtype is NODES:
        causes += _validate_node(obj, old)
    elif rtype is SERVICES:
        causes += _validate_service(obj, old)
    elif rtype is LEASES:
        causes += _validate_lease(obj)
    if causes:
        meta = obj.get("metadata", {})
        raise invalid(rtype.kind, str(meta.get("name", "")), rtype.group, causes)


def _required(path: str) -> Cause:
    return (path, "FieldValueRequired", "Required value")


def _bad(path: str, value: Any, why: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else value
    return (path, "FieldValueInvalid", f"Invalid value: {shown}: {why}")


def _forbidden(path: str, why: str) -> Cause:
    return (path, "FieldValueForbidden", f"Forbidden: {why}")


def _validate_meta(rtype: ResourceType, obj: Obj, old: Obj | None) -> list[Cause]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [_required("metadata")]
    name = meta.get("name")
    if not name:
        return [
            (
                "metadata.name",
                "FieldValueRequired",
                "Required value: name or generateName is required",
            )
        ]
    causes = []
    pattern, words = _name_rule(rtype)
    if not isinstance(name, str) or len(name) > 253 or not pattern.match(name):
        causes.append(_bad("metadata.name", name, words))
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and not (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            causes.append(_bad(f"metadata.{key}", "", "must be a map of string to string"))
    finalizers = meta.get("finalizers") or []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        causes.append(_bad("metadata.finalizers", "", "must be a list of strings"))
    elif old is not None and old["metadata"].get("deletionTimestamp"):
        added = set(finalizers) - set(old["metadata"].get("finalizers") or [])
        if added:
            causes.append(
                _forbidden(
                    "metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted",
                )
            )
    return causes


def _name_rule(rtype: ResourceType) -> tuple[re.Pattern[str], str]:
    if rtype is SERVICES:
        return _LABEL_1035, (
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
            "start with an alphabetic character, and end with an alphanumeric character"
        )
    if rtype is NAMESPACES:
        return _LABEL_1123, (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
            "or '-', and must start and end with an alphanumeric character"
        )
    return _SUBDOMAIN, (
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character"
    )


def _validate_node(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    seen = set()
    for index, taint in enumerate(spec.get("taints") or []):
        path = f"spec.taints[{index}]"
        if not isinstance(taint, dict) or not taint.get("key"):
            causes.append(_required(f"{path}.key"))
            continue
        effect = taint.get("effect")
        if effect not in _TAINT_EFFECTS:
            causes.append(
                (
                    f"{path}.effect",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{effect}": '
                    'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
                )
            )
        if (taint["key"], effect) in seen:
            causes.append(
                (f"{path}", "FieldValueDuplicate", f'Duplicate value: "{taint["key"]}={effect}"')
            )
        seen.add((taint["key"], effect))
    if old is not None:
        causes += _node_write_once(spec, old.get("spec") or {})
    return causes


def _node_write_once(spec: Obj, old_spec: Obj) -> list[Cause]:
    causes = []
    old_id = old_spec.get("providerID") or ""
    if old_id and spec.get("providerID", "") != old_id:
        causes.append(
            _forbidden(
                "spec.providerID", 'node updates may not change providerID except from "" to valid'
            )
        )
    for key in ("podCIDR", "podCIDRs"):
        before = old_spec.get(key)
        if before and spec.get(key) != before:
            causes.append(
                _forbidden(
                    f"spec.{key}", f'node updates may not change {key} except from "" to valid'
                )
            )
    return causes


def _validate_service(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec") or {}
    kind = spec.get("type", "ClusterIP")
    causes: list[Cause] = []
    if kind not in _SERVICE_TYPES:
        causes.append(
            (
                "spec.type",
                "FieldValueNotSupported",
                f'Unsupported value: "{kind}": supported values: '
                '"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"',
            )
        )
    ports = spec.get("ports") or []
    if not ports and kind != "ExternalName" and spec.get("clusterIP") != "None":
        causes.append(_required("spec.ports"))
    seen: set[tuple[Any, Any]] = set()
    for index, port in enumerate(ports):
        causes += _validate_port(f"spec.ports[{index}]", port, seen)
    old_ip = ((old or {}).get("spec") or {}).get("clusterIP")
    if old_ip and spec.get("clusterIP") != old_ip and kind != "ExternalName":
        causes.append(_bad("spec.clusterIP", spec.get("clusterIP"), "field is immutable"))
    return causes


def _validate_port(path: str, port: Any, seen: set[tuple[Any, Any]]) -> list[Cause]:
    if not isinstance(port, dict):
        return [_bad(path, str(port), "must be an object")]
    causes = []
    number = port.get("port")
    if not isinstance(number, int) or not 1 <= number <= 65535:
        causes.append(_bad(f"{path}.port", number, "must be between 1 and 65535, inclusive"))
    protocol = port.get("protocol", "TCP")
    if protocol not in _PROTOCOLS:
        causes.append(
            (
                f"{path}.protocol",
                "FieldValueNotSupported",
                f'Unsupported value: "{protocol}": supported values: "SCTP", "TCP", "UDP"',
            )
        )
    node_port = port.get("nodePort")
    if node_port and (not isinstance(node_port, int) or node_port not in _NODE_PORTS):
        causes.append(
            _bad(
                f"{path}.nodePort",
                node_port,
                "provided port is not in the valid range. The range of valid ports is 30000-32767",
            )
        )
    if (number, protocol) in seen:
        causes.append((path, "FieldValueDuplicate", f"Duplicate value: {{{number} {protocol}}}"))
    seen.add((number, protocol))
    return causes


def _validate_lease(obj: Obj) -> list[Cause]:
    spec = obj.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        return [_bad("spec.leaseDurationSeconds", duration, "must be greater than 0")]
    return []


def require_object(body: Any) -> Obj:
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
    return body
