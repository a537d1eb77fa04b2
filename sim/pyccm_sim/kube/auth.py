"""Bearer-token authentication and RBAC authorization, as kube-apiserver applies them.

Tokens come from `--token` (the admin, in group `system:masters`) and an optional static
token file in kube-apiserver's `--token-auth-file` format (`token,user,uid,"group1,group2"`).
Every authenticated user is also in `system:authenticated`; a ServiceAccount user
(`system:serviceaccount:<ns>:<name>`) is in `system:serviceaccounts` and
`system:serviceaccounts:<ns>`, so bindings to a ServiceAccount subject work.

RBAC is off unless asked for (`--rbac [FILE...]`); then the ClusterRoles, Roles,
ClusterRoleBindings and RoleBindings the simulator stores decide: those the files hold,
created at start, and any written through the API since (`kubectl apply -f
deploy/rbac.yaml`), so they take effect at once, with upstream's rule matching (apiGroups, resources
with `/subresource`, verbs, resourceNames, `*` wildcards, namespaces by binding), and a
denial is a 403 in the API server's words. `system:masters` is never denied, as upstream.
Rules with `nonResourceURLs` (`/metrics`, a trailing `*` for a prefix) grant non-resource
paths, only through ClusterRoleBindings, as upstream; SubjectAccessReviews ask about them.
The bootstrap ClusterRoles a manifest may bind without defining (`system:auth-delegator`)
exist from the start, as in a real cluster.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pyccm_sim.kube import errors
from pyccm_sim.kube.resources import RBAC_RESOURCES
from pyccm_sim.kube.settings import User
from pyccm_sim.kube.store import Store


def parse_token_file(text: str) -> list[tuple[str, User]]:
    rows = []
    for row in csv.reader(io.StringIO(text)):
        if not row or row[0].startswith("#"):
            continue
        if len(row) < 3:
            raise ValueError('token file rows are token,user,uid[,"group1,group2"]')
        groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
        rows.append((row[0].strip(), User(row[1].strip(), groups)))
    return rows


def effective_groups(user: User) -> frozenset[str]:
    groups = set(user.groups) | {"system:authenticated"}
    parts = user.name.split(":")
    if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
        groups |= {"system:serviceaccounts", f"system:serviceaccounts:{parts[2]}"}
    return frozenset(groups)


@dataclass(frozen=True)
class Rule:
    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    resource_names: frozenset[str]
    non_resource_urls: frozenset[str] = frozenset()

    def allows(self, group: str, resource: str, verb: str, name: str) -> bool:
        return (
            ("*" in self.api_groups or group in self.api_groups)
            and _resource_matches(self.resources, resource)
            and ("*" in self.verbs or verb in self.verbs)
            and (not self.resource_names or name in self.resource_names)
        )

    def allows_path(self, path: str, verb: str) -> bool:
        """Upstream's NonResourceURLMatches: the exact path, or `prefix*` (`*`: any)."""
        return ("*" in self.verbs or verb in self.verbs) and any(
            url == path or (url.endswith("*") and path.startswith(url[:-1]))
            for url in self.non_resource_urls
        )


def _resource_matches(allowed: frozenset[str], resource: str) -> bool:
    if "*" in allowed or resource in allowed:
        return True
    # "*/status" grants the status subresource of every resource.
    _, slash, sub = resource.partition("/")
    return bool(slash) and f"*/{sub}" in allowed


@dataclass(frozen=True)
class Binding:
    role: tuple[str, str]  # (kind, name)
    namespace: str | None  # None for a ClusterRoleBinding
    users: frozenset[str]
    groups: frozenset[str]


@dataclass(frozen=True)
class Request:
    user: User
    verb: str
    group: str
    resource: str  # "nodes" or "nodes/status"
    namespace: str  # "" for cluster-scoped requests
    name: str


# kube-apiserver's bootstrap policy, the part a CCM's manifests bind: tokenreviews and
# subjectaccessreviews create, for delegated authentication and authorization.
BOOTSTRAP_CLUSTER_ROLES: tuple[dict[str, Any], ...] = (
    {
        "kind": "ClusterRole",
        "metadata": {"name": "system:auth-delegator"},
        "rules": [
            {
                "apiGroups": ["authentication.k8s.io"],
                "resources": ["tokenreviews"],
                "verbs": ["create"],
            },
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["subjectaccessreviews"],
                "verbs": ["create"],
            },
        ],
    },
)


class Authorizer:
    def __init__(self, documents: Iterable[dict[str, Any]]) -> None:
        self.cluster_roles: dict[str, list[Rule]] = {}
        self.roles: dict[tuple[str, str], list[Rule]] = {}
        self.bindings: list[Binding] = []
        for document in (*BOOTSTRAP_CLUSTER_ROLES, *documents):
            self._load(document)

    def _load(self, document: dict[str, Any]) -> None:
        kind = document.get("kind")
        meta = document.get("metadata") or {}
        name = meta.get("name", "")
        if kind == "ClusterRole":
            self.cluster_roles[name] = _rules(document)
        elif kind == "Role":
            self.roles[(meta.get("namespace", "default"), name)] = _rules(document)
        elif kind in ("ClusterRoleBinding", "RoleBinding"):
            namespace = meta.get("namespace", "default") if kind == "RoleBinding" else None
            self.bindings.append(_binding(document, namespace))

    def allows(self, request: Request, groups: frozenset[str] | None = None) -> bool:
        """`groups` as given (a SubjectAccessReview's), else the token user's."""
        return self._granted(
            request.user.name,
            effective_groups(request.user) if groups is None else groups,
            request.namespace,
            lambda rule: rule.allows(request.group, request.resource, request.verb, request.name),
        )

    def allows_path(self, user: str, groups: frozenset[str], path: str, verb: str) -> bool:
        """A non-resource request: only ClusterRoleBindings grant those."""
        return self._granted(user, groups, None, lambda rule: rule.allows_path(path, verb))

    def _granted(
        self,
        user: str,
        groups: frozenset[str],
        namespace: str | None,
        matches: Callable[[Rule], bool],
    ) -> bool:
        if "system:masters" in groups:
            return True
        for binding in self.bindings:
            if not (user in binding.users or groups & binding.groups):
                continue
            if binding.namespace is not None and binding.namespace != namespace:
                continue
            if any(matches(rule) for rule in self._rules_of(binding)):
                return True
        return False

    def _rules_of(self, binding: Binding) -> list[Rule]:
        kind, name = binding.role
        if kind == "ClusterRole":
            return self.cluster_roles.get(name, [])
        return self.roles.get((binding.namespace or "", name), [])

    def check(self, request: Request) -> None:
        if self.allows(request):
            return
        plural = request.resource.split("/")[0]
        scope = (
            f'in the namespace "{request.namespace}"'
            if request.namespace
            else "at the cluster scope"
        )
        why = (
            f'User "{request.user.name}" cannot {request.verb} resource "{request.resource}" '
            f'in API group "{request.group}" {scope}'
        )
        raise errors.forbidden(plural, request.name, request.group, why)


class BadRbacFile(ValueError):
    """An `--rbac` file holds an object the API refuses."""


class StoredRbac:
    """The Authorizer for the RBAC objects in the store, rebuilt only after one of them
    changed (the store's last write to each RBAC resource says when)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._stamp: tuple[int, ...] = ()
        self._authorizer = Authorizer(())

    def current(self) -> Authorizer:
        stamp = tuple(self.store.last_write(rtype) for rtype in RBAC_RESOURCES)
        if stamp != self._stamp:
            self._authorizer = Authorizer(
                entry.obj
                for rtype in RBAC_RESOURCES
                for entry in self.store.objects[rtype].values()
            )
            self._stamp = stamp
        return self._authorizer


def rbac_documents(paths: Iterable[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Every object in the files (a `kind: List` unfolded), with the file it came from."""
    documents: list[tuple[Path, dict[str, Any]]] = []
    for path in paths:
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict):
                documents.extend((path, item) for item in _flatten(document))
    return documents


def _flatten(document: dict[str, Any]) -> list[dict[str, Any]]:
    if document.get("kind") == "List":
        return [item for item in document.get("items") or [] if isinstance(item, dict)]
    return [document]


def _rules(document: dict[str, Any]) -> list[Rule]:
    return [
        Rule(
            api_groups=frozenset(rule.get("apiGroups") or []),
            resources=frozenset(rule.get("resources") or []),
            verbs=frozenset(rule.get("verbs") or []),
            resource_names=frozenset(rule.get("resourceNames") or []),
            non_resource_urls=frozenset(rule.get("nonResourceURLs") or []),
        )
        for rule in document.get("rules") or []
        if isinstance(rule, dict)
    ]


def _binding(document: dict[str, Any], namespace: str | None) -> Binding:
    ref = document.get("roleRef") or {}
    users, groups = set(), set()
    for subject in document.get("subjects") or []:
        kind = subject.get("kind")
        if kind == "User":
            users.add(subject.get("name", ""))
        elif kind == "Group":
            groups.add(subject.get("name", ""))
        elif kind == "ServiceAccount":
            sa_namespace = subject.get("namespace") or namespace or "default"
            users.add(f"system:serviceaccount:{sa_namespace}:{subject.get('name', '')}")
    return Binding(
        role=(ref.get("kind", "ClusterRole"), ref.get("name", "")),
        namespace=namespace,
        users=frozenset(users),
        groups=frozenset(groups),
    )
