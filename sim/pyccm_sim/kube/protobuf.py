"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded to
the JSON form the rest of the simulator handles.

kubectl's typed clients send protobuf: `kubectl create secret|configmap|serviceaccount|
namespace|service|deployment|role|rolebinding|clusterrole|clusterrolebinding|pdb` POST
their object so. The body is the magic `k8s\\x00`, then a `runtime.Unknown` (typeMeta
{apiVersion, kind}, raw, contentEncoding, contentType) whose `raw` is the kind's message
from its `generated.proto`. This is a hand-written wire decoder (varints and
length-delimited fields are all those messages use) with a table of the fields of the
kinds above, as k8s.io/api and apimachinery number them.

Go's generated marshallers always write a non-pointer scalar, zero or not, and a pointer
only when set; Go's JSON omits the zero ones (`omitempty`), so a zero non-pointer scalar
is dropped here, but a pointer's zero (`replicas: 0`, `immutable: false`) is kept, as is
the zero of a field whose JSON tag has no omitempty (a PodDisruptionBudget's
`currentHealthy`): the object is the one kubectl would have sent as JSON. `bytes`
become base64 strings, as in JSON; an unset `Time` is dropped. A field number the table
does not know, in a kind it does, is refused (415, naming the message and the field)
rather than dropped: the simulator never stores less than the client sent.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

Obj = dict[str, Any]


class Unsupported(Exception):
    """A well-formed body the simulator does not decode (a kind or a field)."""


class Malformed(Exception):
    """Bytes that are not a Kubernetes protobuf message."""


@dataclass(frozen=True)
class F:
    """One field: its JSON name and kind (`string`, `int`, `bool`, `bytes`, `time`,
    `intstr`, `quantity`, or a message name); `map_of` the value kind of a map<string, X>;
    `zero`: its zero value is kept (a Go pointer, or a field whose JSON tag has no
    omitempty), else a zero scalar is dropped as Go's JSON would drop it."""

    name: str
    kind: str = "string"
    repeated: bool = False
    zero: bool = False
    map_of: str | None = None


def _map(name: str, value: str = "string") -> F:
    return F(name, "map", map_of=value)


def _list(name: str, kind: str = "string") -> F:
    return F(name, kind, repeated=True)


def _opt(name: str, kind: str = "string") -> F:
    """A field whose zero is kept: a pointer, or JSON without omitempty."""
    return F(name, kind, zero=True)


# Field numbers from k8s.io/api and k8s.io/apimachinery generated.proto.
MESSAGES: dict[str, Mapping[int, F]] = {
    "Unknown": {
        1: F("typeMeta", "TypeMeta"),
        2: F("raw", "raw"),
        3: F("contentEncoding"),
        4: F("contentType"),
    },
    "Time": {1: _opt("seconds", "int"), 2: _opt("nanos", "int")},
    "IntOrString": {1: _opt("type", "int"), 2: _opt("intVal", "int"), 3: _opt("strVal")},
    "Quantity": {1: _opt("string")},
    "TypeMeta": {1: F("apiVersion"), 2: F("kind")},
    "ObjectMeta": {
        1: F("name"),
        2: F("generateName"),
        3: F("namespace"),
        4: F("selfLink"),
        5: F("uid"),
        6: F("resourceVersion"),
        7: F("generation", "int"),
        8: F("creationTimestamp", "time"),
        9: F("deletionTimestamp", "time"),
        10: _opt("deletionGracePeriodSeconds", "int"),
        11: _map("labels"),
        12: _map("annotations"),
        13: _list("ownerReferences", "OwnerReference"),
        14: _list("finalizers"),
    },
    "OwnerReference": {
        1: _opt("kind"),
        3: _opt("name"),
        4: _opt("uid"),
        5: _opt("apiVersion"),
        6: _opt("controller", "bool"),
        7: _opt("blockOwnerDeletion", "bool"),
    },
    "LabelSelector": {
        1: _map("matchLabels"),
        2: _list("matchExpressions", "LabelSelectorRequirement"),
    },
    "LabelSelectorRequirement": {1: _opt("key"), 2: _opt("operator"), 3: _list("values")},
    "Condition": {
        1: _opt("type"),
        2: _opt("status"),
        3: F("observedGeneration", "int"),
        4: F("lastTransitionTime", "time"),
        5: _opt("reason"),
        6: _opt("message"),
    },
    # core/v1
    "Secret": {
        1: F("metadata", "ObjectMeta"),
        2: _map("data", "bytes"),
        3: F("type"),
        4: _map("stringData"),
        5: _opt("immutable", "bool"),
    },
    "ConfigMap": {
        1: F("metadata", "ObjectMeta"),
        2: _map("data"),
        3: _map("binaryData", "bytes"),
        4: _opt("immutable", "bool"),
    },
    "ServiceAccount": {
        1: F("metadata", "ObjectMeta"),
        2: _list("secrets", "ObjectReference"),
        3: _list("imagePullSecrets", "LocalObjectReference"),
        4: _opt("automountServiceAccountToken", "bool"),
    },
    "ObjectReference": {
        1: F("kind"),
        2: F("namespace"),
        3: F("name"),
        4: F("uid"),
        5: F("apiVersion"),
        6: F("resourceVersion"),
        7: F("fieldPath"),
    },
    "LocalObjectReference": {1: F("name")},
    "Namespace": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "NamespaceSpec"),
        3: F("status", "NamespaceStatus"),
    },
    "NamespaceSpec": {1: _list("finalizers")},
    "NamespaceStatus": {1: F("phase")},
    "Service": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "ServiceSpec"),
        3: F("status", "ServiceStatus"),
    },
    "ServiceSpec": {
        1: _list("ports", "ServicePort"),
        2: _map("selector"),
        3: F("clusterIP"),
        4: F("type"),
        5: _list("externalIPs"),
        7: F("sessionAffinity"),
        8: F("loadBalancerIP"),
        9: _list("loadBalancerSourceRanges"),
        10: F("externalName"),
        11: F("externalTrafficPolicy"),
        12: F("healthCheckNodePort", "int"),
        13: F("publishNotReadyAddresses", "bool"),
        17: _opt("ipFamilyPolicy"),
        18: _list("clusterIPs"),
        19: _list("ipFamilies"),
        20: _opt("allocateLoadBalancerNodePorts", "bool"),
        21: _opt("loadBalancerClass"),
        22: _opt("internalTrafficPolicy"),
        23: _opt("trafficDistribution"),
    },
    "ServicePort": {
        1: F("name"),
        2: F("protocol"),
        3: _opt("port", "int"),
        4: F("targetPort", "intstr"),
        5: F("nodePort", "int"),
        6: _opt("appProtocol"),
    },
    "ServiceStatus": {
        1: F("loadBalancer", "LoadBalancerStatus"),
        2: _list("conditions", "Condition"),
    },
    "LoadBalancerStatus": {1: _list("ingress", "LoadBalancerIngress")},
    "LoadBalancerIngress": {1: F("ip"), 2: F("hostname"), 3: _opt("ipMode")},
    "PodTemplateSpec": {1: F("metadata", "ObjectMeta"), 2: F("spec", "PodSpec")},
    "PodSpec": {
        2: _list("containers", "Container"),
        3: F("restartPolicy"),
        4: _opt("terminationGracePeriodSeconds", "int"),
        5: _opt("activeDeadlineSeconds", "int"),
        6: F("dnsPolicy"),
        7: _map("nodeSelector"),
        8: F("serviceAccountName"),
        9: F("serviceAccount"),
        10: F("nodeName"),
        11: F("hostNetwork", "bool"),
        12: F("hostPID", "bool"),
        13: F("hostIPC", "bool"),
        15: _list("imagePullSecrets", "LocalObjectReference"),
        16: F("hostname"),
        17: F("subdomain"),
        19: F("schedulerName"),
        20: _list("initContainers", "Container"),
        21: _opt("automountServiceAccountToken", "bool"),
        24: F("priorityClassName"),
    },
    "Container": {
        1: _opt("name"),
        2: F("image"),
        3: _list("command"),
        4: _list("args"),
        5: F("workingDir"),
        6: _list("ports", "ContainerPort"),
        7: _list("env", "EnvVar"),
        8: F("resources", "ResourceRequirements"),
        13: F("terminationMessagePath"),
        14: F("imagePullPolicy"),
        16: F("stdin", "bool"),
        17: F("stdinOnce", "bool"),
        18: F("tty", "bool"),
        20: F("terminationMessagePolicy"),
    },
    "ContainerPort": {
        1: F("name"),
        2: F("hostPort", "int"),
        3: _opt("containerPort", "int"),
        4: F("protocol"),
        5: F("hostIP"),
    },
    "EnvVar": {1: _opt("name"), 2: F("value")},
    "ResourceRequirements": {1: _map("limits", "quantity"), 2: _map("requests", "quantity")},
    # apps/v1
    "Deployment": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "DeploymentSpec"),
        3: F("status", "DeploymentStatus"),
    },
    "DeploymentSpec": {
        1: _opt("replicas", "int"),
        2: _opt("selector", "LabelSelector"),
        3: F("template", "PodTemplateSpec"),
        4: F("strategy", "DeploymentStrategy"),
        5: F("minReadySeconds", "int"),
        6: _opt("revisionHistoryLimit", "int"),
        7: F("paused", "bool"),
        9: _opt("progressDeadlineSeconds", "int"),
    },
    "DeploymentStrategy": {1: F("type"), 2: _opt("rollingUpdate", "RollingUpdateDeployment")},
    "RollingUpdateDeployment": {1: _opt("maxUnavailable", "intstr"), 2: _opt("maxSurge", "intstr")},
    "DeploymentStatus": {
        1: F("observedGeneration", "int"),
        2: F("replicas", "int"),
        3: F("updatedReplicas", "int"),
        4: F("availableReplicas", "int"),
        5: F("unavailableReplicas", "int"),
        7: F("readyReplicas", "int"),
        8: _opt("collisionCount", "int"),
        9: _opt("terminatingReplicas", "int"),
    },
    # policy/v1
    "PodDisruptionBudget": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "PodDisruptionBudgetSpec"),
        3: F("status", "PodDisruptionBudgetStatus"),
    },
    "PodDisruptionBudgetSpec": {
        1: _opt("minAvailable", "intstr"),
        2: _opt("selector", "LabelSelector"),
        3: _opt("maxUnavailable", "intstr"),
        4: _opt("unhealthyPodEvictionPolicy"),
    },
    "PodDisruptionBudgetStatus": {
        1: F("observedGeneration", "int"),
        2: _map("disruptedPods", "time"),
        3: _opt("disruptionsAllowed", "int"),
        4: _opt("currentHealthy", "int"),
        5: _opt("desiredHealthy", "int"),
        6: _opt("expectedPods", "int"),
        7: _list("conditions", "Condition"),
    },
    # rbac.authorization.k8s.io/v1
    "Role": {1: F("metadata", "ObjectMeta"), 2: _list("rules", "PolicyRule")},
    "ClusterRole": {
        1: F("metadata", "ObjectMeta"),
        2: _list("rules", "PolicyRule"),
        3: _opt("aggregationRule", "AggregationRule"),
    },
    "PolicyRule": {
        1: _list("verbs"),
        2: _list("apiGroups"),
        3: _list("resources"),
        4: _list("resourceNames"),
        5: _list("nonResourceURLs"),
    },
    "AggregationRule": {1: _list("clusterRoleSelectors", "LabelSelector")},
    "RoleBinding": {
        1: F("metadata", "ObjectMeta"),
        2: _list("subjects", "Subject"),
        3: F("roleRef", "RoleRef"),
    },
    "Subject": {1: _opt("kind"), 2: F("apiGroup"), 3: _opt("name"), 4: F("namespace")},
    "RoleRef": {1: _opt("apiGroup"), 2: _opt("kind"), 3: _opt("name")},
}
MESSAGES["ClusterRoleBinding"] = MESSAGES["RoleBinding"]

# The kinds whose protobuf bodies are decoded, by (apiVersion, kind); the message of each
# is named after its kind.
KINDS = frozenset(
    {
        ("v1", "Secret"),
        ("v1", "ConfigMap"),
        ("v1", "ServiceAccount"),
        ("v1", "Namespace"),
        ("v1", "Service"),
        ("apps/v1", "Deployment"),
        ("policy/v1", "PodDisruptionBudget"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    }
)
ZEROS: dict[str, Any] = {"string": "", "int": 0, "bool": False}


def decode(body: bytes) -> Obj:
    """The object a protobuf request body carries, as its JSON form (with apiVersion and
    kind). Raises Malformed for bytes that are not one, Unsupported for a kind or a field
    the simulator does not decode."""
    if not body.startswith(MAGIC):
        raise Malformed("the body does not start with the Kubernetes protobuf prefix")
    try:
        envelope = _message(body[len(MAGIC) :], "Unknown")
    except UnicodeDecodeError as error:
        raise Malformed(f"a string that is not UTF-8: {error}") from error
    meta = envelope.get("typeMeta", {})
    api_version, kind = meta.get("apiVersion", ""), meta.get("kind", "")
    if envelope.get("contentEncoding") or envelope.get("contentType"):
        raise Unsupported(
            f"contentEncoding {envelope.get('contentEncoding')!r} / contentType "
            f"{envelope.get('contentType')!r} in the envelope"
        )
    if (api_version, kind) not in KINDS:
        raise Unsupported(f"a protobuf body of kind {kind or '?'} ({api_version or '?'})")
    try:
        fields = _message(envelope.get("raw", b""), kind)
    except UnicodeDecodeError as error:
        raise Malformed(f"a string that is not UTF-8: {error}") from error
    return {"apiVersion": api_version, "kind": kind, **fields}


def _message(data: bytes, name: str) -> Obj:
    fields = MESSAGES[name]
    out: Obj = {}
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(data, position)
            payload: int | bytes = value
        elif wire == 2:
            size, position = _varint(data, position)
            if position + size > len(data):
                raise Malformed(f"a field of {name} runs past the end of the body")
            payload, position = data[position : position + size], position + size
        else:
            raise Malformed(f"wire type {wire} in {name}")
        field = fields.get(number)
        if field is None:
            raise Unsupported(f"field {number} of {name}")
        _store(out, field, payload, name)
    for field in fields.values():
        plain = field.kind in ZEROS and not field.repeated and not field.zero
        if plain and field.name in out and out[field.name] == ZEROS[field.kind]:
            del out[field.name]
    return out


def _store(out: Obj, field: F, payload: int | bytes, owner: str) -> None:
    if field.map_of is not None:
        entry = _entry(_bytes(payload, field, owner), field.map_of, owner)
        out.setdefault(field.name, {}).update([entry])
        return
    value = _value(payload, field.kind, field, owner)
    if field.repeated:
        out.setdefault(field.name, []).append(value)
    elif value is None:
        out.pop(field.name, None)
    else:
        out[field.name] = value


def _entry(data: bytes, value_kind: str, owner: str) -> tuple[str, Any]:
    """A map entry: key 1 (string), value 2."""
    key, value = "", _value(b"", value_kind, None, owner)
    position = 0
    while position < len(data):
        tag, position = _varint(data, position)
        if tag & 7 != 2:
            raise Malformed(f"a map entry of {owner} with wire type {tag & 7}")
        size, position = _varint(data, position)
        chunk, position = data[position : position + size], position + size
        if tag >> 3 == 1:
            key = chunk.decode()
        elif tag >> 3 == 2:
            value = _value(chunk, value_kind, None, owner)
    return key, value


def _value(payload: int | bytes, kind: str, field: F | None, owner: str) -> Any:
    if kind in ("int", "bool"):
        number = _int(payload, field, owner)
        if kind == "bool":
            return bool(number)
        # int32/int64 negatives travel as 64-bit two's complement.
        return number - (1 << 64) if number >= 1 << 63 else number
    data = _bytes(payload, field, owner)
    convert = _CONVERTERS.get(kind)
    return convert(data) if convert is not None else _message(data, kind)


def _time(data: bytes) -> str | None:
    stamp = _message(data, "Time")
    if not stamp.get("seconds") and not stamp.get("nanos"):
        return None
    return datetime.fromtimestamp(stamp.get("seconds", 0), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _int_or_string(data: bytes) -> int | str:
    parts = _message(data, "IntOrString")
    value: int | str = parts.get("strVal", "") if parts.get("type") == 1 else parts.get("intVal", 0)
    return value


_CONVERTERS: dict[str, Callable[[bytes], Any]] = {
    "raw": bytes,
    "string": bytes.decode,
    "bytes": lambda data: base64.b64encode(data).decode(),
    "time": _time,
    "intstr": _int_or_string,
    "quantity": lambda data: _message(data, "Quantity").get("string", ""),
}


def _int(payload: int | bytes, field: F | None, owner: str) -> int:
    if not isinstance(payload, int):
        raise Malformed(f"{owner}.{field.name if field else '?'} is not a varint")
    return payload


def _bytes(payload: int | bytes, field: F | None, owner: str) -> bytes:
    if not isinstance(payload, bytes):
        raise Malformed(f"{owner}.{field.name if field else '?'} is not length-delimited")
    return payload


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise Malformed("a varint runs past the end of the body")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


# -- encoding (the simulator's own protobuf answers) ----------------------------------------


def field_bytes(number: int, payload: bytes) -> bytes:
    """One length-delimited field (wire type 2)."""
    return varint_bytes(number << 3 | 2) + varint_bytes(len(payload)) + payload


def varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
