"""Standalone transport: one controller, its own informers and writer, no bus
(docs/architecture.md#design-standalone).

For debugging, small clusters, or running one controller alone. The controller code is
the same; only where the replica is fed from and where results go differ. It goes
through `kubeapi` (the API layer the manager also uses), never through `manager/`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.informer import NODES, SERVICES, Informer, Resource
from pyccm.kubeapi.writer import Writer
from pyccm.protocol.messages import Ack, Action, ResultId, SessionId, Topic
from pyccm.protocol.projections import VIEWS, View, project
from pyccm.protocol.views import Node, Service
from pyccm.workers.runtime.replica import Obj, Replica


class _TopicSink:
    """Lets an informer feed one topic of a replica, through the controller's projection
    (the same one the manager applies), so both transports give it the same replica."""

    def __init__(self, replica: Replica, topic: Topic, view: View) -> None:
        self._replica = replica
        self._topic = topic
        self._view = view

    def replace(self, objs: list[Obj]) -> None:
        projected = (project(self._view, self._topic, obj) for obj in objs)
        self._replica.replace(self._topic, [obj for obj in projected if obj is not None])

    def upsert(self, obj: Obj) -> None:
        self._replica.apply(self._topic, obj.key, project(self._view, self._topic, obj))

    def delete(self, key: str) -> None:
        self._replica.apply(self._topic, key, None)


class StandaloneTransport:
    def __init__(
        self,
        *,
        kube: KubeSettings,
        view: str,
        topics: tuple[Topic, ...],
        replica: Replica,
        views: Mapping[str, View] = VIEWS,
    ) -> None:
        self._client = KubeClient(settings=kube)
        self._writer = Writer(client=self._client)
        self._replica = replica
        self.paused = threading.Event()
        # Nothing ends a standalone worker but a signal: its informers retry on their own.
        self.fatal: Exception | None = None
        resources: dict[Topic, Resource[Node] | Resource[Service]] = {
            Topic.NODE: NODES,
            Topic.SERVICE: SERVICES,
        }
        self._informers = [
            Informer(
                client=self._client,
                resource=resources[topic],
                sink=_TopicSink(replica, topic, views[view]),
            )
            for topic in topics
        ]

    def start(self) -> None:
        for informer in self._informers:
            informer.start()
        threading.Thread(target=self._mark_synced, name="standalone-sync", daemon=True).start()

    def stop(self) -> None:
        for informer in self._informers:
            informer.stop()

    def submit(self, key: str, actions: tuple[Action, ...]) -> Future[Ack]:
        future: Future[Ack] = Future()
        failures = self._writer.apply(actions)
        future.set_result(Ack(session=SessionId("standalone"), id=ResultId(0), failures=failures))
        return future

    def _mark_synced(self) -> None:
        for informer in self._informers:
            informer.synced.wait()
        self._replica.synced.set()
