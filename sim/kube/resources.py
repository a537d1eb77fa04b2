"""The resource types the simulator serves, and the discovery documents that describe them.

One table drives everything: URL routing, discovery (`/api/v1`, `/apis/<g>/<v>`), which
field selectors each type accepts, which lists a strategic merge patch merges (and by
which key), and the status-subresource rules. The merge keys are the ones in the
upstream Go types' `patchStrategy`/`patchMergeKey` tags (k8s.io/api core/v1), because
that is what a strategic merge patch does against a real cluster:

- `metadata.finalizers`, `spec.podCIDRs`: merged as sets of strings;
- `metadata.ownerReferences` by `uid`; node `status.addresses` and every `status.conditions`
  by `type`; service `spec.ports` by `port`;
- node `spec.taints` and service `status.loadBalancer.ingress` carry *no* merge strategy
  upstream, so a patch replaces those lists whole (a patch that sends one taint drops the
  others, exactly as on a real cluster).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

MergeKey = str | None
"""A merge list's key field, or None for a list of strings merged as a set."""

_COMMON_MERGE: Mapping[tuple[str, ...], MergeKey] = {
    ("metadata", "finalizers"): None,
    ("metadata", "ownerReferences"): "uid",
}
_COMMON_FIELDS: Mapping[str, tuple[str, ...]] = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
}
_ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_SUB_VERBS = ("get", "patch", "update")


@dataclass(frozen=True, eq=False)
class ResourceType:
    """One served resource; identity-hashed so it can key the store's maps."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    # nodes and services have a status subresource: writes to one half ignore the other.
    status_subresource: bool = False
    # Services drop a client-sent status on create (upstream service strategy); nodes keep it.
    reset_status_on_create: bool = False
    extra_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    extra_merge: Mapping[tuple[str, ...], MergeKey] = field(default_factory=dict)
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def field_selectors(self) -> Mapping[str, tuple[str, ...]]:
        return MappingProxyType({**_COMMON_FIELDS, **self.extra_fields})

    @property
    def merge_lists(self) -> Mapping[tuple[str, ...], MergeKey]:
        return MappingProxyType({**_COMMON_MERGE, **self.extra_merge})

    def discovery_entries(self) -> list[dict[str, object]]:
        main: dict[str, object] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(_ALL_VERBS),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        entries = [main]
        if self.status_subresource:
            entries.append(
                {
                    "name": f"{self.plural}/status",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": list(_SUB_VERBS),
                }
            )
        return entries


NODES = ResourceType(
    group="",
    version="v1",
    plural="nodes",
    singular="node",
    kind="Node",
    namespaced=False,
    short_names=("no",),
    status_subresource=True,
    extra_fields={"spec.unschedulable": ("spec", "unschedulable")},
    extra_merge={
        ("spec", "podCIDRs"): None,
        ("status", "addresses"): "type",
        ("status", "conditions"): "type",
    },
)
SERVICES = ResourceType(
    group="",
    version="v1",
    plural="services",
    singular="service",
    kind="Service",
    namespaced=True,
    short_names=("svc",),
    status_subresource=True,
    reset_status_on_create=True,
    categories=("all",),
    extra_fields={"spec.type": ("spec", "type"), "spec.clusterIP": ("spec", "clusterIP")},
    extra_merge={("spec", "ports"): "port", ("status", "conditions"): "type"},
)
NAMESPACES = ResourceType(
    group="",
    version="v1",
    plural="namespaces",
    singular="namespace",
    kind="Namespace",
    namespaced=False,
    short_names=("ns",),
    status_subresource=True,
    extra_fields={"status.phase": ("status", "phase")},
    extra_merge={("status", "conditions"): "type"},
)
_EVENT_FIELDS: Mapping[str, tuple[str, ...]] = {
    "involvedObject.kind": ("involvedObject", "kind"),
    "involvedObject.namespace": ("involvedObject", "namespace"),
    "involvedObject.name": ("involvedObject", "name"),
    "involvedObject.uid": ("involvedObject", "uid"),
    "involvedObject.apiVersion": ("involvedObject", "apiVersion"),
    "involvedObject.resourceVersion": ("involvedObject", "resourceVersion"),
    "involvedObject.fieldPath": ("involvedObject", "fieldPath"),
    "reason": ("reason",),
    "reportingComponent": ("reportingComponent",),
    "source": ("source", "component"),
    "type": ("type",),
}
EVENTS = ResourceType(
    group="",
    version="v1",
    plural="events",
    singular="event",
    kind="Event",
    namespaced=True,
    short_names=("ev",),
    extra_fields=_EVENT_FIELDS,
)
# `kubectl describe node` lists the node's pods; an empty, writable pods resource lets it.
PODS = ResourceType(
    group="",
    version="v1",
    plural="pods",
    singular="pod",
    kind="Pod",
    namespaced=True,
    short_names=("po",),
    status_subresource=True,
    categories=("all",),
    extra_fields={
        "spec.nodeName": ("spec", "nodeName"),
        "status.phase": ("status", "phase"),
    },
    extra_merge={("status", "conditions"): "type"},
)
LEASES = ResourceType(
    group="coordination.k8s.io",
    version="v1",
    plural="leases",
    singular="lease",
    kind="Lease",
    namespaced=True,
)
EVENTS_V1 = ResourceType(
    group="events.k8s.io",
    version="v1",
    plural="events",
    singular="event",
    kind="Event",
    namespaced=True,
    short_names=("ev",),
    extra_fields={
        "regarding.kind": ("regarding", "kind"),
        "regarding.namespace": ("regarding", "namespace"),
        "regarding.name": ("regarding", "name"),
        "regarding.uid": ("regarding", "uid"),
        "reason": ("reason",),
        "type": ("type",),
    },
)

ALL_RESOURCES: tuple[ResourceType, ...] = (
    NODES,
    SERVICES,
    NAMESPACES,
    EVENTS,
    PODS,
    LEASES,
    EVENTS_V1,
)
GROUP_VERSIONS: tuple[tuple[str, str], ...] = (
    ("coordination.k8s.io", "v1"),
    ("events.k8s.io", "v1"),
)


def resources_in(group: str, version: str) -> dict[str, ResourceType]:
    return {r.plural: r for r in ALL_RESOURCES if r.group == group and r.version == version}


def api_versions(server_address: str) -> dict[str, object]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_group_list() -> dict[str, object]:
    groups = []
    for group, version in GROUP_VERSIONS:
        gv = {"groupVersion": f"{group}/{version}", "version": version}
        groups.append({"name": group, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str) -> dict[str, object] | None:
    for name, version in GROUP_VERSIONS:
        if name == group:
            gv = {"groupVersion": f"{group}/{version}", "version": version}
            return {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": group,
                "versions": [gv],
                "preferredVersion": gv,
            }
    return None


def resource_list(group: str, version: str) -> dict[str, object] | None:
    served = resources_in(group, version)
    if not served:
        return None
    entries = [entry for r in served.values() for entry in r.discovery_entries()]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": entries,
    }


def resource_named(name: str) -> ResourceType:
    """`nodes`, `services`, `leases`, ... or `events.events.k8s.io` for the non-core events:
    how tests and the admin endpoint name a resource."""
    for rtype in ALL_RESOURCES:
        if name and name in (f"{rtype.plural}.{rtype.group}", "" if rtype.group else rtype.plural):
            return rtype
    for rtype in ALL_RESOURCES:
        if name == rtype.plural:
            return rtype
    raise KeyError(f"the simulator serves no resource named {name!r}")
