"""The simulator's storage: objects, one resourceVersion counter, history, watchers.

What it promises (what etcd plus the API server's watch cache promise a client):

- one global, monotonically increasing resourceVersion, assigned on every write;
- objects are stored as plain JSON-able dicts that are never mutated after they are
  stored, each with its encoded JSON bytes cached, so a list of 5,000 nodes is a join of
  cached bytes and a watch event is encoded once however many watchers receive it;
- a bounded history ring of changes (the retained window): a watch can resume from any
  resourceVersion inside it, and gets 410 Expired for one older than it; a list of the
  current state carries the current resourceVersion (so a watch from it can always
  resume), and a list as of an older one (an exact resourceVersion, a paginated list's
  later pages) is rebuilt from the history, or 410 Expired once that has been dropped;
- watchers never slow the store down: each change is appended to every interested
  watcher's buffer without waiting, and a watcher whose buffer overflows is closed (the
  real API server terminates a watcher that cannot keep up in the same way), so the
  client relists.

Everything here is synchronous and runs on the server's event loop thread; the API layer
prepares objects (defaults, validation, metadata) and the store only versions, keeps and
publishes them.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NewType

import msgspec

from pyccm_sim.kube.resources import ALL_RESOURCES, ResourceType

Obj = dict[str, Any]
Predicate = Callable[[Obj], bool]
ObjectRef = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects. Sorts like etcd keys."""
ResourceVersion = NewType("ResourceVersion", int)

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class EventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


class Entry:
    """One stored version of one object: its encoded JSON, and while it is the current
    version also the decoded dict (never mutated once stored). A superseded version in
    the history keeps only its bytes and decodes on demand (for a selector or a snapshot
    rebuild): decoded dicts are ~5x the size of their JSON, and the history holds
    tens of thousands of versions."""

    __slots__ = ("_obj", "raw", "ref", "rv")

    def __init__(self, obj: Obj, raw: bytes, rv: ResourceVersion) -> None:
        self._obj: Obj | None = obj
        self.raw = raw
        self.rv = rv
        meta = obj["metadata"]
        self.ref: ObjectRef = (meta.get("namespace", ""), meta["name"])

    @property
    def obj(self) -> Obj:
        if self._obj is not None:
            return self._obj
        decoded: Obj = _decode(self.raw)
        return decoded

    def retire(self) -> None:
        """Drop the decoded dict once this version is no longer the current one."""
        self._obj = None

    def thaw(self) -> Obj:
        """A private deep copy to modify (decoding the cached bytes is the fastest copy)."""
        copy: Obj = _decode(self.raw)
        return copy


def make_entry(obj: Obj, rv: ResourceVersion) -> Entry:
    obj["metadata"]["resourceVersion"] = str(rv)
    return Entry(obj, _encode(obj), rv)


def event_line(kind: EventType, raw_object: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + raw_object + b"}\n"


@dataclass(slots=True, eq=False)
class Change:
    """One write, as the history ring and watchers see it."""

    rtype: ResourceType
    kind: EventType
    entry: Entry
    prev: Entry | None

    @property
    def rv(self) -> ResourceVersion:
        return self.entry.rv

    def line(self, kind: EventType, cache: dict[EventType, bytes] | None = None) -> bytes:
        """The encoded watch event; `cache` shares it between the watchers of one write
        (it is not kept on the change, so the history holds each object's bytes once)."""
        if cache is None:
            return event_line(kind, self.entry.raw)
        cached = cache.get(kind)
        if cached is None:
            cached = cache[kind] = event_line(kind, self.entry.raw)
        return cached


@dataclass(frozen=True)
class WatchFilter:
    rtype: ResourceType
    namespace: str | None = None
    predicate: Predicate | None = None

    def wants_kind(self, change: Change) -> EventType | None:
        """The event this watcher sees for a change: objects that enter or leave its
        selector are ADDED/DELETED for it, as the watch cache reports them."""
        if change.rtype is not self.rtype:
            return None
        if self.namespace is not None and change.entry.ref[0] != self.namespace:
            return None
        if self.predicate is None:
            return change.kind
        now = self.predicate(change.entry.obj)
        if change.kind != EventType.MODIFIED:
            return change.kind if now else None
        before = change.prev is not None and self.predicate(change.prev.obj)
        if now:
            return EventType.MODIFIED if before else EventType.ADDED
        return EventType.DELETED if before else None


class Watcher:
    """A watch stream's buffer: the store appends encoded lines, the HTTP handler drains."""

    def __init__(self, *, selection: WatchFilter, limit: int) -> None:
        self.selection = selection
        self.limit = limit
        self.lines: collections.deque[bytes] = collections.deque()
        self.wakeup = asyncio.Event()
        self.closed = False
        self.overflowed = False
        # Set by a "reset" cut: the handler drops the TCP connection instead of ending the
        # chunked stream cleanly, as a network failure would.
        self.abort = False

    def push(self, line: bytes) -> None:
        if self.closed:
            return
        if len(self.lines) >= self.limit:
            self.overflowed = True
            self.close()
            return
        self.lines.append(line)
        self.wakeup.set()

    def close(self, *, abort: bool = False) -> None:
        self.closed = True
        self.abort = self.abort or abort
        self.wakeup.set()

    def drain(self) -> list[bytes]:
        lines = list(self.lines)
        self.lines.clear()
        self.wakeup.clear()
        return lines


@dataclass(frozen=True)
class Snapshot:
    """A resource's objects as of `rv`, sorted by (namespace, name) like etcd keys."""

    rv: ResourceVersion
    refs: list[ObjectRef]
    entries: list[Entry]

    def start_after(self, ref: ObjectRef | None) -> int:
        return 0 if ref is None else bisect.bisect_right(self.refs, ref)


class Expired(Exception):
    """A resourceVersion older than the retained history."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")


class Store:
    def __init__(self, *, history_size: int, watch_buffer: int, snapshot_cache: int = 32) -> None:
        self.rv = ResourceVersion(0)
        self.objects: dict[ResourceType, dict[ObjectRef, Entry]] = {r: {} for r in ALL_RESOURCES}
        self.history: collections.deque[Change] = collections.deque()
        self.history_size = history_size
        # Watches from a resourceVersion below this one would miss a dropped change.
        self.compacted_rv = ResourceVersion(0)
        self.watchers: set[Watcher] = set()
        self.watch_buffer = watch_buffer
        self._last_write: dict[ResourceType, ResourceVersion] = {}
        self._sorted: dict[ResourceType, Snapshot] = {}
        self._snapshots: collections.OrderedDict[tuple[ResourceType, int], Snapshot] = (
            collections.OrderedDict()
        )
        self._snapshot_cache = snapshot_cache

    # -- reads --------------------------------------------------------------------------

    def get(self, rtype: ResourceType, ref: ObjectRef) -> Entry | None:
        return self.objects[rtype].get(ref)

    def count(self, rtype: ResourceType) -> int:
        return len(self.objects[rtype])

    def last_write(self, rtype: ResourceType) -> int:
        """The resourceVersion of the resource's latest change (0: never changed)."""
        return self._last_write.get(rtype, 0)

    def snapshot(self, rtype: ResourceType, rv: int | None = None) -> Snapshot:
        """The sorted state now (`rv` None) or as of `rv`; Expired when `rv` is older than
        the retained history, even if this resource has not changed since (etcd answers a
        read at a compacted revision with an error whatever the key)."""
        if rv is not None and rv < self.compacted_rv:
            raise Expired(rv, self.compacted_rv)
        last_write = self._last_write.get(rtype, 0)
        if rv is not None and rv < last_write:
            return self._past_snapshot(rtype, rv)
        current = self._sorted.get(rtype)
        if current is None or current.rv < last_write:
            current = self._sorted[rtype] = self._sort(rtype, self.objects[rtype], self.rv)
        # The sorted copy is reused until this resource changes, but it is stamped with the
        # version asked for (now, by default), never the version it was sorted at: writes to
        # other resources (leases, events) move the global version on, and a list stamped
        # with an old sort's version would leave the retained history, so the watch a client
        # opens from it would get 410 at once, and its relist would get the same stamp again.
        stamp = ResourceVersion(self.rv if rv is None else rv)
        return current if current.rv == stamp else Snapshot(stamp, current.refs, current.entries)

    def _sort(self, rtype: ResourceType, objects: dict[ObjectRef, Entry], rv: int) -> Snapshot:
        refs = sorted(objects)
        return Snapshot(ResourceVersion(rv), refs, [objects[r] for r in refs])

    def _past_snapshot(self, rtype: ResourceType, rv: int) -> Snapshot:
        cached = self._snapshots.get((rtype, rv))
        if cached is not None:
            self._snapshots.move_to_end((rtype, rv))
            return cached
        objects = dict(self.objects[rtype])
        for change in reversed(self.history):
            if change.rv <= rv:
                break
            if change.rtype is rtype:
                _undo(objects, change)
        snapshot = self._sort(rtype, objects, rv)
        self.remember(rtype, snapshot)
        return snapshot

    def remember(self, rtype: ResourceType, snapshot: Snapshot) -> None:
        """Keep a paginated list's snapshot so its next pages are consistent and cheap."""
        self._snapshots[(rtype, snapshot.rv)] = snapshot
        while len(self._snapshots) > self._snapshot_cache:
            self._snapshots.popitem(last=False)

    def changes_since(self, rv: int) -> Iterator[Change]:
        if rv < self.compacted_rv:
            raise Expired(rv, self.compacted_rv)
        # The ring is ordered by rv; skip the prefix a resuming watcher already has.
        start = bisect.bisect_right(self.history, rv, key=lambda c: c.rv)
        for index in range(start, len(self.history)):
            yield self.history[index]

    # -- writes -------------------------------------------------------------------------

    def next_rv(self) -> ResourceVersion:
        self.rv = ResourceVersion(self.rv + 1)
        return self.rv

    def put(self, rtype: ResourceType, obj: Obj) -> Entry:
        """Store a new version (create or update) of a fully prepared object."""
        ref = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        prev = self.objects[rtype].get(ref)
        entry = make_entry(obj, self.next_rv())
        self.objects[rtype][ref] = entry
        kind = EventType.ADDED if prev is None else EventType.MODIFIED
        self._record(Change(rtype, kind, entry, prev))
        return entry

    def remove(self, rtype: ResourceType, ref: ObjectRef) -> Entry | None:
        """Delete an object; its DELETED event carries the deletion's resourceVersion."""
        prev = self.objects[rtype].pop(ref, None)
        if prev is None:
            return None
        entry = make_entry(prev.thaw(), self.next_rv())
        self._record(Change(rtype, EventType.DELETED, entry, prev))
        return entry

    def _record(self, change: Change) -> None:
        self._last_write[change.rtype] = change.rv
        self.history.append(change)
        self._trim_history()
        lines: dict[EventType, bytes] = {}
        for watcher in list(self.watchers):
            kind = watcher.selection.wants_kind(change)
            if kind is not None:
                watcher.push(change.line(kind, lines))
        if change.prev is not None:
            change.prev.retire()
        if change.kind == EventType.DELETED:
            change.entry.retire()

    def _trim_history(self) -> None:
        while len(self.history) > self.history_size:
            dropped = self.history.popleft()
            self.compacted_rv = dropped.rv

    def resize_history(self, size: int) -> None:
        self.history_size = max(1, size)
        self._trim_history()

    # -- watchers -----------------------------------------------------------------------

    def open_watch(self, selection: WatchFilter, backlog: Iterable[bytes]) -> Watcher:
        """Register a watcher primed with its initial lines, with no await in between, so
        no change can fall between the backlog and the live stream."""
        watcher = Watcher(selection=selection, limit=max(self.watch_buffer, 1))
        for line in backlog:
            watcher.lines.append(line)
        if watcher.lines:
            watcher.wakeup.set()
        self.watchers.add(watcher)
        return watcher

    def close_watch(self, watcher: Watcher) -> None:
        watcher.close()
        self.watchers.discard(watcher)

    def cut_watches(self, *, abort: bool = False) -> int:
        watchers = list(self.watchers)
        for watcher in watchers:
            watcher.close(abort=abort)
            self.watchers.discard(watcher)
        return len(watchers)


def _undo(objects: dict[ObjectRef, Entry], change: Change) -> None:
    ref = change.entry.ref
    if change.kind == EventType.ADDED:
        objects.pop(ref, None)
    elif change.prev is not None:
        objects[ref] = change.prev
