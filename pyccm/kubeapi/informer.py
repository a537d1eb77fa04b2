"""List-then-watch of one resource into a sink, losing no change.

The loop: a paginated list (`limit`/`continue`) replaces the sink's contents, then a watch
from the list's resourceVersion with bookmarks and a randomised server timeout applies
each event. A stream that ends (server timeout, cut connection) is resumed from the last
resourceVersion seen (bookmarks keep it fresh on quiet resources); a 410 Gone means that
version has left the server's window, so the informer lists again and the sink, which
replaces its contents, emits the difference: adds, updates and the deletes that happened
while we were away. Errors back off with jitter from 0.8 s to 30 s (client-go's reflector).

Objects are decoded with msgspec straight into the lean views
(docs/architecture.md#bus-lean-views): never the
client's OpenAPI models.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import msgspec

from pyccm.kubeapi import metrics
from pyccm.kubeapi.client import KubeClient
from pyccm.kubeapi.errors import Gone, KubeError
from pyccm.pacing import Backoff
from pyccm.protocol.decoding import decode_json
from pyccm.protocol.views import Node, Service

log = logging.getLogger(__name__)

Obj = TypeVar("Obj", bound=Node | Service)


class Sink(Protocol[Obj]):
    """Where an informer puts what it sees (the manager's cache, a standalone replica)."""

    def replace(self, objs: list[Obj]) -> None: ...

    def upsert(self, obj: Obj) -> object: ...

    def delete(self, key: str) -> object: ...


@dataclass(frozen=True)
class Resource(Generic[Obj]):
    name: str  # "nodes", "services": metric labels and logs
    path: str  # the list/watch path, e.g. /api/v1/nodes
    view: type[Obj]


NODES = Resource(name="nodes", path="/api/v1/nodes", view=Node)
SERVICES = Resource(name="services", path="/api/v1/services", view=Service)


@dataclass(frozen=True)
class InformerSettings:
    # Pages of 500, as client-go's pager: big enough to be few, small enough for the server.
    page_size: int = 500
    # client-go's reflector picks a server timeout in [5 min, 10 min) so that watches of
    # many clients do not all end at once.
    min_watch_timeout: int = 300
    # Reflector backoff: 800 ms doubling to 30 s, each delay within a third either side of
    # its step (at most 30 s).
    backoff_initial: float = 0.8
    backoff_max: float = 30.0
    backoff_jitter: tuple[float, float] = (2 / 3, 4 / 3)


class _ListMeta(msgspec.Struct, frozen=True):
    resourceVersion: str = ""
    # `continue` is a Python keyword.
    next: str = msgspec.field(default="", name="continue")


class _List(msgspec.Struct, Generic[Obj]):
    metadata: _ListMeta = _ListMeta()
    items: list[Obj] = []


class _Meta(msgspec.Struct, frozen=True):
    resourceVersion: str = ""


class _Bookmark(msgspec.Struct):
    metadata: _Meta = _Meta()


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _Status(msgspec.Struct):
    code: int = 0
    message: str = ""


class Informer(Generic[Obj]):
    def __init__(
        self,
        *,
        client: KubeClient,
        resource: Resource[Obj],
        sink: Sink[Obj],
        settings: InformerSettings = InformerSettings(),
        pause: Callable[[float], object] | None = None,
    ) -> None:
        """`pause(seconds)` waits between attempts (default: until stopped); tests record it."""
        self._client = client
        self._resource: Resource[Obj] = resource
        self._sink: Sink[Obj] = sink
        self._settings = settings
        self._list_decoder: msgspec.json.Decoder[_List[Obj]] = msgspec.json.Decoder(
            _List[resource.view]  # type: ignore[name-defined]
        )
        self._object_decoder: msgspec.json.Decoder[Obj] = msgspec.json.Decoder(resource.view)
        self._stop = threading.Event()
        self._pause: Callable[[float], object] = pause or self._stop.wait
        self.synced = threading.Event()
        # Set while a watch is open; /readyz and pyccm_informer_watch_live report it.
        self.watching = threading.Event()
        self._thread = threading.Thread(
            target=self.run, name=f"informer-{resource.name}", daemon=True
        )

    @property
    def resource_name(self) -> str:
        return self._resource.name

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """List, then watch from the list's version, forever. Every failure, whatever its
        type (a TCP reset mid-stream is urllib3's ProtocolError, a cut line a DecodeError),
        ends in a reconnect with backoff: an exception that escaped this loop would leave
        the manager serving a cache that never changes again. A 410 relists at once the
        first time; 410s in a row back off like any failure (a server that keeps answering
        410 must not be relisted in a tight loop)."""
        backoff = Backoff(
            base=self._settings.backoff_initial,
            cap=self._settings.backoff_max,
            jitter=self._settings.backoff_jitter,
        )
        version: str | None = None
        cause = "start"
        gone_in_a_row = 0
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._relist(cause)
                version = self._watch(version)
                backoff.reset()
                gone_in_a_row = 0
            except Gone:
                self._set_live(False)
                gone_in_a_row += 1
                delay = backoff.next() if gone_in_a_row > 1 else 0.0
                log.info(
                    "%s: resourceVersion %s is gone; listing again in %.1fs",
                    self._resource.name,
                    version,
                    delay,
                )
                self._pause(delay)
                version, cause = None, "gone"
            except Exception as error:
                self._set_live(False)
                delay = backoff.next()
                log.warning(
                    "%s: %s: %s; retrying in %.1fs",
                    self._resource.name,
                    type(error).__name__,
                    error,
                    delay,
                )
                self._pause(delay)
                if not self.synced.is_set():
                    version, cause = None, "error"
        self._set_live(False)

    def _set_live(self, live: bool) -> None:
        if live:
            self.watching.set()
        else:
            self.watching.clear()
        metrics.WATCH_LIVE.labels(resource=self._resource.name).set(1 if live else 0)

    def _relist(self, cause: str) -> str:
        metrics.INFORMER_RELISTS.labels(resource=self._resource.name, cause=cause).inc()
        objects, version = self.list_all()
        self._sink.replace(objects)
        metrics.CACHE_OBJECTS.labels(resource=self._resource.name).set(len(objects))
        self.synced.set()
        return version

    def list_all(self) -> tuple[list[Obj], str]:
        """Every object, page by page; returns them with the list's resourceVersion."""
        objects: list[Obj] = []
        token = ""
        while True:
            query = {"limit": str(self._settings.page_size)}
            if token:
                query["continue"] = token
            page: _List[Obj] = self._list_decoder.decode(
                self._client.request("GET", self._resource.path, query=query)
            )
            objects.extend(page.items)
            token = page.metadata.next
            if not token:
                return objects, page.metadata.resourceVersion

    def _watch(self, version: str) -> str:
        timeout = random.randint(
            self._settings.min_watch_timeout, 2 * self._settings.min_watch_timeout - 1
        )
        query = {
            "watch": "true",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout),
        }
        response = self._client.open("GET", self._resource.path, query=query, timeout=timeout + 30)
        self._set_live(True)
        try:
            for line in _lines(response.stream(65536)):
                if self._stop.is_set():
                    break
                version = self._handle(line, version)
        finally:
            response.release_conn()
        return version

    def _handle(self, line: bytes, version: str) -> str:
        event = decode_json(line, _Event)
        metrics.INFORMER_EVENTS.labels(resource=self._resource.name, type=event.type).inc()
        if event.type == "ERROR":
            status = decode_json(event.object, _Status)
            if status.code == 410:
                raise Gone(status.message, code=410)
            raise KubeError(f"watch error {status.code}: {status.message}", code=status.code)
        if event.type == "BOOKMARK":
            return decode_json(event.object, _Bookmark).metadata.resourceVersion or version
        obj = self._object_decoder.decode(event.object)
        if event.type == "DELETED":
            self._sink.delete(obj.key)
        else:
            self._sink.upsert(obj)
        return obj.metadata.resource_version or version


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Split a chunked stream into JSON lines, whatever the chunk boundaries."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line for line in complete if line.strip())
    if pending.strip():
        yield pending
