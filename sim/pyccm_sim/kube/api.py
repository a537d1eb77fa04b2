"""The Kubernetes API's verbs over the store, independent of HTTP.

`KubeApi` is what both the HTTP handlers and the in-process testing helpers call, so a
seeded node and a node created by a client go through the same rules. Each verb follows
kube-apiserver's semantics as a client observes them:

- create: metadata and defaults (objects.py), 409 AlreadyExists, 404 for a namespace that
  does not exist, 403 for one that is terminating;
- update (PUT): optimistic concurrency on `metadata.resourceVersion` (409 Conflict when
  stale, unconditional when empty), status-subresource rules;
- patch: JSON, merge and strategic merge patches, applied to the latest object and then
  treated as an update (a patch that carries a stale resourceVersion conflicts too); an
  apply patch is server-side apply (fieldmanager.py), which creates the object if need be;
- every write decodes its object against the kind's shape first (schema.py): a value of
  the wrong type is 400, an unknown field is dropped and, as `fieldValidation` asks,
  refused (Strict), reported as a warning (Warn) or ignored; a write that names a
  `fieldManager` is recorded in managedFields; `dryRun` computes the result and keeps
  nothing;
- delete: preconditions on uid and resourceVersion; an object with finalizers only gets
  `deletionTimestamp` and goes when an update removes its last finalizer;
- list: consistent pages over a snapshot, `resourceVersion` "" / "0" / N with
  `resourceVersionMatch` (410 for an exact read of a compacted version, never a list
  stamped older than the current version otherwise), selectors; watch: history replay,
  410 for a compacted version.
"""

from __future__ import annotations

import base64
import binascii
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import yaml

from pyccm_sim.kube import errors, fieldmanager
from pyccm_sim.kube.objects import Allocator, now_rfc3339, prepare_create, prepare_update, validate
from pyccm_sim.kube.patch import (
    MalformedPatch,
    PatchError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from pyccm_sim.kube.resources import ALL_RESOURCES, NAMESPACES, ResourceType
from pyccm_sim.kube.schema import DecodeError, conform
from pyccm_sim.kube.selectors import Predicate, both, parse_field_selector, parse_label_selector
from pyccm_sim.kube.store import (
    Entry,
    EventType,
    Expired,
    ObjectRef,
    Snapshot,
    Store,
    Watcher,
    WatchFilter,
    event_line,
)

Obj = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

_decode = msgspec.json.Decoder().decode


FIELD_VALIDATIONS = ("Ignore", "Strict", "Warn")


@dataclass(frozen=True)
class WriteOptions:
    """A write's query parameters, and the warnings it reports back (the API server's
    `Warning` headers) in `warnings`."""

    dry_run: bool = False
    field_manager: str = ""
    # In-process writes (seeding, test helpers) have nobody to warn; the HTTP layer
    # defaults to Warn, as kube-apiserver does when a client sends no fieldValidation.
    field_validation: str = "Ignore"
    force: bool = False
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ListOptions:
    label_selector: str = ""
    field_selector: str = ""
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""


@dataclass(frozen=True)
class ListPage:
    rtype: ResourceType
    rv: int
    entries: list[Entry]
    continue_token: str = ""
    remaining: int | None = None

    def encode(self) -> bytes:
        meta: Obj = {"resourceVersion": str(self.rv)}
        if self.continue_token:
            meta["continue"] = self.continue_token
        if self.remaining is not None:
            meta["remainingItemCount"] = self.remaining
        head = msgspec.json.encode(
            {"kind": self.rtype.list_kind, "apiVersion": self.rtype.api_version, "metadata": meta}
        )
        # Splice the cached item bytes in instead of re-encoding thousands of objects.
        return head[:-1] + b',"items":[' + b",".join(e.raw for e in self.entries) + b"]}"


@dataclass(frozen=True)
class WatchStart:
    """A watch to open: replayed or synthetic lines first, then live changes."""

    selection: WatchFilter
    resource_version: str
    send_initial_events: bool = False
    allow_bookmarks: bool = False


class KubeApi:
    def __init__(
        self,
        *,
        store: Store,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        namespace_controller: Callable[[Callable[[], object]], None] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        # Runs the namespace controller's work (emptying a terminating namespace) a moment
        # after the DELETE, as in a cluster; None runs it at once.
        self.namespace_controller = namespace_controller
        self.allocator = Allocator(rng or random.Random(0))
        for name in DEFAULT_NAMESPACES:
            self.create(NAMESPACES, "", {"metadata": {"name": name}})

    # -- reads --------------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str, name: str) -> Entry:
        entry = self.store.get(rtype, _ref(rtype, namespace, name))
        if entry is None:
            raise errors.not_found(rtype.plural, name, rtype.group)
        return entry

    def list(self, rtype: ResourceType, namespace: str | None, options: ListOptions) -> ListPage:
        predicate = self._predicate(rtype, namespace, options)
        snapshot, start = self._list_start(rtype, options)
        # resourceVersion=0 is served from the watch cache, which ignores limit.
        limit = (
            0 if options.resource_version == "0" and not options.continue_token else options.limit
        )
        entries, last = _collect(snapshot, start, predicate, limit)
        if last is None or last + 1 >= len(snapshot.entries):
            return ListPage(rtype, snapshot.rv, entries)
        self.store.remember(rtype, snapshot)
        remaining = None if predicate else len(snapshot.entries) - last - 1
        token = _encode_continue(snapshot.rv, snapshot.entries[last].ref)
        return ListPage(rtype, snapshot.rv, entries, token, remaining)

    def _predicate(
        self, rtype: ResourceType, namespace: str | None, options: ListOptions
    ) -> Predicate | None:
        labels = parse_label_selector(options.label_selector)
        fields = parse_field_selector(options.field_selector, rtype.field_selectors)
        scope = None
        if namespace is not None and rtype.namespaced:

            def scope(obj: Obj) -> bool:
                return bool(obj["metadata"].get("namespace") == namespace)

        return both(scope, both(labels, fields))

    def _list_start(self, rtype: ResourceType, options: ListOptions) -> tuple[Snapshot, int]:
        if options.continue_token:
            if options.resource_version not in ("", "0"):
                raise errors.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            rv, after = _decode_continue(options.continue_token)
            snapshot = self._snapshot(rtype, rv, continuing=True)
            return snapshot, snapshot.start_after(after)
        requested = _parse_rv(options.resource_version)
        if requested and requested > self.store.rv:
            raise errors.too_large_resource_version(requested, self.store.rv)
        # N is "not older than N" (the current state always is, so it is served with the
        # current resourceVersion), except with Exact, or with a limit and no match (the
        # legacy case upstream keeps): those read etcd at N, which may be compacted.
        legacy_exact = options.limit > 0 and not options.resource_version_match
        exact = requested and (options.resource_version_match == "Exact" or legacy_exact)
        return self._snapshot(rtype, requested if exact else None, continuing=False), 0

    def _snapshot(self, rtype: ResourceType, rv: int | None, *, continuing: bool) -> Snapshot:
        try:
            return self.store.snapshot(rtype, rv)
        except Expired as error:
            if continuing:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                ) from error
            # etcd3/errors.go's words: the watch cache's "too old resource version: N (M)"
            # is for watches; an exact list is read from etcd.
            raise errors.expired("The resourceVersion for the provided list is too old.") from error

    # -- writes -------------------------------------------------------------------------

    def create(
        self,
        rtype: ResourceType,
        namespace: str,
        body: Obj,
        *,
        options: WriteOptions | None = None,
    ) -> Entry:
        options = options or WriteOptions()
        obj = _own(body)
        self._decode(rtype, obj, options, _body_error(rtype))
        # managedFields are the server's to record on create.
        obj.get("metadata", {}).pop("managedFields", None)
        return self._create(rtype, namespace, obj, options, track=True)

    def _create(
        self, rtype: ResourceType, namespace: str, obj: Obj, options: WriteOptions, *, track: bool
    ) -> Entry:
        meta = obj.get("metadata") or {}
        if rtype.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            self._check_namespace_open(namespace)
        prepare_create(
            rtype, obj, namespace=namespace, clock=self.clock(), allocator=self.allocator
        )
        validate(rtype, obj, None)
        name = obj["metadata"]["name"]
        if self.store.get(rtype, _ref(rtype, namespace, name)) is not None:
            raise errors.already_exists(rtype.plural, name, rtype.group)
        if track and options.field_manager:
            fieldmanager.record_update(
                None, obj, stamp=self._stamp(rtype, options), scope=_scope(rtype, "")
            )
        return self._commit(rtype, obj, dry_run=options.dry_run)

    def _check_namespace_open(self, namespace: str) -> None:
        entry = self.store.get(NAMESPACES, ("", namespace))
        if entry is None:
            raise errors.not_found("namespaces", namespace)
        if entry.obj["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                "namespaces",
                namespace,
                "",
                f"unable to create new content in namespace {namespace} "
                "because it is being terminated",
            )

    def update(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        body: Obj,
        *,
        subresource: str = "",
        options: WriteOptions | None = None,
    ) -> Entry:
        options = options or WriteOptions()
        obj = _own(body)
        self._decode(rtype, obj, options, _body_error(rtype))
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata is required on update")
        _check_name(meta, name)
        current = self.get(rtype, namespace, name)
        return self._update_from(rtype, current, obj, subresource=subresource, options=options)

    def _update_from(
        self,
        rtype: ResourceType,
        current: Entry,
        obj: Obj,
        *,
        subresource: str,
        options: WriteOptions,
        track: bool = True,
    ) -> Entry:
        name = current.ref[1]
        sent_rv = obj["metadata"].get("resourceVersion")
        if sent_rv and sent_rv != current.obj["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.plural, name, rtype.group, errors.STALE_OBJECT)
        sent_uid = obj["metadata"].get("uid")
        if sent_uid and sent_uid != current.obj["metadata"]["uid"]:
            raise errors.conflict(
                rtype.plural,
                name,
                rtype.group,
                f"Precondition failed: UID in precondition: {sent_uid}, "
                f"UID in object meta: {current.obj['metadata']['uid']}",
            )
        prepare_update(rtype, obj, current.obj, subresource=subresource, allocator=self.allocator)
        validate(rtype, obj, current.obj)
        if track and options.field_manager:
            fieldmanager.record_update(
                current.obj,
                obj,
                stamp=self._stamp(rtype, options),
                scope=_scope(rtype, subresource),
            )
        if _same_object(obj, current.obj):
            # A no-op write does not bump resourceVersion or wake watchers, as upstream.
            return current
        entry = self._commit(rtype, obj, dry_run=options.dry_run)
        if not options.dry_run and _finalized(entry.obj):
            self._remove(rtype, entry.ref)
        return entry

    def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        patch_type: str,
        body: bytes,
        *,
        subresource: str = "",
        options: WriteOptions | None = None,
    ) -> Entry:
        options = options or WriteOptions()
        if patch_type == APPLY_PATCH:
            return self.apply(
                rtype, namespace, name, body, subresource=subresource, options=options
            )
        if options.force:
            raise _patch_options_invalid(
                "force",
                "FieldValueForbidden",
                "Forbidden: may not be specified for non-apply patch",
            )
        try:
            patch = _decode(body)
        except msgspec.DecodeError as error:
            raise errors.bad_request(f"error decoding patch: {error}") from error
        current = self.get(rtype, namespace, name)
        try:
            patched = _apply_patch(rtype, current.thaw(), patch_type, patch)
        except MalformedPatch as error:
            raise errors.bad_request(str(error)) from error
        except PatchError as error:
            raise errors.invalid(
                rtype.kind, name, rtype.group, [("patch", "FieldValueInvalid", str(error))]
            ) from error
        self._decode(rtype, patched, options, "")
        meta = patched.get("metadata")
        if not isinstance(meta, dict):
            raise errors.bad_request("the patch removed metadata")
        if meta.get("name") != name:
            raise errors.bad_request("the patch may not change the object's name")
        return self._update_from(rtype, current, patched, subresource=subresource, options=options)

    def apply(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        body: bytes,
        *,
        subresource: str = "",
        options: WriteOptions | None = None,
    ) -> Entry:
        """Server-side apply: create the object, or merge the configuration into it."""
        options = options or WriteOptions()
        if not options.field_manager:
            raise _patch_options_invalid(
                "fieldManager", "FieldValueRequired", "Required value: is required for apply patch"
            )
        applied = _decode_applied(body)
        if (applied.get("apiVersion"), applied.get("kind")) != (rtype.api_version, rtype.kind):
            raise errors.bad_request(
                f"the apply configuration is a {applied.get('apiVersion')}, "
                f"Kind={applied.get('kind')}, not a {rtype.api_version}, Kind={rtype.kind}"
            )
        typed = f"{namespace}/{name}; {rtype.api_version}, Kind={rtype.kind}"
        self._decode(
            rtype, applied, options, f"failed to create typed patch object ({typed}): ", True
        )
        _check_name(applied.setdefault("metadata", {}), name)
        stamp, scope = self._stamp(rtype, options), _scope(rtype, subresource)
        current = self.store.get(rtype, _ref(rtype, namespace, name))
        if current is None:
            if subresource:
                raise errors.not_found(rtype.plural, name, rtype.group)
            obj = fieldmanager.apply({}, applied, stamp=stamp, scope=scope, force=options.force)
            return self._create(rtype, namespace, obj, options, track=False)
        obj = fieldmanager.apply(
            current.thaw(), applied, stamp=stamp, scope=scope, force=options.force
        )
        return self._update_from(
            rtype, current, obj, subresource=subresource, options=options, track=False
        )

    def _decode(
        self,
        rtype: ResourceType,
        obj: Obj,
        options: WriteOptions,
        context: str,
        applying: bool = False,
    ) -> None:
        """Decode `obj` as its Go type would be (schema.conform); `context` opens the
        message of a refusal, as the API server's does."""
        try:
            unknown = conform(rtype.schema, obj)
        except DecodeError as error:
            raise errors.bad_request(context + str(error)) from error
        if not unknown:
            return
        if options.field_validation == "Strict":
            if applying:
                detail = ", ".join(f".{path}: field not declared in schema" for path in unknown)
            else:
                detail = "strict decoding error: " + ", ".join(
                    f'unknown field "{path}"' for path in unknown
                )
            raise errors.bad_request(context + detail)
        if options.field_validation == "Warn":
            options.warnings.extend(f'unknown field "{path}"' for path in unknown)

    def _stamp(self, rtype: ResourceType, options: WriteOptions) -> fieldmanager.Stamp:
        return fieldmanager.Stamp(
            options.field_manager, rtype.api_version, now_rfc3339(self.clock())
        )

    def delete(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        options: Obj | None = None,
        *,
        dry_run: bool = False,
    ) -> tuple[Entry, bool]:
        """Delete or start deleting; returns the object and whether it is gone now."""
        current = self.get(rtype, namespace, name)
        _check_preconditions(rtype, current, options or {})
        finalizers = current.obj["metadata"].get("finalizers") or []
        if rtype is NAMESPACES:
            return self._delete_namespace(current, dry_run=dry_run)
        if finalizers:
            if current.obj["metadata"].get("deletionTimestamp"):
                return current, False
            obj = current.thaw()
            obj["metadata"]["deletionTimestamp"] = now_rfc3339(self.clock())
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._commit(rtype, obj, dry_run=dry_run), False
        if dry_run:
            return current, True
        removed = self._remove(rtype, current.ref)
        return removed, True

    def _delete_namespace(self, current: Entry, *, dry_run: bool) -> tuple[Entry, bool]:
        if dry_run:
            return current, False
        entry = current
        if not current.obj["metadata"].get("deletionTimestamp"):
            obj = current.thaw()
            obj["metadata"]["deletionTimestamp"] = now_rfc3339(self.clock())
            obj["status"] = {"phase": "Terminating"}
            entry = self.store.put(NAMESPACES, obj)
        namespace = current.ref[1]
        if self.namespace_controller is None:
            return entry, self._empty_namespace(namespace)
        self.namespace_controller(lambda: self._empty_namespace(namespace))
        return entry, False

    def _empty_namespace(self, namespace: str) -> bool:
        """The namespace controller: delete what a terminating namespace holds; the
        namespace goes once the last object has (finalizers may hold some)."""
        ns = self.store.get(NAMESPACES, ("", namespace))
        if ns is None or not ns.obj["metadata"].get("deletionTimestamp"):
            return False
        for rtype in ALL_RESOURCES:
            if rtype.namespaced:
                for ref in [r for r in self.store.objects[rtype] if r[0] == namespace]:
                    self.delete(rtype, namespace, ref[1])
        return self._namespace_emptied(namespace)

    def _namespace_emptied(self, namespace: str) -> bool:
        """A terminating namespace goes once its last object has gone."""
        ns = self.store.get(NAMESPACES, ("", namespace))
        if ns is None or not ns.obj["metadata"].get("deletionTimestamp"):
            return False
        for rtype in ALL_RESOURCES:
            if rtype.namespaced and any(r[0] == namespace for r in self.store.objects[rtype]):
                return False
        self.store.remove(NAMESPACES, ("", namespace))
        return True

    def _commit(self, rtype: ResourceType, obj: Obj, *, dry_run: bool) -> Entry:
        if dry_run:
            return Entry(obj, msgspec.json.encode(obj), self.store.rv)
        return self.store.put(rtype, obj)

    def _remove(self, rtype: ResourceType, ref: ObjectRef) -> Entry:
        removed = self.store.remove(rtype, ref)
        assert removed is not None
        if rtype.namespaced:
            self._namespace_emptied(ref[0])
        return removed

    # -- watch --------------------------------------------------------------------------

    def watch(self, start: WatchStart) -> Watcher:
        """Open a watcher primed with what the client must see first. Synchronous: the
        backlog and the registration happen with no change in between."""
        selection = start.selection
        backlog = list(self._watch_backlog(start))
        return self.store.open_watch(selection, backlog)

    def _watch_backlog(self, start: WatchStart) -> Iterator[bytes]:
        selection = start.selection
        requested = _parse_rv(start.resource_version)
        if requested and not start.send_initial_events:
            if requested > self.store.rv:
                error = errors.too_large_resource_version(requested, self.store.rv)
                yield event_line(EventType.ERROR, msgspec.json.encode(error.status()))
                return
            try:
                changes = list(self.store.changes_since(requested))
            except Expired as expired:
                yield expired_line(str(expired))
                return
            for change in changes:
                kind = selection.wants_kind(change)
                if kind is not None:
                    yield change.line(kind)
            return
        yield from self._synthetic_added(selection)
        if start.send_initial_events and start.allow_bookmarks:
            yield bookmark_line(selection.rtype, self.store.rv, initial_events_end=True)

    def _synthetic_added(self, selection: WatchFilter) -> Iterator[bytes]:
        for entry in self.store.snapshot(selection.rtype).entries:
            if selection.namespace is not None and entry.ref[0] != selection.namespace:
                continue
            if selection.predicate is None or selection.predicate(entry.obj):
                yield event_line(EventType.ADDED, entry.raw)

    def watch_filter(
        self, rtype: ResourceType, namespace: str | None, options: ListOptions
    ) -> WatchFilter:
        labels = parse_label_selector(options.label_selector)
        fields = parse_field_selector(options.field_selector, rtype.field_selectors)
        return WatchFilter(rtype, namespace if rtype.namespaced else None, both(labels, fields))


def expired_line(message: str) -> bytes:
    return event_line(EventType.ERROR, msgspec.json.encode(errors.expired(message).status()))


def bookmark_line(rtype: ResourceType, rv: int, *, initial_events_end: bool = False) -> bytes:
    meta: Obj = {"resourceVersion": str(rv), "creationTimestamp": None}
    if initial_events_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
    return event_line(EventType.BOOKMARK, msgspec.json.encode(obj))


def _body_error(rtype: ResourceType) -> str:
    return f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '


def _check_name(meta: Obj, name: str) -> None:
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    meta["name"] = name


def _patch_options_invalid(field_name: str, reason: str, message: str) -> errors.ApiError:
    return errors.invalid("PatchOptions", "", "meta.k8s.io", [(field_name, reason, message)])


def _decode_applied(body: bytes) -> Obj:
    """An apply patch is YAML (kubectl sends JSON, which is YAML too)."""
    try:
        applied = _decode(body)
    except msgspec.DecodeError:
        try:
            loaded = yaml.safe_load(body)
            # Through JSON, as the API server reads YAML: timestamps stay strings.
            applied = _decode(msgspec.json.encode(loaded))
        except (yaml.YAMLError, UnicodeDecodeError, TypeError, msgspec.EncodeError) as error:
            raise errors.bad_request(f"error decoding YAML: {error}") from error
    if not isinstance(applied, dict):
        raise errors.bad_request("error decoding YAML: the apply configuration is not an object")
    return applied


def _scope(rtype: ResourceType, subresource: str) -> fieldmanager.Scope:
    return fieldmanager.Scope(rtype.merge_lists, rtype.status_subresource, subresource)


def _ref(rtype: ResourceType, namespace: str, name: str) -> ObjectRef:
    return (namespace if rtype.namespaced else "", name)


def _own(body: Obj) -> Obj:
    """A private deep copy of a client's body, so later writes never alias it."""
    copied: Obj = _decode(msgspec.json.encode(body))
    return copied


def _parse_rv(text: str) -> int:
    if not text:
        return 0
    if not text.isdigit():
        raise errors.bad_request(f'invalid resource version "{text}"')
    return int(text)


def _collect(
    snapshot: Snapshot, start: int, predicate: Predicate | None, limit: int
) -> tuple[list[Entry], int | None]:
    """Up to `limit` matching entries from `start`, and the index of the last one taken."""
    if predicate is None:
        end = len(snapshot.entries) if limit <= 0 else min(start + limit, len(snapshot.entries))
        return snapshot.entries[start:end], (end - 1 if end > start else None)
    taken: list[Entry] = []
    last = None
    for index in range(start, len(snapshot.entries)):
        if limit > 0 and len(taken) >= limit:
            break
        entry = snapshot.entries[index]
        last = index
        if predicate(entry.obj):
            taken.append(entry)
    return taken, last


def _encode_continue(rv: int, after: ObjectRef) -> str:
    token = msgspec.json.encode(
        {"v": "meta.k8s.io/v1", "rv": rv, "start": f"{after[0]}/{after[1]}\x00"}
    )
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, ObjectRef]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = _decode(raw)
        start = body["start"].rstrip("\x00")
        namespace, _, name = start.rpartition("/")
        rv = int(body["rv"])
    except (
        binascii.Error,
        msgspec.DecodeError,
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
    ) as error:
        raise errors.bad_request(f"continue key is not valid: {error}") from error
    return rv, (namespace, name)


def _apply_patch(rtype: ResourceType, current: Obj, patch_type: str, patch: Any) -> Obj:
    if patch_type == JSON_PATCH:
        return json_patch(current, patch)
    if patch_type == MERGE_PATCH:
        return merge_patch(current, patch)
    return strategic_merge_patch(current, patch, rtype.merge_lists)


def _check_preconditions(rtype: ResourceType, current: Entry, options: Obj) -> None:
    preconditions = options.get("preconditions") or {}
    if not isinstance(preconditions, dict):
        raise errors.bad_request("preconditions must be an object")
    meta = current.obj["metadata"]
    for field_name, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        wanted = preconditions.get(field_name)
        if wanted and wanted != meta.get(field_name):
            raise errors.conflict(
                rtype.plural,
                current.ref[1],
                rtype.group,
                f"Precondition failed: {label} in precondition: {wanted}, "
                f"{label} in object meta: {meta.get(field_name)}",
            )


def _same_object(new: Obj, old: Obj) -> bool:
    old_rv = old["metadata"].get("resourceVersion")
    new_meta = dict(new["metadata"])
    new_meta["resourceVersion"] = old_rv
    return {**new, "metadata": new_meta} == old


def _finalized(obj: Obj) -> bool:
    meta = obj["metadata"]
    return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")
