"""What the API server does to an object before storing it: metadata, defaults, validation.

These are the rules a client can observe: the server owns `uid`, `creationTimestamp`,
`resourceVersion`, `generation` (bumped when `spec` changes) and `deletionTimestamp`;
`generateName` gets five random characters; a Service gets its cluster IP, port
protocols, target ports and node ports; a Node's `providerID` and `podCIDR(s)` may only go
from empty to set; taint effects and Service ports are checked. For the kinds a deployment
applies: a Secret's `stringData` is folded into base64 `data`, workloads get one replica by
default and need a selector that matches their template and containers with a name and an
image, a PodDisruptionBudget sets at most one of minAvailable/maxUnavailable, a binding's
roleRef names a role and never changes, ConfigMap and Secret keys are valid and `immutable`
holds. Violations are 422 Invalid with per-field causes, in the API server's words. It is
deliberately not the whole of upstream validation: only what a cloud-controller-manager,
or the manifests that deploy one, can trip over.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import random
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyccm_sim.kube.errors import ApiError, invalid
from pyccm_sim.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CONFIG_MAPS,
    DEPLOYMENTS,
    LEASES,
    NAMESPACES,
    NODES,
    POD_DISRUPTION_BUDGETS,
    RBAC_RESOURCES,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICES,
    STATEFUL_SETS,
    ResourceType,
)

Obj = dict[str, Any]
Cause = tuple[str, str, str]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# RBAC object names are path segments (system:cloud-controller-manager is one).
_PATH_SEGMENT = re.compile(r"^(?!\.\.?$)[^/%]+$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
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
    elif rtype is SECRETS:
        _fold_string_data(obj)
    elif rtype in (DEPLOYMENTS, STATEFUL_SETS) and isinstance(obj.get("spec"), dict):
        obj["spec"].setdefault("replicas", 1)


def _fold_string_data(secret: Obj) -> None:
    """`stringData` is write-only: the API server merges it into `data` as base64 (its
    keys win) and never stores it."""
    string_data = secret.pop("stringData", None) or {}
    if string_data:
        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode()
    secret.setdefault("type", "Opaque")


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
    # A write that does not mention managedFields keeps them (one that does replaces them).
    if "managedFields" not in meta and "managedFields" in old_meta:
        meta["managedFields"] = old_meta["managedFields"]
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
    elif rtype in (DEPLOYMENTS, STATEFUL_SETS):
        causes += _validate_workload(rtype, obj, old)
    elif rtype is POD_DISRUPTION_BUDGETS:
        causes += _validate_budget(obj)
    elif rtype in (SECRETS, CONFIG_MAPS):
        causes += _validate_config(rtype, obj, old)
    elif rtype in (ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS):
        causes += _validate_binding(rtype, obj, old)
    elif rtype in (ROLES, CLUSTER_ROLES):
        causes += _validate_rules(rtype, obj)
    if causes:
        meta = obj.get("metadata", {})
        raise invalid(rtype.kind, str(meta.get("name", "")), rtype.group, causes)


def _required(path: str) -> Cause:
    return (path, "FieldValueRequired", "Required value")


def _bad(path: str, value: Any, why: str) -> Cause:
    return (path, "FieldValueInvalid", f"Invalid value: {_shown(value)}: {why}")


def _shown(value: Any) -> str:
    """A value as the API server's messages print it (Go's %#v, roughly)."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return "map[string]string" + json.dumps(value, separators=(",", ":"))
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def _forbidden(path: str, why: str) -> Cause:
    return (path, "FieldValueForbidden", f"Forbidden: {why}")


def _unsupported(path: str, value: Any, supported: tuple[str, ...]) -> Cause:
    allowed = ", ".join(f'"{s}"' for s in supported)
    return (
        path,
        "FieldValueNotSupported",
        f"Unsupported value: {_shown(value)}: supported values: {allowed}",
    )


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
    # The types of labels, annotations and finalizers were checked when the body was
    # decoded (schema.conform), as the API server's JSON decoder does.
    finalizers = meta.get("finalizers") or []
    if old is not None and old["metadata"].get("deletionTimestamp"):
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
    if rtype in RBAC_RESOURCES:
        return _PATH_SEGMENT, "may not be '.' or '..', and may not contain '/' or '%'"
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


_LABEL_WORDS = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
    "or '-', and must start and end with an alphanumeric character"
)
# The spec fields a StatefulSet update may change (upstream's ValidateStatefulSetUpdate).
_STATEFUL_SET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


def _validate_workload(rtype: ResourceType, obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    selector = spec.get("selector")
    causes: list[Cause] = []
    if not selector:
        causes.append(_required("spec.selector"))
    elif not (selector.get("matchLabels") or selector.get("matchExpressions")):
        causes.append(_bad("spec.selector", selector, "empty selector is invalid for deployment"))
    elif not _selects(selector, labels):
        causes.append(
            _bad(
                "spec.template.metadata.labels",
                labels,
                "`selector` does not match template `labels`",
            )
        )
    if spec.get("replicas", 0) < 0:
        causes.append(_bad("spec.replicas", spec["replicas"], "must be greater than or equal to 0"))
    causes += _validate_containers((template.get("spec") or {}).get("containers") or [])
    old_spec = (old or {}).get("spec") or {}
    if old is not None and selector != old_spec.get("selector"):
        causes.append(_bad("spec.selector", selector, "field is immutable"))
    if old is not None and rtype is STATEFUL_SETS:
        frozen = {k: v for k, v in spec.items() if k not in _STATEFUL_SET_MUTABLE}
        if frozen != {k: v for k, v in old_spec.items() if k not in _STATEFUL_SET_MUTABLE}:
            causes.append(
                _forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                    "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                    "'minReadySeconds' are forbidden",
                )
            )
    return causes


def _selects(selector: Obj, labels: dict[str, str]) -> bool:
    """Whether a LabelSelector (matchLabels and matchExpressions) selects `labels`."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for requirement in selector.get("matchExpressions") or []:
        key, values = requirement.get("key"), requirement.get("values") or []
        matched = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(requirement.get("operator", ""), False)
        if not matched:
            return False
    return True


def _validate_containers(containers: list[Obj]) -> list[Cause]:
    if not containers:
        return [_required("spec.template.spec.containers")]
    causes: list[Cause] = []
    for index, container in enumerate(containers):
        path = f"spec.template.spec.containers[{index}]"
        name = container.get("name")
        if not name:
            causes.append(_required(f"{path}.name"))
        elif not _LABEL_1123.match(name) or len(name) > 63:
            causes.append(_bad(f"{path}.name", name, _LABEL_WORDS))
        if not container.get("image"):
            causes.append(_required(f"{path}.image"))
    return causes


def _validate_budget(obj: Obj) -> list[Cause]:
    spec = obj.get("spec") or {}
    if "minAvailable" in spec and "maxUnavailable" in spec:
        return [_bad("spec", spec, "minAvailable and maxUnavailable cannot be both set")]
    return []


def _validate_config(rtype: ResourceType, obj: Obj, old: Obj | None) -> list[Cause]:
    causes: list[Cause] = []
    for field_name in ("data", "binaryData"):
        for key in obj.get(field_name) or {}:
            if len(key) > 253 or not _CONFIG_KEY.match(key):
                causes.append(
                    _bad(
                        f"{field_name}[{key}]",
                        key,
                        "a valid config key must consist of alphanumeric characters, '-', '_' "
                        "or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used "
                        "for validation is '[-._a-zA-Z0-9]+')",
                    )
                )
    if old is None:
        return causes
    if old.get("immutable"):
        immutable = "field is immutable when `immutable` is set"
        for field_name in ("data", "binaryData"):
            if obj.get(field_name) != old.get(field_name):
                causes.append(_forbidden(field_name, immutable))
        if not obj.get("immutable"):
            causes.append(_forbidden("immutable", immutable))
    if rtype is SECRETS and obj.get("type") != old.get("type"):
        causes.append(_bad("type", obj.get("type"), "field is immutable"))
    return causes


def _validate_binding(rtype: ResourceType, obj: Obj, old: Obj | None) -> list[Cause]:
    ref = obj.get("roleRef") or {}
    kinds = ("ClusterRole",) if rtype is CLUSTER_ROLE_BINDINGS else ("ClusterRole", "Role")
    causes: list[Cause] = []
    if ref.get("apiGroup") != "rbac.authorization.k8s.io":
        causes.append(
            _unsupported(
                "roleRef.apiGroup", ref.get("apiGroup", ""), ("rbac.authorization.k8s.io",)
            )
        )
    if ref.get("kind") not in kinds:
        causes.append(_unsupported("roleRef.kind", ref.get("kind", ""), kinds))
    if not ref.get("name"):
        causes.append(_required("roleRef.name"))
    for index, subject in enumerate(obj.get("subjects") or []):
        path = f"subjects[{index}]"
        if subject.get("kind") not in ("Group", "ServiceAccount", "User"):
            causes.append(
                _unsupported(
                    f"{path}.kind", subject.get("kind", ""), ("Group", "ServiceAccount", "User")
                )
            )
        if not subject.get("name"):
            causes.append(_required(f"{path}.name"))
        if (
            subject.get("kind") == "ServiceAccount"
            and rtype is CLUSTER_ROLE_BINDINGS
            and not subject.get("namespace")
        ):
            causes.append(_required(f"{path}.namespace"))
    if old is not None and ref != old.get("roleRef"):
        causes.append(_bad("roleRef", ref, "cannot change roleRef"))
    return causes


def _validate_rules(rtype: ResourceType, obj: Obj) -> list[Cause]:
    causes: list[Cause] = []
    for index, rule in enumerate(obj.get("rules") or []):
        path = f"rules[{index}]"
        if not rule.get("verbs"):
            causes.append(
                (
                    f"{path}.verbs",
                    "FieldValueRequired",
                    "Required value: verbs must contain at least one value",
                )
            )
        if rule.get("resources") and not rule.get("apiGroups"):
            causes.append(
                (
                    f"{path}.apiGroups",
                    "FieldValueRequired",
                    "Required value: resource rules must supply at least one api group",
                )
            )
        if rtype is ROLES and rule.get("nonResourceURLs"):
            causes.append(
                _bad(
                    f"{path}.nonResourceURLs",
                    rule["nonResourceURLs"],
                    "namespaced rules cannot apply to non-resource URLs",
                )
            )
    return causes


def require_object(body: Any) -> Obj:
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
    return body
