"""Server-side apply and managedFields: who set which field, as the API server records it.

Every write that names a `fieldManager` (kubectl always does: kubectl-create,
kubectl-client-side-apply, kubectl-replace, kubectl-edit, ...) and every server-side apply
is recorded in `metadata.managedFields` the way upstream records it: one entry per manager,
operation and subresource, owning a FieldsV1 set of fields (`f:spec: {f:replicas: {}}`,
keyed list items as `k:{"name":"web"}`, set members as `v:"x"`). An Update takes ownership
of the fields it changed, and other managers lose them; an Apply owns exactly the fields of
the configuration it last applied. Writes without a fieldManager (pyccm's, through the
Python client) keep the entries they find: upstream would file them under the client's
user agent, which would cost every hot-path status write a field diff that no test reads.
A write that sets managedFields itself (kubectl's migration from client-side to
server-side apply) gets exactly what it wrote.

An apply (`application/apply-patch+yaml`) merges the applied configuration into the live
object (maps key by key, keyed lists item by item, sets by value, anything else replaced),
removes the fields the manager applied last time and no longer does unless another
manager owns them too, and refuses with 409 Conflict, in upstream's words, to change a
field another manager owns to a different value, unless `force` moves the field to it.
Like upstream's lastAppliedUpdater, an apply by the manager "kubectl" keeps an existing
client-side apply annotation in step with what it applied.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyccm_sim.kube import errors
from pyccm_sim.kube.schema import MergeKey

Obj = dict[str, Any]
Path = tuple[str, ...]
"""A field's FieldsV1 keys from the root: ("f:spec", "f:replicas")."""
MergeLists = Mapping[tuple[str, ...], MergeKey]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# The server's own metadata: nobody manages it.
_SERVER_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
    }
)
_MISSING = object()


@dataclass(frozen=True)
class Scope:
    """What a write can own: the object's lists that merge, and which half it writes
    (for a kind with a status subresource: the main resource owns all but status, the
    status subresource only status)."""

    lists: MergeLists
    status_subresource: bool
    subresource: str = ""

    def covers(self, top_level: str) -> bool:
        if top_level in ("apiVersion", "kind"):
            return False
        if not self.status_subresource:
            return True
        return (top_level == "status") == (self.subresource == "status")


@dataclass
class Manager:
    """One managedFields entry."""

    manager: str
    operation: str
    api_version: str
    time: str
    subresource: str = ""
    fields: set[Path] = field(default_factory=set)

    def encode(self) -> Obj:
        entry: Obj = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(self.fields),
        }
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


# -- field sets -----------------------------------------------------------------------------


def leaves(obj: Obj, scope: Scope) -> dict[Path, Any]:
    """Every field a manager can own in `obj`, with its value: scalars, atomic lists and
    empty maps; each item of a keyed list (its "." entry, whose value is its key) and its
    fields; each member of a set."""
    found: dict[Path, Any] = {}
    for key, value in obj.items():
        if not scope.covers(key):
            continue
        if key == "metadata" and isinstance(value, dict):
            for name, item in value.items():
                if name not in _SERVER_META:
                    _walk(item, ("metadata", name), ("f:metadata", f"f:{name}"), scope, found)
        else:
            _walk(value, (key,), (f"f:{key}",), scope, found)
    return found


def _walk(
    value: Any, where: tuple[str, ...], path: Path, scope: Scope, found: dict[Path, Any]
) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _walk(item, (*where, key), (*path, f"f:{key}"), scope, found)
        return
    key = scope.lists.get(where, "")
    if isinstance(value, list) and value and where in scope.lists and _keyed(value, key):
        for item in value:
            if key is None:
                found[(*path, "v:" + _json(item))] = item
            else:
                item_path = (*path, "k:" + _json({key: item[key]}))
                found[(*item_path, ".")] = item[key]
                _walk(item, where, item_path, scope, found)
        return
    found[path] = value


def _keyed(items: list[Any], key: MergeKey) -> bool:
    """Whether a merge list's items really are what its key says (else it is atomic)."""
    if key is None:
        return all(isinstance(i, str | int | float | bool) for i in items)
    return all(isinstance(i, dict) and key in i for i in items)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def fields_v1(paths: Iterable[Path]) -> Obj:
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(part, {})
    return root


def paths_of(fields: Any, prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    if not isinstance(fields, dict):
        return found
    for key, child in fields.items():
        path = (*prefix, str(key))
        if isinstance(child, dict) and child:
            found |= paths_of(child, path)
        else:
            found.add(path)
    return found


def shown_path(path: Path) -> str:
    """A path as upstream prints it in conflicts: .spec.containers[name="web"].image."""
    text = ""
    for part in path:
        kind, _, rest = part.partition(":")
        if kind == "f":
            text += f".{rest}"
        elif kind == "k":
            text += "[" + ",".join(f"{k}={_json(v)}" for k, v in json.loads(rest).items()) + "]"
        elif kind == "v":
            text += f"[={rest}]"
    return text


# -- entries --------------------------------------------------------------------------------


def managers_of(obj: Obj) -> list[Manager]:
    """The object's managedFields; entries a client wrote malformed are skipped."""
    entries = []
    for entry in obj.get("metadata", {}).get("managedFields") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("manager"), str):
            continue
        entries.append(
            Manager(
                manager=entry["manager"],
                operation=str(entry.get("operation", "Update")),
                api_version=str(entry.get("apiVersion", "")),
                time=str(entry.get("time", "")),
                subresource=str(entry.get("subresource", "")),
                fields=paths_of(entry.get("fieldsV1")),
            )
        )
    return entries


def _store(obj: Obj, entries: list[Manager]) -> None:
    kept = [e.encode() for e in entries if e.fields]
    if kept:
        obj["metadata"]["managedFields"] = kept
    else:
        obj["metadata"].pop("managedFields", None)


def _entry(entries: list[Manager], manager: str, operation: str, subresource: str) -> Manager:
    for entry in entries:
        if (entry.manager, entry.operation, entry.subresource) == (
            manager,
            operation,
            subresource,
        ):
            return entry
    entry = Manager(manager, operation, "", "", subresource)
    entries.append(entry)
    return entry


# -- update ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stamp:
    """Who writes and when: the entry's manager, apiVersion and time."""

    manager: str
    api_version: str
    time: str


def record_update(old: Obj | None, new: Obj, *, stamp: Stamp, scope: Scope) -> None:
    """`stamp.manager` takes the fields this write changed (others lose them)."""
    old_managed = (old or {}).get("metadata", {}).get("managedFields")
    if old is not None and new["metadata"].get("managedFields") != old_managed:
        return  # the client set managedFields itself
    before = leaves(old, scope) if old is not None else {}
    after = leaves(new, scope)
    touched = {p for p, v in after.items() if before.get(p, _MISSING) != v}
    touched |= before.keys() - after.keys()
    if not touched:
        return
    entries = managers_of(new)
    for entry in entries:
        entry.fields -= touched
    mine = _entry(entries, stamp.manager, "Update", scope.subresource)
    mine.fields |= touched & after.keys()
    mine.api_version, mine.time = stamp.api_version, stamp.time
    _store(new, entries)


# -- apply ----------------------------------------------------------------------------------


def apply(live: Obj, applied: Obj, *, stamp: Stamp, scope: Scope, force: bool) -> Obj:
    """`live` (an empty skeleton if the object does not exist yet) after `stamp.manager`
    applies `applied`; raises a 409 Conflict ApiError for a field another manager owns
    with a different value, unless `force`."""
    applied = copy.deepcopy(applied)
    applied.get("metadata", {}).pop("managedFields", None)
    wanted = leaves(applied, scope)
    current = leaves(live, scope)
    entries = managers_of(live)
    mine = _entry(entries, stamp.manager, "Apply", scope.subresource)
    others = [e for e in entries if e is not mine]
    conflicts = [
        (entry, path)
        for entry in others
        for path in sorted(entry.fields & wanted.keys())
        if current.get(path, _MISSING) != wanted[path]
    ]
    if conflicts and not force:
        raise conflict_error(conflicts)
    for entry, path in conflicts:
        entry.fields.discard(path)
    shared = set().union(*(e.fields for e in others))
    result = copy.deepcopy(live)
    # Deepest first, so a dropped list item goes before its own fields are looked at.
    for path in sorted(mine.fields - wanted.keys() - shared, key=len, reverse=True):
        _remove(result, path)
    _merge(result, applied, (), scope.lists)
    if mine.fields != set(wanted) or _content(result) != _content(live) or not mine.time:
        mine.fields, mine.api_version, mine.time = set(wanted), stamp.api_version, stamp.time
    _store(result, entries)
    if stamp.manager == "kubectl":
        _sync_last_applied(result, applied)
    return result


def _content(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def _remove(node: Any, path: Path) -> None:
    head, rest = path[0], path[1:]
    kind, _, text = head.partition(":")
    if kind == "f" and isinstance(node, dict):
        if not rest:
            node.pop(text, None)
        elif text in node:
            _remove(node[text], rest)
    elif kind == "v" and isinstance(node, list):
        value = json.loads(text)
        node[:] = [item for item in node if item != value]
    elif kind == "k" and isinstance(node, list):
        key = json.loads(text)
        index = next(
            (i for i, item in enumerate(node) if isinstance(item, dict) and _matches(item, key)),
            None,
        )
        if index is None:
            return
        if rest == (".",):
            del node[index]
        else:
            _remove(node[index], rest)


def _matches(item: Obj, key: Obj) -> bool:
    return all(item.get(k) == v for k, v in key.items())


def _merge(live: Any, applied: Any, where: tuple[str, ...], lists: MergeLists) -> Any:
    if isinstance(live, dict) and isinstance(applied, dict):
        for key, value in applied.items():
            live[key] = _merge(live.get(key), value, (*where, key), lists)
        return live
    key = lists.get(where, "")
    if (
        isinstance(live, list)
        and isinstance(applied, list)
        and where in lists
        and _keyed(live, key)
        and _keyed(applied, key)
    ):
        if key is None:
            return live + [v for v in applied if v not in live]
        merged = list(live)
        for item in applied:
            index = next((i for i, m in enumerate(merged) if m[key] == item[key]), None)
            if index is None:
                merged.append(copy.deepcopy(item))
            else:
                merged[index] = _merge(merged[index], item, where, lists)
        return merged
    return copy.deepcopy(applied)


def _sync_last_applied(result: Obj, applied: Obj) -> None:
    annotations = result.get("metadata", {}).get("annotations") or {}
    if not annotations.get(LAST_APPLIED):
        return
    config = copy.deepcopy(applied)
    (config.get("metadata") or {}).get("annotations", {}).pop(LAST_APPLIED, None)
    annotations[LAST_APPLIED] = _json(config) + "\n"


def conflict_error(conflicts: list[tuple[Manager, Path]]) -> errors.ApiError:
    """409 Conflict in upstream's words (apiserver's fieldmanager NewConflictError)."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_who(entry)}",
            "field": shown_path(path),
        }
        for entry, path in conflicts
    ]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {_who(entry)}: {shown_path(path)}"
    else:
        lines = []
        for who in sorted({_who(entry) for entry, _ in conflicts}):
            lines.append(f"conflicts with {who}:")
            lines += [f"- {shown_path(p)}" for e, p in conflicts if _who(e) == who]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.ApiError(409, "Conflict", message, details={"causes": causes})


def _who(entry: Manager) -> str:
    who = f'"{entry.manager}"'
    if entry.subresource:
        who += f' with subresource "{entry.subresource}"'
    if entry.operation == "Update":
        who += f" using {entry.api_version}"
    return who
