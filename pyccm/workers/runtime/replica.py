"""A worker's replica of the manager's cache, fed by the bus or by a local informer.

Controllers read the replica at sync time (level-triggered,
docs/architecture.md#style-keys-not-events) and learn about
changes through one listener per replica: `(topic, key, old, new)`, where `old is None`
is an add and `new is None` a delete; an object stored again unchanged notifies nobody.
Replacing a whole topic (a snapshot after a gap or a restart, or an informer relist)
emits only the difference, so a resnapshot neither floods the queue nor loses a delete.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from pyccm.protocol.messages import Topic
from pyccm.protocol.projections import SharedStrings, lean_node
from pyccm.protocol.views import Node, Service

Obj = Node | Service
Listener = Callable[[Topic, str, Obj | None, Obj | None], None]


class Replica:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[Topic, dict[str, Obj]] = {Topic.NODE: {}, Topic.SERVICE: {}}
        self._listeners: list[Listener] = []
        # One copy of the strings Nodes repeat: 5,000 Nodes' labels are mostly the same.
        self._share = SharedStrings()
        self.synced = threading.Event()

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def apply(self, topic: Topic, key: str, obj: Obj | None) -> None:
        obj = None if obj is None else self._lean(obj)
        with self._lock:
            objects = self._objects[topic]
            old = objects.pop(key, None) if obj is None else objects.get(key)
            if obj is not None:
                objects[key] = obj
        if old != obj:
            self._notify(topic, key, old, obj)

    def replace(self, topic: Topic, objs: Iterable[Obj]) -> None:
        """Make the topic hold exactly `objs`; notify adds, changes and deletes."""
        fresh: dict[str, Obj] = {obj.key: self._lean(obj) for obj in objs}
        with self._lock:
            previous = self._objects[topic]
            self._objects[topic] = fresh
        for key, old in previous.items():
            new = fresh.get(key)
            # Whole-object equality, not resourceVersions: a projection has none, and a
            # change no controller reads is no change.
            if new != old:
                self._notify(topic, key, old, new)
        for key, new in fresh.items():
            if key not in previous:
                self._notify(topic, key, None, new)

    def node(self, name: str) -> Node | None:
        with self._lock:
            obj = self._objects[Topic.NODE].get(name)
        return obj if isinstance(obj, Node) else None

    def service(self, key: str) -> Service | None:
        with self._lock:
            obj = self._objects[Topic.SERVICE].get(key)
        return obj if isinstance(obj, Service) else None

    def nodes(self) -> list[Node]:
        with self._lock:
            return [obj for obj in self._objects[Topic.NODE].values() if isinstance(obj, Node)]

    def services(self) -> list[Service]:
        with self._lock:
            return [
                obj for obj in self._objects[Topic.SERVICE].values() if isinstance(obj, Service)
            ]

    def _lean(self, obj: Obj) -> Obj:
        return lean_node(obj, share=self._share) if isinstance(obj, Node) else obj

    def _notify(self, topic: Topic, key: str, old: Obj | None, new: Obj | None) -> None:
        for listener in self._listeners:
            listener(topic, key, old, new)
