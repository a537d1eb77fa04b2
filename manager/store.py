"""The manager's cache: one dict per topic, and the sequence that orders its changes.

Informers write here; the bus publishes each change as a `Delta` and answers snapshots
from here. The sequence of a topic and its contents change together under one lock, so a
snapshot taken at sequence S holds exactly the changes up to S: a worker that applies the
snapshot and then every delta after S ends with the manager's state (the Clone pattern's
invariant). A write that changes nothing (same resourceVersion) is not a change and gets
no sequence number.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from protocol.messages import Delta, Seq, SessionId, Topic
from protocol.views import Node, Service

Obj = TypeVar("Obj", Node, Service)

Publish = Callable[[Delta], None]


class TopicCache(Generic[Obj]):
    """The objects of one topic keyed by ObjectKey, and the topic's sequence number."""

    def __init__(self, *, topic: Topic, session: SessionId, publish: Publish) -> None:
        self.topic = topic
        self._session = session
        self._publish = publish
        self._lock = threading.Lock()
        self._objects: dict[str, Obj] = {}
        self._seq = Seq(0)
        self.synced = threading.Event()

    def upsert(self, obj: Obj) -> bool:
        """Store `obj`; publish it if it is new or changed. Returns whether it changed."""
        key = obj.key
        with self._lock:
            old = self._objects.get(key)
            if old is not None and old.metadata.resource_version == obj.metadata.resource_version:
                return False
            self._objects[key] = obj
            self._emit(key, obj)
        return True

    def delete(self, key: str) -> bool:
        with self._lock:
            if self._objects.pop(key, None) is None:
                return False
            self._emit(key, None)
        return True

    def replace(self, objs: list[Obj]) -> None:
        """After a (re)list: publish what changed and the deletes missed, then mark synced."""
        listed = {obj.key for obj in objs}
        for obj in objs:
            self.upsert(obj)
        for key in self.keys() - listed:
            self.delete(key)
        self.synced.set()

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._objects.get(key)

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._objects)

    def snapshot(self) -> tuple[Seq, list[Obj]]:
        with self._lock:
            return self._seq, list(self._objects.values())

    @property
    def seq(self) -> Seq:
        with self._lock:
            return self._seq

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def _emit(self, key: str, obj: Obj | None) -> None:
        # Called with the lock held: the publish order is the sequence order.
        self._seq = Seq(self._seq + 1)
        self._publish(
            Delta(
                session=self._session,
                topic=self.topic,
                seq=self._seq,
                key=key,
                node=obj if isinstance(obj, Node) else None,
                service=obj if isinstance(obj, Service) else None,
            )
        )


class Cache:
    """The two topics the manager watches."""

    def __init__(self, *, session: SessionId, publish: Publish) -> None:
        self.nodes: TopicCache[Node] = TopicCache(
            topic=Topic.NODE, session=session, publish=publish
        )
        self.services: TopicCache[Service] = TopicCache(
            topic=Topic.SERVICE, session=session, publish=publish
        )

    def topic(self, topic: Topic) -> TopicCache[Node] | TopicCache[Service]:
        return self.nodes if topic is Topic.NODE else self.services

    def synced(self) -> bool:
        return self.nodes.synced.is_set() and self.services.synced.is_set()
