"""The resource types the simulator serves, and the discovery documents that describe them.

One table drives everything: URL routing, storage, discovery (`/api/v1`, `/apis/<g>/<v>`),
the OpenAPI documents, which field selectors each type accepts, which lists a strategic
merge patch merges (and by which key), and the status-subresource rules. Serving one more
kind is one more entry in `ALL_RESOURCES` with its shape (shapes.py); nothing else names
kinds, except objects.py for the defaults and validation particular to one.

The merge keys are the ones in the upstream Go types' `patchStrategy`/`patchMergeKey`
tags, because that is what a strategic merge patch does against a real cluster. Most come
with the kind's shape (finalizers as a set, ownerReferences by `uid`, Service ports by
`port`, containers by `name`, ...); `extra_merge` adds those inside the parts a shape
leaves open: node `spec.podCIDRs` (a set), node `status.addresses` and every
`status.conditions` by `type`. Node `spec.taints` and service
`status.loadBalancer.ingress` carry *no* merge strategy upstream, so a patch replaces
those lists whole (a patch that sends one taint drops the others, exactly as on a real
cluster).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from pyccm_sim.kube import shapes
from pyccm_sim.kube.schema import MergeKey, Struct, merge_lists

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
    # The kind's fields and list merge keys (shapes.py): decoding, patches, OpenAPI.
    schema: Struct
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

    @cached_property
    def merge_lists(self) -> Mapping[tuple[str, ...], MergeKey]:
        """The schema's merge lists, plus `extra_merge` for those inside its open parts."""
        return MappingProxyType({**merge_lists(self.schema), **self.extra_merge})

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
    schema=shapes.NODE,
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
    schema=shapes.SERVICE,
    short_names=("svc",),
    status_subresource=True,
    reset_status_on_create=True,
    categories=("all",),
    extra_fields={"spec.type": ("spec", "type"), "spec.clusterIP": ("spec", "clusterIP")},
    extra_merge={("status", "conditions"): "type"},
)
NAMESPACES = ResourceType(
    group="",
    version="v1",
    plural="namespaces",
    singular="namespace",
    kind="Namespace",
    namespaced=False,
    schema=shapes.NAMESPACE,
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
    schema=shapes.EVENT,
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
    schema=shapes.POD,
    short_names=("po",),
    status_subresource=True,
    categories=("all",),
    extra_fields={
        "spec.nodeName": ("spec", "nodeName"),
        "status.phase": ("status", "phase"),
    },
    extra_merge={("status", "conditions"): "type"},
)
SERVICE_ACCOUNTS = ResourceType(
    group="",
    version="v1",
    plural="serviceaccounts",
    singular="serviceaccount",
    kind="ServiceAccount",
    namespaced=True,
    schema=shapes.SERVICE_ACCOUNT,
    short_names=("sa",),
)
SECRETS = ResourceType(
    group="",
    version="v1",
    plural="secrets",
    singular="secret",
    kind="Secret",
    namespaced=True,
    schema=shapes.SECRET,
    extra_fields={"type": ("type",)},
)
CONFIG_MAPS = ResourceType(
    group="",
    version="v1",
    plural="configmaps",
    singular="configmap",
    kind="ConfigMap",
    namespaced=True,
    schema=shapes.CONFIG_MAP,
    short_names=("cm",),
)
LEASES = ResourceType(
    group="coordination.k8s.io",
    version="v1",
    plural="leases",
    singular="lease",
    kind="Lease",
    namespaced=True,
    schema=shapes.LEASE,
)
EVENTS_V1 = ResourceType(
    group="events.k8s.io",
    version="v1",
    plural="events",
    singular="event",
    kind="Event",
    namespaced=True,
    schema=shapes.EVENT_V1,
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
DEPLOYMENTS = ResourceType(
    group="apps",
    version="v1",
    plural="deployments",
    singular="deployment",
    kind="Deployment",
    namespaced=True,
    schema=shapes.DEPLOYMENT,
    short_names=("deploy",),
    status_subresource=True,
    categories=("all",),
    extra_merge={("status", "conditions"): "type"},
)
STATEFUL_SETS = ResourceType(
    group="apps",
    version="v1",
    plural="statefulsets",
    singular="statefulset",
    kind="StatefulSet",
    namespaced=True,
    schema=shapes.STATEFUL_SET,
    short_names=("sts",),
    status_subresource=True,
    categories=("all",),
    extra_merge={("status", "conditions"): "type"},
)
POD_DISRUPTION_BUDGETS = ResourceType(
    group="policy",
    version="v1",
    plural="poddisruptionbudgets",
    singular="poddisruptionbudget",
    kind="PodDisruptionBudget",
    namespaced=True,
    schema=shapes.POD_DISRUPTION_BUDGET,
    short_names=("pdb",),
    status_subresource=True,
    extra_merge={("status", "conditions"): "type"},
)
_RBAC = "rbac.authorization.k8s.io"
CLUSTER_ROLES = ResourceType(
    group=_RBAC,
    version="v1",
    plural="clusterroles",
    singular="clusterrole",
    kind="ClusterRole",
    namespaced=False,
    schema=shapes.CLUSTER_ROLE,
)
CLUSTER_ROLE_BINDINGS = ResourceType(
    group=_RBAC,
    version="v1",
    plural="clusterrolebindings",
    singular="clusterrolebinding",
    kind="ClusterRoleBinding",
    namespaced=False,
    schema=shapes.CLUSTER_ROLE_BINDING,
)
ROLES = ResourceType(
    group=_RBAC,
    version="v1",
    plural="roles",
    singular="role",
    kind="Role",
    namespaced=True,
    schema=shapes.ROLE,
)
ROLE_BINDINGS = ResourceType(
    group=_RBAC,
    version="v1",
    plural="rolebindings",
    singular="rolebinding",
    kind="RoleBinding",
    namespaced=True,
    schema=shapes.ROLE_BINDING,
)
RBAC_RESOURCES = (CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, ROLES, ROLE_BINDINGS)

ALL_RESOURCES: tuple[ResourceType, ...] = (
    NODES,
    SERVICES,
    NAMESPACES,
    EVENTS,
    PODS,
    SERVICE_ACCOUNTS,
    SECRETS,
    CONFIG_MAPS,
    LEASES,
    EVENTS_V1,
    DEPLOYMENTS,
    STATEFUL_SETS,
    POD_DISRUPTION_BUDGETS,
    *RBAC_RESOURCES,
)
# The named API groups, each at its one version, in the order discovery lists them.
GROUP_VERSIONS: tuple[tuple[str, str], ...] = tuple(
    dict.fromkeys((r.group, r.version) for r in ALL_RESOURCES if r.group)
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


def kind_named(api_version: str, kind: str) -> ResourceType | None:
    """The resource a manifest's `apiVersion` and `kind` name, if the simulator serves it."""
    for rtype in ALL_RESOURCES:
        if rtype.api_version == api_version and rtype.kind == kind:
            return rtype
    return None
