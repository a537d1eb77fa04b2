"""The manager's cache: the full objects per topic, and one channel per view and topic.

Informers write the full views here (the writer reads them for resourceVersions). Each
change is then offered to every channel of its topic: a channel holds one controller's
projection of the topic (`protocol.projections`) and its own sequence, and publishes a
`Delta` only when the projection changed. A kubelet heartbeat changes a Node's
resourceVersion but none of its projections, so it costs one decode and a few
comparisons here and wakes no worker.

A channel's sequence and contents change together under the topic's lock, so a snapshot
taken at sequence S holds exactly the changes up to S: a worker that applies the snapshot
and then every delta after S ends with the manager's projection (the Clone pattern's
invariant). A write that changes nothing (same resourceVersion) is not a change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from pyccm.protocol.messages import Delta, Seq, SessionId, Topic
from pyccm.protocol.projections import VIEWS, SharedStrings, View, channel, lean_node, project
from pyccm.protocol.views import Node, Service

Obj = TypeVar("Obj", Node, Service)

Publish = Callable[[str, Delta], None]
"""Sends one delta on one channel (the bus's PUB socket)."""


class Channel:
    """One view's projection of one topic: the projected objects and their sequence."""

    def __init__(
        self, *, view_name: str, view: View, topic: Topic, session: SessionId, publish: Publish
    ) -> None:
        self.name = channel(view_name, topic)
        self.view = view
        self.topic = topic
        self._session = session
        self._publish = publish
        self._lock = threading.Lock()
        self._objects: dict[str, Node | Service] = {}
        self._seq = Seq(0)

    def offer(self, key: str, obj: Node | Service | None) -> None:
        """Called under the topic's lock, in change order: publish what the view sees
        change (an object that leaves the view is published as deleted)."""
        projected = None if obj is None else project(self.view, self.topic, obj)
        with self._lock:
            old = self._objects.get(key)
            if projected == old:
                return
            if projected is None:
                del self._objects[key]
            else:
                self._objects[key] = projected
            self._seq = Seq(self._seq + 1)
            delta = Delta(
                session=self._session,
                topic=self.topic,
                seq=self._seq,
                key=key,
                node=projected if isinstance(projected, Node) else None,
                service=projected if isinstance(projected, Service) else None,
            )
            # Under the lock: the publish order is the sequence order.
            self._publish(self.name, delta)

    def snapshot(self) -> tuple[Seq, list[Node | Service]]:
        with self._lock:
            return self._seq, list(self._objects.values())

    @property
    def seq(self) -> Seq:
        with self._lock:
            return self._seq

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)


class TopicCache(Generic[Obj]):
    """The full objects of one topic keyed by ObjectKey, feeding that topic's channels."""

    def __init__(
        self, *, topic: Topic, channels: list[Channel], keep: Callable[[Obj], Obj] | None = None
    ) -> None:
        self.topic = topic
        # What the cache keeps of an object (all of it by default).
        self._keep: Callable[[Obj], Obj] | None = keep
        self._channels = channels
        self._lock = threading.Lock()
        self._objects: dict[str, Obj] = {}
        self.synced = threading.Event()

    def upsert(self, obj: Obj) -> bool:
        """Store `obj` and offer it to the channels if it is new or changed. Returns
        whether it changed."""
        key = obj.key
        if self._keep is not None:
            obj = self._keep(obj)
        with self._lock:
            old = self._objects.get(key)
            if old is not None and old.metadata.resource_version == obj.metadata.resource_version:
                return False
            self._objects[key] = obj
            self._offer(key, obj)
        return True

    def delete(self, key: str) -> bool:
        with self._lock:
            if self._objects.pop(key, None) is None:
                return False
            self._offer(key, None)
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

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def _offer(self, key: str, obj: Obj | None) -> None:
        for chan in self._channels:
            chan.offer(key, obj)


class Cache:
    """The two topics the manager watches, and a channel for every view of each."""

    def __init__(
        self, *, session: SessionId, publish: Publish, views: Mapping[str, View] = VIEWS
    ) -> None:
        self.channels: dict[str, Channel] = {}
        for view_name, view in views.items():
            for topic in view.topics:
                chan = Channel(
                    view_name=view_name, view=view, topic=topic, session=session, publish=publish
                )
                self.channels[chan.name] = chan
        share = SharedStrings()
        self.nodes: TopicCache[Node] = TopicCache(
            topic=Topic.NODE,
            channels=self._of(Topic.NODE),
            keep=lambda node: lean_node(node, share=share),
        )
        self.services: TopicCache[Service] = TopicCache(
            topic=Topic.SERVICE, channels=self._of(Topic.SERVICE)
        )

    def channel(self, view: str, topic: Topic) -> Channel | None:
        return self.channels.get(channel(view, topic))

    def synced(self) -> bool:
        return self.nodes.synced.is_set() and self.services.synced.is_set()

    def _of(self, topic: Topic) -> list[Channel]:
        return [chan for chan in self.channels.values() if chan.topic is topic]
